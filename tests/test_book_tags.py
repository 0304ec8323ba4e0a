"""What the book states reaches the tags Audiobookshelf and Apple Books read (issue 38): publisher,
subtitle, series and part, ISBN, subjects as genres and the language at file level, in the M4B and
the MP3s (read back with ffprobe, as Audiobookshelf's prober reads them, and mutagen), and its
metadata.json / desc.txt beside the audio."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from books import chapter_xhtml, custom_epub
from mutagen.id3 import ID3
from mutagen.mp4 import MP4

from pipeline.audio import AssemblyOptions, assemble_audiobook
from pipeline.audio.ffmpeg import probe
from pipeline.bench.synthetic_audio import tone_book
from pipeline.ingest import read_book
from pipeline.types import BookMetadata
from tests.conftest import env_for
from tests.e2e_helpers import cli

SERIES_METADATA = (
    '<dc:title id="sub">Being the Second Voyage</dc:title><meta refines="#sub" property="title-type">subtitle</meta>'
    "<dc:publisher>Harbour Press</dc:publisher><dc:date>1999-04-01</dc:date>"
    "<dc:description>Two sailors and a storm.</dc:description>"
    '<dc:identifier id="isbn">urn:isbn:978-0-306-40615-7</dc:identifier>'
    "<dc:subject>Fiction</dc:subject><dc:subject>Sea stories</dc:subject>"
    '<meta property="belongs-to-collection" id="c1">The Voyages</meta>'
    '<meta refines="#c1" property="collection-type">series</meta>'
    '<meta refines="#c1" property="group-position">2</meta>'
)
BOOK = BookMetadata(title="The Storm", authors=("Ann Author",), language="en", publisher="Harbour Press",
                    date="1999-04-01", description="Two sailors and a storm.", subtitle="Being the Second Voyage",
                    series="The Voyages", series_index="2", isbn="9780306406157",
                    subjects=("Fiction", "Sea stories"))


def format_tags(path: Path) -> dict[str, str]:
    """The file-level tags as ffprobe reports them, keys lower-cased (Audiobookshelf compares so)."""
    return {key.lower(): value for key, value in probe(path)["format"].get("tags", {}).items()}


def test_an_epub_states_its_series_isbn_subjects_and_subtitle(tmp_path: Path) -> None:
    path = custom_epub(tmp_path / "b.epub", [("c.xhtml", chapter_xhtml("One", ["Text."]))], title="The Storm",
                       extra_metadata=SERIES_METADATA)
    meta = read_book(path).metadata
    assert (meta.title, meta.subtitle) == ("The Storm", "Being the Second Voyage")
    assert (meta.series, meta.series_index, meta.isbn) == ("The Voyages", "2", "9780306406157")
    assert (meta.publisher, meta.subjects) == ("Harbour Press", ("Fiction", "Sea stories"))


def test_calibre_series_and_an_isbn_scheme(tmp_path: Path) -> None:
    metadata = ('<meta name="calibre:series" content="Old Tales"/><meta name="calibre:series_index" content="3.0"/>'
                '<dc:identifier opf:scheme="ISBN" xmlns:opf="http://www.idpf.org/2007/opf">0-306-40615-2</dc:identifier>')
    path = custom_epub(tmp_path / "b.epub", [("c.xhtml", chapter_xhtml("One", ["Text."]))], version=2,
                       extra_metadata=metadata)
    meta = read_book(path).metadata
    assert (meta.series, meta.series_index, meta.isbn, meta.subjects) == ("Old Tales", "3", "0306406152", ())


@pytest.fixture(scope="module")
def assembled(tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("tags")
    chapters = tone_book(root / "sentences", ["One", "Two"], body_sentences=1)
    options = AssemblyOptions(formats=("m4b", "mp3"), narrator="Nora Narrator")
    return assemble_audiobook(chapters, BOOK, root / "out", root / "work", options)


def test_the_m4b_carries_what_the_book_states_where_audiobookshelf_reads_it(assembled) -> None:  # type: ignore[no-untyped-def]
    [m4b] = [path for path in assembled.outputs if path.suffix == ".m4b"]
    tags = format_tags(m4b)
    assert tags["language"] == "en"  # the file's own tag, not only the audio track's
    assert (tags["publisher"], tags["subtitle"], tags["isbn"]) == ("Harbour Press", "Being the Second Voyage",
                                                                     "9780306406157")
    assert (tags["series"], tags["series-part"]) == ("The Voyages", "2")
    assert tags["genre"] == "Fiction; Sea stories"
    assert tags["composer"] == "Nora Narrator" and tags["album"] == "The Storm"
    assert MP4(m4b).tags["----:com.apple.iTunes:ISBN"][0] == b"9780306406157"  # a valid file for mutagen too
    assert len(probe(m4b)["chapters"]) == 2


def test_each_mp3_carries_it_too(assembled) -> None:  # type: ignore[no-untyped-def]
    mp3s = [path for path in assembled.outputs if path.suffix == ".mp3"]
    assert len(mp3s) == 2
    for mp3 in mp3s:
        tags = format_tags(mp3)
        assert (tags["publisher"], tags["series"], tags["series-part"], tags["isbn"]) == (
            "Harbour Press", "The Voyages", "2", "9780306406157")
        assert tags["genre"] == "Fiction; Sea stories" and tags["language"] == "eng"
        assert ID3(mp3)["TIT3"].text == ["Being the Second Voyage"]


def test_run_tags_the_book_and_writes_audiobookshelf_metadata_beside_it(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    env.pop("TTS_JOBS_BROKER_URL")
    book = custom_epub(tmp_path / "storm.epub", [("c.xhtml", chapter_xhtml("One", ["The wind rose."]))],
                       title="The Storm", extra_metadata=SERIES_METADATA)

    shown = cli(["inspect", str(book)], env, timeout=120)
    assert shown.returncode == 0 and "series: The Voyages #2" in shown.stdout, shown.stderr
    assert "ISBN 9780306406157" in shown.stdout

    result = cli(["run", str(book), "--out", str(tmp_path / "out")], env)

    assert result.returncode == 0, result.stderr
    m4b = Path(result.stdout.strip().splitlines()[-1])
    tags = format_tags(m4b)
    assert (tags["series"], tags["series-part"], tags["isbn"]) == ("The Voyages", "2", "9780306406157")
    assert (tags["language"], tags["genre"], tags["publisher"]) == ("en", "Fiction; Sea stories", "Harbour Press")
    library = json.loads((m4b.parent / "metadata.json").read_text(encoding="utf-8"))
    assert library["series"] == ["The Voyages #2"] and library["genres"] == ["Fiction", "Sea stories"]
    assert (library["title"], library["subtitle"], library["isbn"]) == (
        "The Storm", "Being the Second Voyage", "9780306406157")
    assert (library["publishedYear"], library["language"]) == ("1999", "en")
    assert (m4b.parent / "desc.txt").read_text(encoding="utf-8").strip() == "Two sailors and a storm."


def test_fb2_docx_and_pdf_carry_their_series_isbn_and_keywords(tmp_path: Path) -> None:
    import docx
    from reportlab.pdfgen import canvas

    from tests.office_books import OfficeChapter, write_docx
    from tests.test_ingest_fb2 import fb2_document, write_fb2

    fb2 = fb2_document().replace(
        "<lang>en</lang>", '<lang>en</lang><keywords>sea, storms</keywords><sequence name="The Voyages" number="2"/>'
    ).replace("<publisher>Test Press</publisher>", "<publisher>Test Press</publisher><isbn>978-0-306-40615-7</isbn>")
    meta = read_book(write_fb2(tmp_path / "b.fb2", fb2)).metadata
    assert (meta.series, meta.series_index, meta.isbn, meta.subjects) == (
        "The Voyages", "2", "9780306406157", ("sea", "storms"))

    path = write_docx(tmp_path / "b.docx", "The Storm", [OfficeChapter("One", ["The wind rose over the sea."])])
    document = docx.Document(str(path))
    document.core_properties.keywords = "Fiction; Sea stories"
    document.core_properties.category = "Novel"
    document.core_properties.identifier = "ISBN 978-0-306-40615-7"
    document.save(str(path))
    meta = read_book(path).metadata
    assert (meta.subjects, meta.isbn) == (("Fiction", "Sea stories", "Novel"), "9780306406157")

    pdf = canvas.Canvas(str(tmp_path / "b.pdf"))
    pdf.setTitle("The Storm")
    pdf.setKeywords("Fiction, Sea stories")
    pdf.drawString(72, 720, "The wind rose over the sea, and the ship turned for home at last.")
    pdf.save()
    assert read_book(tmp_path / "b.pdf").metadata.subjects == ("Fiction", "Sea stories")
