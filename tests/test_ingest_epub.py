"""EPUB structure: table of contents, fragments, nesting, front matter, spine fallback, metadata, XHTML."""

from __future__ import annotations

from pathlib import Path

import pytest
from books import (
    chapter_xhtml,
    custom_epub,
    epub_members,
    ncx_document,
    write_epub,
    xhtml_document,
    zip_bytes,
)

from pipeline.ingest import IngestOptions, read_book
from pipeline.text import AnnouncedChapter
from pipeline.types import Chapter


def titles(path: Path, options: IngestOptions | None = None) -> list[str]:
    return [chapter.title for chapter in read_book(path, options).chapters]


def announced(chapter: Chapter) -> str:
    return chapter.announcement if isinstance(chapter, AnnouncedChapter) else ""


def doc(body: str, title: str = "Untitled") -> str:
    return xhtml_document(body, title=title)


# --- table of contents -----------------------------------------------------------------------------


def test_toc_entries_pointing_into_one_file_make_several_chapters(tmp_path: Path):
    body = (
        '<h2 id="c1">One</h2><p>First text.</p><p>More of it.</p>'
        '<h2 id="c2">Two</h2><p>Second text.</p>'
        '<div><h2 id="c3">Three</h2></div><p>Third text.</p>'
    )
    path = custom_epub(
        tmp_path / "b.epub",
        [("all.xhtml", doc(body))],
        nav=(
            '<ol><li><a href="all.xhtml#c1">One</a></li><li><a href="all.xhtml#c2">Two</a></li>'
            '<li><a href="all.xhtml#c3">Three</a></li></ol>'
        ),
    )
    book = read_book(path)
    assert [(c.title, c.paragraphs) for c in book.chapters] == [
        ("One", ("First text.", "More of it.")),
        ("Two", ("Second text.",)),
        ("Three", ("Third text.",)),
    ]


def test_a_chapter_spanning_several_files_is_one_chapter(tmp_path: Path):
    path = custom_epub(
        tmp_path / "b.epub",
        [
            ("c1a.xhtml", chapter_xhtml("One", ["Part A."])),
            ("c1b.xhtml", doc("<p>Part B, same chapter.</p>")),
            ("c2.xhtml", chapter_xhtml("Two", ["Next."])),
        ],
        nav='<ol><li><a href="c1a.xhtml">One</a></li><li><a href="c2.xhtml">Two</a></li></ol>',
    )
    book = read_book(path)
    assert [(c.title, c.paragraphs) for c in book.chapters] == [
        ("One", ("Part A.", "Part B, same chapter.")),
        ("Two", ("Next.",)),
    ]


def test_nested_toc_titles_are_the_chapters_own_and_parts_are_announced(tmp_path: Path):
    path = custom_epub(
        tmp_path / "b.epub",
        [
            ("part1.xhtml", doc("<h1>Part One</h1>")),
            ("c1.xhtml", chapter_xhtml("Chapter 1", ["Text one."])),
            ("c2.xhtml", chapter_xhtml("Chapter 2", ["Text two."])),
            ("part2.xhtml", doc("<h1>Part Two</h1><p>An introduction to the second part.</p>")),
            ("c3.xhtml", chapter_xhtml("Chapter 3", ["Text three."])),
        ],
        nav=(
            '<ol><li><a href="part1.xhtml">Part One</a><ol><li><a href="c1.xhtml">Chapter 1</a></li>'
            '<li><a href="c2.xhtml">Chapter 2</a></li></ol></li>'
            '<li><a href="part2.xhtml">Part Two</a><ol><li><a href="c3.xhtml">Chapter 3</a></li></ol></li></ol>'
        ),
    )
    book = read_book(path)
    assert [(c.title, c.paragraphs) for c in book.chapters] == [
        ("Chapter 1", ("Text one.",)),
        ("Chapter 2", ("Text two.",)),
        ("Part Two", ("An introduction to the second part.",)),  # a part with text of its own is a chapter
        ("Chapter 3", ("Text three.",)),
    ]
    # the listener hears the part where the book enters it; Part Two announced itself
    assert [announced(c) for c in book.chapters] == ["Part One. Chapter 1", "", "", ""]


def test_parent_and_first_child_at_the_same_place_give_one_chapter(tmp_path: Path):
    path = custom_epub(
        tmp_path / "b.epub",
        [
            ("c1.xhtml", chapter_xhtml("Chapter 1", ["Text."])),
            ("c2.xhtml", chapter_xhtml("Chapter 2", ["More."])),
        ],
        nav=(
            '<ol><li><a href="c1.xhtml">Book One</a><ol><li><a href="c1.xhtml">Chapter 1</a></li>'
            '<li><a href="c2.xhtml">Chapter 2</a></li></ol></li></ol>'
        ),
    )
    assert titles(path) == ["Chapter 1", "Chapter 2"]
    assert announced(read_book(path).chapters[0]) == "Book One. Chapter 1"


