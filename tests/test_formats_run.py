"""A PDF all the way through `tts-jobs run`: an M4B marked with its chapters, and a read-along EPUB,
the generated edition (as for TXT and Markdown). The other new formats take the same road after
reading (tests/test_ingest_formats_agree.py shows they read the same chapters)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests.conftest import env_for
from tests.e2e_helpers import cli, ffprobe_chapters
from tests.pdf_books import PdfChapter, write_pdf

CHAPTERS = [("The Beginning", ["It was a bright cold day in April.", "The clocks were striking thirteen."]),
            ("The River", ["Alice was sitting by her sister on the bank."])]


def test_run_makes_the_audiobook_and_a_read_along_of_a_pdf(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    env.pop("TTS_JOBS_BROKER_URL")
    # two pages are too few for a running head to repeat: this book has none
    book = write_pdf(tmp_path / "book.pdf", [PdfChapter(title, paragraphs) for title, paragraphs in CHAPTERS],
                     columns=1, title="A Small Book", author="Test Author", heads=False)

    result = cli(["run", str(book), "--out", str(tmp_path / "out"), "-f", "m4b,epub"], env)

    assert result.returncode == 0, result.stderr
    outputs = {Path(line).suffix: Path(line) for line in result.stdout.splitlines() if line.strip()}
    assert [chapter["tags"]["title"] for chapter in ffprobe_chapters(outputs[".m4b"])] == [
        title for title, _ in CHAPTERS]
    with zipfile.ZipFile(outputs[".epub"]) as edition:
        text = " ".join(edition.read(name).decode() for name in edition.namelist() if name.endswith(".xhtml"))
    assert "The clocks were striking thirteen." in text and "bank." in text
