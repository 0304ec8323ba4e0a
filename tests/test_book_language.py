"""A book's language from the share of its text, and --language to say it (issue 38): a mostly
English book tagged Chinese is tagged English, with a warning; --language overrules both, and a
value that is no language tag is refused before anything is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from books import chapter_xhtml, custom_epub

from jobs.choices.options import JobOptions
from pipeline.ingest import IngestOptions, read_book
from pipeline.ingest.language import book_language
from pipeline.types import Chapter
from tests.conftest import env_for
from tests.e2e_helpers import cli

ENGLISH = ["He walked into the room and saw a letter on the table.",
           "It was signed 王小明, and it spoke of the harbour and the storm."]
BILINGUAL = ["他走进房间，看见桌上放着一封信。", "He walked into the room and saw a letter on the table."]


def english_book_tagged_chinese(tmp_path: Path) -> Path:
    return custom_epub(tmp_path / "letter.epub", [("c.xhtml", chapter_xhtml("One", ENGLISH))],
                       title="The Letter", language="zh-CN")


def test_a_mostly_english_book_tagged_chinese_is_english(tmp_path: Path) -> None:
    book = read_book(english_book_tagged_chinese(tmp_path))
    assert book.metadata.language == "en"
    assert any("states its language as zh-CN" in warning and "--language zh-CN" in warning
               for warning in book.warnings)


def test_the_users_language_wins(tmp_path: Path) -> None:
    book = read_book(english_book_tagged_chinese(tmp_path), IngestOptions(language="zh-CN"))
    assert book.metadata.language == "zh-CN"
    assert not any("states its language" in warning for warning in book.warnings)


def test_a_bilingual_text_keeps_the_stated_language() -> None:
    chapters = [Chapter(index=0, title="", paragraphs=tuple(BILINGUAL))]
    assert book_language("zh-CN", chapters) == "zh-CN"
    assert book_language("en", chapters) == "en"


def test_inspect_takes_language_as_run_does(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    book = english_book_tagged_chinese(tmp_path)
    shown = cli(["inspect", str(book), "--language", "en_GB", "--json"], env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["language"] == "en-GB"
    assert JobOptions.from_json(JobOptions(language="en-GB").to_json()).reading().language == "en-GB"


@pytest.mark.parametrize("command", ["run", "submit", "inspect", "bulk"])
def test_a_language_that_is_no_tag_is_refused_at_once(tmp_path: Path, settings_factory, command: str) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    book = english_book_tagged_chinese(tmp_path)
    target = str(tmp_path) if command == "bulk" else str(book)
    result = cli([command, target, "--language", "English"], env, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --language 'English' is not a language tag: give one such as en, en-GB, zh or zh-CN")
    assert not (tmp_path / "data" / "audio").exists()