def test_a_single_root_entry_named_after_the_book_is_not_a_prefix(tmp_path: Path):
    path = custom_epub(
        tmp_path / "b.epub",
        [("c1.xhtml", chapter_xhtml("One", ["Text."])), ("c2.xhtml", chapter_xhtml("Two", ["More."]))],
        title="The Novel",
        nav=(
            '<ol><li><a href="c1.xhtml">The Novel</a><ol><li><a href="c1.xhtml">One</a></li>'
            '<li><a href="c2.xhtml">Two</a></li></ol></li></ol>'
        ),
    )
    assert titles(path) == ["One", "Two"]


def test_epub2_ncx_with_fragments_and_nesting(tmp_path: Path):
    body = '<h2 id="a">Alpha</h2><p>Alpha text.</p><h2 id="b">Beta</h2><p>Beta text.</p>'
    points = (
        '<navPoint id="p1"><navLabel><text>Part I</text></navLabel><content src="text.xhtml#a"/>'
        '<navPoint id="p2"><navLabel><text>Alpha</text></navLabel><content src="text.xhtml#a"/></navPoint>'
        '<navPoint id="p3"><navLabel><text>Beta</text></navLabel><content src="text.xhtml#b"/></navPoint>'
        "</navPoint>"
    )
    path = custom_epub(tmp_path / "b.epub", [("text.xhtml", doc(body))], ncx=points, version=2)
    book = read_book(path)
    assert [(c.title, c.paragraphs) for c in book.chapters] == [
        ("Alpha", ("Alpha text.",)),
        ("Beta", ("Beta text.",)),
    ]
    assert [announced(c) for c in book.chapters] == ["Part I. Alpha", ""]


def test_page_list_and_landmarks_are_never_chapters(tmp_path: Path):
    members = epub_members("B", [("One", ["Text one."]), ("Two", ["Text two."])])
    nav = members["OEBPS/nav.xhtml"]
    assert isinstance(nav, str)
    members["OEBPS/nav.xhtml"] = nav.replace(
        "</body>",
        (
            '<nav epub:type="page-list"><ol><li><a href="text/chapter001.xhtml">1</a></li>'
            '<li><a href="text/chapter002.xhtml">2</a></li></ol></nav>'
            '<nav epub:type="landmarks"><ol><li><a epub:type="bodymatter" href="text/chapter001.xhtml">Start</a></li>'
            "</ol></nav></body>"
        ),
    )
    path = tmp_path / "b.epub"
    path.write_bytes(zip_bytes(members))
    assert titles(path) == ["One", "Two"]


def test_without_a_toc_each_spine_document_is_a_chapter_titled_by_its_heading(tmp_path: Path):
    path = custom_epub(
        tmp_path / "b.epub",
        [("a.xhtml", chapter_xhtml("Alpha", ["A."])), ("b.xhtml", chapter_xhtml("Beta", ["B."]))],
    )
    book = read_book(path)
    assert [(c.title, c.paragraphs) for c in book.chapters] == [("Alpha", ("A.",)), ("Beta", ("B.",))]


def test_a_toc_that_matches_nothing_falls_back_to_the_spine(tmp_path: Path):
    path = custom_epub(
        tmp_path / "b.epub",
        [("a.xhtml", chapter_xhtml("Alpha", ["A."])), ("b.xhtml", chapter_xhtml("Beta", ["B."]))],
        nav='<ol><li><a href="missing.xhtml">Ghost</a></li></ol>',
    )
    assert titles(path) == ["Alpha", "Beta"]


def test_a_single_file_book_without_toc_is_split_at_its_headings(tmp_path: Path):
    body = "<h1>One</h1><p>A.</p><h1>Two</h1><p>B.</p><h1>Three</h1><p>C.</p>"
    path = custom_epub(tmp_path / "b.epub", [("all.xhtml", doc(body))])
    assert titles(path) == ["One", "Two", "Three"]


def test_spine_order_wins_over_manifest_order(tmp_path: Path):
    path = custom_epub(
        tmp_path / "b.epub",
        [("b.xhtml", chapter_xhtml("Second", ["B."])), ("a.xhtml", chapter_xhtml("First", ["A."]))],
        spine=["a.xhtml", "b.xhtml"],
    )
    assert titles(path) == ["First", "Second"]


