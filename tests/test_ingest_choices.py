"""What a reader hands on besides the text: the chapters a job chose (by number or title, keeping
their numbers), and the book's own pronunciation lexicons (EPUB 3 PLS)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import BookError, OptionError
from pipeline.ingest import IngestOptions, read_book
from pipeline.ingest.selection import check_selection
from tests.books import pls_epub, write_epub

CHAPTERS = [(title, [f"The chapter called {title} has words."]) for title in
            ("Loomings", "The Carpet-Bag", "The Spouter-Inn", "The Counterpane", "Breakfast", "The Street")]


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_epub(tmp_path_factory.mktemp("choices") / "moby.epub", "Moby-Dick", CHAPTERS)


@pytest.mark.parametrize("chapters, numbers", [
    (("1-2,5",), [1, 2, 5]),
    (("5-",), [5, 6]),
    (("-2", "6"), [1, 2, 6]),
    (("loomings",), [1]),
    (("  the   STREET ",), [6]),
    (("Carpet",), [2]),  # the one title that holds it
    (("Breakfast", "1"), [1, 5]),
])
def test_chapters_are_chosen_by_number_or_title_and_keep_their_numbers(book: Path, chapters, numbers) -> None:
    read = read_book(book, IngestOptions(chapters=chapters))
    assert [c.index + 1 for c in read.chapters] == numbers
    assert [c.title for c in read.chapters] == [CHAPTERS[n - 1][0] for n in numbers]


@pytest.mark.parametrize("chapters, problem, fix", [
    (("7",), "--chapters 7 goes past the last chapter: it has 6 (1-6)", "tts-jobs inspect BOOK"),
    (("Queequeg",), "--chapters 'Queequeg': no chapter is titled so", "tts-jobs inspect BOOK"),
    (("The S",), "--chapters 'The S' fits 2 chapters: 3 'The Spouter-Inn', 6 'The Street'", "give their numbers"),
])
def test_a_choice_the_book_cannot_meet_is_a_clear_error(book: Path, chapters, problem: str, fix: str) -> None:
    with pytest.raises(BookError) as error:
        read_book(book, IngestOptions(chapters=chapters))
    assert error.value.problem == problem and fix in error.value.fix


@pytest.mark.parametrize("value", ["0", "3-1", "2,0-4", " "])
def test_a_choice_no_book_can_meet_is_refused_before_any_book_is_read(value: str) -> None:
    with pytest.raises(OptionError):
        check_selection([value])


def test_the_books_pls_aliases_are_its_lexicon_and_phonemes_only_are_counted(tmp_path: Path) -> None:
    read = read_book(pls_epub(tmp_path / "pls.epub"))
    # the preferred alias for each grapheme; the entries both lexicons give, once
    assert read.lexicon == (("Hermione", "Her my oh nee"), ("Voldemort", "Vol de mor"),
                            ("voldemort", "Vol de mor"), ("Hagrid", "Hag rid"))
    [warning] = [w for w in read.warnings if "phonemes" in w]
    assert "gives 2 words only as phonemes" in warning and "Quidditch, Snitch" in warning and "--lexicon" in warning