def test_nonlinear_items_are_skipped_unless_asked_for(tmp_path: Path):
    path = custom_epub(
        tmp_path / "b.epub",
        [
            ("a.xhtml", chapter_xhtml("Story", ["Text."])),
            ("n.xhtml", chapter_xhtml("Answers", ["Answer key."])),
        ],
        spine=["a.xhtml", ("n.xhtml", False)],
    )
    assert titles(path) == ["Story"]
    assert titles(path, IngestOptions(include_nonlinear=True)) == ["Story", "Answers"]


def test_text_after_an_illustration_is_read(tmp_path: Path):
    body = (
        '<h1>One</h1><div class="figure"><img src="pic.png" alt="A map of the island"/>'
        '<p class="caption">The island.</p></div><p>Text after the picture.</p>'
        '<div><img src="b.png" alt=""/>Loose text after another picture.</div>'
    )
    path = custom_epub(
        tmp_path / "b.epub",
        [
            ("c1.xhtml", doc(body)),
            ("plate.xhtml", doc('<div><img src="plate.png" alt="Plate"/></div>')),
            ("c2.xhtml", chapter_xhtml("Two", ["Chapter two text."])),
        ],
        nav='<ol><li><a href="c1.xhtml">One</a></li><li><a href="c2.xhtml">Two</a></li></ol>',
    )
    book = read_book(path)
    assert book.chapters[0].paragraphs == (
        "The island.",
        "Text after the picture.",
        "Loose text after another picture.",
    )
    assert book.chapters[1].paragraphs == ("Chapter two text.",)
    with_alt = read_book(path, IngestOptions(image_alt_text=True))
    assert with_alt.chapters[0].paragraphs[0] == "A map of the island"


# --- front and back matter -----------------------------------------------------------------------------


def test_front_matter_is_left_out_by_default_and_kept_on_request(tmp_path: Path):
    path = custom_epub(
        tmp_path / "b.epub",
        [
            (
                "cover.xhtml",
                doc('<section epub:type="cover"><img src="c.jpg" alt="cover"/><p>My Book</p></section>'),
            ),
            ("title.xhtml", doc('<section epub:type="titlepage"><h1>My Book</h1><p>by Ann</p></section>')),
            (
                "copy.xhtml",
                doc("<p>Copyright © 2024 Ann. All rights reserved.</p><p>ISBN 978-0-00-000000-0</p>"),
            ),
            (
                "toc.xhtml",
                doc(
                    '<h1>Contents</h1><p><a href="c1.xhtml">One</a></p><p><a href="c2.xhtml">Two</a></p>'
                    '<p><a href="c3.xhtml">Three</a></p>'
                ),
            ),
            ("c1.xhtml", chapter_xhtml("One", ["Text one."])),
            ("c2.xhtml", chapter_xhtml("Two", ["Text two."])),
            ("c3.xhtml", chapter_xhtml("Three", ["Text three."])),
            ("index.xhtml", doc('<section epub:type="index"><h1>Index</h1><p>apples, 3</p></section>')),
        ],
        title="My Book",
        nav=(
            '<ol><li><a href="c1.xhtml">One</a></li><li><a href="c2.xhtml">Two</a></li>'
            '<li><a href="c3.xhtml">Three</a></li></ol>'
        ),
    )
    book = read_book(path)
    assert [c.title for c in book.chapters] == ["One", "Two", "Three"]
    assert any("left out front and back matter" in warning for warning in book.warnings)
    kept = titles(path, IngestOptions(keep_front_matter=True))
    assert kept[-4:] == ["One", "Two", "Three", "Index"]
    assert len(kept) >= 6


def test_front_matter_named_in_the_toc_is_recognised_by_its_title(tmp_path: Path):
    path = custom_epub(
        tmp_path / "b.epub",
        [
            ("cp.xhtml", chapter_xhtml("Copyright", ["Published 2024."])),
            ("ded.xhtml", chapter_xhtml("Dedication", ["For my mother."])),
            ("c1.xhtml", chapter_xhtml("Chapter 1", ["Text."])),
            ("also.xhtml", chapter_xhtml("Also by Ann Writer", ["Book A.", "Book B."])),
        ],
        nav=(
            '<ol><li><a href="cp.xhtml">Copyright</a></li><li><a href="ded.xhtml">Dedication</a></li>'
            '<li><a href="c1.xhtml">Chapter 1</a></li><li><a href="also.xhtml">Also by Ann Writer</a></li></ol>'
        ),
    )
    assert titles(path) == ["Dedication", "Chapter 1"]


def test_epub2_guide_marks_front_matter(tmp_path: Path):
    path = custom_epub(
        tmp_path / "b.epub",
        [("t.xhtml", doc("<p>Some Title Page Words</p>")), ("c1.xhtml", chapter_xhtml("One", ["Text."]))],
        guide='<guide><reference type="title-page" href="t.xhtml" title="Title"/></guide>',
    )
    assert titles(path) == ["One"]


def test_the_nav_document_in_the_spine_is_not_read(tmp_path: Path):
    members = epub_members("B", [("One", ["Text one."]), ("Two", ["Text two."])])
    opf = members["OEBPS/content.opf"]
    assert isinstance(opf, str)
    members["OEBPS/content.opf"] = opf.replace(
        '<itemref idref="ch1"/>', '<itemref idref="nav"/><itemref idref="ch1"/>'
    )
    path = tmp_path / "b.epub"
    path.write_bytes(zip_bytes(members))
    assert titles(path) == ["One", "Two"]


# --- XHTML to text --------------------------------------------------------------------------------------


def chapter_of(tmp_path: Path, body: str, options: IngestOptions | None = None) -> tuple[str, ...]:
    path = custom_epub(tmp_path / "b.epub", [("c.xhtml", doc("<h1>T</h1>" + body))])
    return read_book(path, options).chapters[0].paragraphs


def test_lists_tables_quotes_and_headings_keep_their_boundaries(tmp_path: Path):
    body = (
        "<p>Intro.</p><ul><li>First item</li><li>Second <em>item</em></li></ul>"
        "<table><tr><th>Name</th><th>Age</th></tr><tr><td>Ann</td><td>30</td></tr></table>"
        "<blockquote><p>A quoted line.</p></blockquote><h3>A subheading</h3><p>Line one<br/>line two</p>"
    )
    assert chapter_of(tmp_path, body) == (
        "Intro.",
        "First item",
        "Second item",
        "Name, Age",
        "Ann, 30",
        "A quoted line.",
        "A subheading",
        "Line one\nline two",
    )


def test_scripts_styles_page_numbers_and_note_marks_are_dropped(tmp_path: Path):
    body = (
        '<style>p {color: red}</style><script>alert("x")</script>'
        '<p>Before<span epub:type="pagebreak" id="p12" title="12">12</span> after.</p>'
        '<p>A claim<a epub:type="noteref" href="#n1">1</a> and another<sup><a href="#n2">2</a></sup>.</p>'
        '<aside epub:type="footnote" id="n1"><p>The footnote.</p></aside>'
        '<p>Ruby: <ruby>漢<rt>hàn</rt>字<rt>zì</rt></ruby>.</p><p hidden="hidden">Hidden.</p>'
    )
    assert chapter_of(tmp_path, body) == ("Before after.", "A claim and another.", "Ruby: 漢字.")
    # the note is read after the chapter's text, opened by its reference's mark
    read_after = chapter_of(tmp_path, body, IngestOptions(notes="chapter"))
    assert read_after[-2:] == ("Notes", "Note 1. The footnote.")


def test_html_entities_in_xhtml_are_read(tmp_path: Path):
    assert chapter_of(tmp_path, "<p>caf&eacute;&nbsp;au&mdash;lait &amp; more</p>") == (
        "café\xa0au—lait & more",
    )


def test_malformed_xhtml_is_recovered_with_a_warning(tmp_path: Path):
    broken = (
        '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body>'
        "<h1>Broken</h1><p>First para.<p>Second para <b>bold</i> text.</p></body>"
    )
    path = custom_epub(
        tmp_path / "b.epub", [("c.xhtml", broken), ("d.xhtml", chapter_xhtml("Fine", ["Ok."]))]
    )
    book = read_book(path)
    assert book.chapters[0].title == "Broken"
    assert "First para." in " ".join(book.chapters[0].paragraphs)
    assert "Second para" in " ".join(book.chapters[0].paragraphs)
    assert any("malformed XHTML" in warning and "c.xhtml" in warning for warning in book.warnings)


def test_utf16_content_documents_are_read(tmp_path: Path):
    document = chapter_xhtml("Sixteen", ["Wide text."]).replace('encoding="UTF-8"', 'encoding="UTF-16"')
    path = custom_epub(
        tmp_path / "b.epub",
        [("c.xhtml", document)],
        extra_members={"OEBPS/c.xhtml": document.encode("utf-16")},
    )
    assert read_book(path).chapters[0].paragraphs == ("Wide text.",)


# --- metadata ---------------------------------------------------------------------------------------


def test_epub3_metadata_with_refines(tmp_path: Path):
    metadata = (
        '<dc:title id="sub">A Subtitle</dc:title><meta refines="#sub" property="title-type">subtitle</meta>'
        '<dc:title id="main">The Real Title</dc:title><meta refines="#main" property="title-type">main</meta>'
        '<dc:creator id="ed">Ed Itor</dc:creator><meta refines="#ed" property="role">edt</meta>'
        '<dc:creator id="a2">Second Author</dc:creator><meta refines="#a2" property="role">aut</meta>'
        "<dc:publisher>Pub House</dc:publisher><dc:date>2021-05-04</dc:date>"
        "<dc:description>&lt;p&gt;A &lt;b&gt;great&lt;/b&gt; book.&lt;/p&gt;</dc:description>"
    )
    path = custom_epub(
        tmp_path / "b.epub", [("c.xhtml", chapter_xhtml("One", ["Text."]))], title="", extra_metadata=metadata
    )
    meta = read_book(path).metadata
    assert meta.title == "The Real Title"
    assert meta.authors == ("Test Author", "Second Author")  # the editor is not an author
    assert (meta.publisher, meta.date, meta.description) == ("Pub House", "2021-05-04", "A great book.")


def test_epub2_cover_from_meta_name_cover(tmp_path: Path):
    jpeg = b"\xff\xd8\xff\xe0" + b"\x00" * 64
    path = write_epub(tmp_path / "b.epub", "B", [("One", ["Text."])], cover=jpeg, version=2)
    meta = read_book(path).metadata
    assert (meta.cover, meta.cover_mime) == (jpeg, "image/jpeg")


def test_a_cover_that_is_not_an_image_is_left_out_with_a_warning(tmp_path: Path):
    path = custom_epub(
        tmp_path / "b.epub",
        [("c.xhtml", chapter_xhtml("One", ["Text."]))],
        extra_manifest=['<item id="cov" href="cover.jpg" media-type="image/jpeg" properties="cover-image"/>'],
        extra_members={"OEBPS/cover.jpg": b"<html>not an image</html>"},
    )
    book = read_book(path)
    assert book.metadata.cover is None
    assert any("cover" in warning for warning in book.warnings)


def test_missing_title_falls_back_to_the_file_name(tmp_path: Path):
    path = custom_epub(tmp_path / "my-novel.epub", [("c.xhtml", chapter_xhtml("One", ["Text."]))], title="")
    assert read_book(path).metadata.title == "my-novel"


def test_ncx_is_used_when_the_nav_document_has_no_toc(tmp_path: Path):
    points = (
        '<navPoint id="a"><navLabel><text>From NCX</text></navLabel><content src="c1.xhtml"/></navPoint>'
        '<navPoint id="b"><navLabel><text>Second</text></navLabel><content src="c2.xhtml"/></navPoint>'
    )
    path = custom_epub(
        tmp_path / "b.epub",
        [("c1.xhtml", chapter_xhtml("", ["A."])), ("c2.xhtml", chapter_xhtml("", ["B."]))],
        nav="<p>no list</p>",
        ncx=points,
    )
    assert titles(path) == ["From NCX", "Second"]


@pytest.mark.parametrize("version", [2, 3])
def test_chinese_book(tmp_path: Path, version: int):
    path = write_epub(
        tmp_path / "zh.epub",
        "三体",
        [
            ("第一章 科学边界", ["汪淼觉得，来找他的这四个人是一个奇怪的组合。"]),
            ("第二章 台球", ["丁仪的新居是一套三室一厅的房子。"]),
        ],
        language="zh-CN",
        version=version,
    )
    book = read_book(path)
    assert book.metadata.language == "zh-CN"
    assert [c.title for c in book.chapters] == ["第一章 科学边界", "第二章 台球"]


def test_unsupported_script_is_a_warning_or_a_book_error(tmp_path: Path):
    from pipeline.errors import BookError

    path = write_epub(tmp_path / "b.epub", "B", [("One", ["Он сказал привет.", "Fine text."])])
    book = read_book(path)
    assert any("Cyrillic" in warning and "chapter 1 'One'" in warning for warning in book.warnings)
    with pytest.raises(BookError, match="Cyrillic") as raised:
        read_book(path, IngestOptions(fail_on_unsupported_script=True))
    assert str(path) in str(raised.value)


def test_ncx_document_helper_roundtrip():
    assert "<navMap>" in ncx_document("T", [("A", "a.xhtml")])
