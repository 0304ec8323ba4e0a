"""Builders for fixture books, made in code so no binary fixture is ever committed.

The valid EPUB builders live in ``pipeline/bench/books.py`` (the benchmarks write their books with
them) and are re-exported here; this module adds the plain formats (``write_txt``,
``write_markdown``, ``write_html``) and the unusual and hostile books the ingestion tests need.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from pipeline.bench.books import (  # noqa: F401  (re-exported for the tests)
    CONTAINER_XML,
    XHTML_HEAD,
    ChapterSpec,
    chapter_xhtml,
    epub_members,
    image_mime,
    nav_document,
    ncx_document,
    opf_document,
    write_epub,
    xhtml_document,
    zip_bytes,
)


def write_txt(path: Path, title: str, chapters: list[tuple[str, list[str]]]) -> Path:
    """Write a UTF-8 text book: the title line, then 'Chapter N: Title' headings and blank-line paragraphs."""
    parts = [title, ""]
    for number, (chapter_title, paragraphs) in enumerate(chapters, start=1):
        parts += [f"Chapter {number}: {chapter_title}" if chapter_title else f"Chapter {number}", ""]
        for paragraph in paragraphs:
            parts += [paragraph, ""]
    path = Path(path)
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def write_markdown(path: Path, title: str, chapters: list[tuple[str, list[str]]]) -> Path:
    """Write a Markdown book: '# Title', then '## Chapter title' sections."""
    parts = [f"# {title}", ""]
    for chapter_title, paragraphs in chapters:
        parts += [f"## {chapter_title}", ""]
        for paragraph in paragraphs:
            parts += [paragraph, ""]
    path = Path(path)
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def write_html(
    path: Path, title: str, chapters: list[tuple[str, list[str]]], *, language: str = "en"
) -> Path:
    """Write an HTML book: <title>, an <h1> book title, then <h2> chapters with <p> paragraphs."""
    body = [f"<h1>{escape(title)}</h1>"]
    for chapter_title, paragraphs in chapters:
        body.append(f"<h2>{escape(chapter_title)}</h2>")
        body.extend(f"<p>{escape(paragraph)}</p>" for paragraph in paragraphs)
    document = (
        f'<!DOCTYPE html>\n<html lang="{language}"><head><meta charset="utf-8"><title>{escape(title)}'
        f"</title></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
    path = Path(path)
    path.write_text(document, encoding="utf-8")
    return path


def custom_epub(
    path: Path,
    documents: Sequence[tuple[str, str]],
    *,
    nav: str | None = None,
    ncx: str | None = None,
    spine: Sequence[str | tuple[str, bool]] | None = None,
    title: str = "Custom Book",
    language: str = "en",
    extra_members: dict[str, bytes | str] | None = None,
    extra_manifest: Sequence[str] = (),
    extra_metadata: str = "",
    guide: str = "",
    landmarks: str = "",
    version: int = 3,
) -> Path:
    """An EPUB from hand-written pieces, for tests of structure.

    Args:
        documents: (file name under OEBPS/, full XHTML document) in manifest order.
        nav: the <ol> of an EPUB 3 nav document (hrefs relative to OEBPS/); None for no nav document.
        ncx: <navPoint> markup of an NCX (srcs relative to OEBPS/); None for no NCX.
        spine: file names in reading order, or (name, linear); default: ``documents`` in order.
        landmarks: a ready-made <nav epub:type="landmarks"> for the nav document.
    """
    ids = {name: f"d{number}" for number, (name, _) in enumerate(documents)}
    members: dict[str, bytes | str] = {
        "mimetype": "application/epub+zip",
        "META-INF/container.xml": CONTAINER_XML,
    }
    manifest = [
        f'<item id="{ids[name]}" href="{name}" media-type="application/xhtml+xml"/>' for name, _ in documents
    ]
    manifest.extend(extra_manifest)
    for name, document in documents:
        members[f"OEBPS/{name}"] = document
    if nav is not None:
        members["OEBPS/nav.xhtml"] = nav_document(nav, language=language, landmarks=landmarks)
        manifest.append(
            '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        )
    if ncx is not None:
        members["OEBPS/toc.ncx"] = ncx_document(title, ncx)
        manifest.append('<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>')
    order = spine if spine is not None else [name for name, _ in documents]
    itemrefs = []
    for entry in order:
        name, linear = (entry, True) if isinstance(entry, str) else entry
        nonlinear = "" if linear else ' linear="no"'
        itemrefs.append(f'<itemref idref="{ids[name]}"{nonlinear}/>')
    members["OEBPS/content.opf"] = opf_document(
        title,
        language=language,
        version=version,
        manifest=manifest,
        spine=itemrefs,
        extra_metadata=extra_metadata,
        guide=guide,
    )
    members.update(extra_members or {})
    path = Path(path)
    path.write_bytes(zip_bytes(members))
    return path


# Sample content that exercises the text stage: dialogue, numbers, money, dates, abbreviations, dashes,
# ellipses, links, emoji, long sentences, Chinese, mixed Chinese and English.
SAMPLE_CHAPTERS: list[tuple[str, list[str]]] = [
    (
        "Chapter I: Arrival",
        [
            "“Good evening,” said Mr. Holmes. “You have been in Afghanistan, I perceive.”",
            "It was 10:30 p.m. on 1895-03-05 — a cold night — and the fare was $3.50, about 20% more than usual.",
            "Dr. Watson sighed... Then he wrote to j.watson@example.com and checked https://www.example.com/cases.",
            "The room measured 5 m by 4.5 m; the temperature was -5°C, and 1,234 people had passed by since the 1890s.",
            "He read Chapter XII of the 2nd volume, pp. 12-15, and laughed 😀 at the footnote.",
        ],
    ),
    (
        "Chapter II: A Very Long Sentence",
        [
            (
                "And so they walked on through the fog, past the shuttered shops and the sleeping cab horses, "
                "along the "
                "embankment where the river ran black and silent under the bridges, while Holmes talked without pause of "
                "violins, of cigar ash, of the peculiar habits of London's cabmen, and of a dozen other things that seemed "
                "to have nothing whatever to do with the case, until at last Watson, footsore and bewildered, asked him "
                "plainly where on earth they were going and why."
            ),
            "Yes.",
            "No.",
        ],
    ),
]
SAMPLE_ZH_CHAPTERS: list[tuple[str, list[str]]] = [
    (
        "第一章 开始",
        [
            "“你好！”他说。今天是2024年3月5日，气温-5℃，他花了¥100买了2个苹果。",
            "会议在10:30开始，大约有12.5%的人迟到了……然后，一切都变了。",
            (
                "这是一个很长很长的句子，里面有很多很多的逗号，而且还在继续，一直继续下去，没有尽头，直到最后终于结束了，"
                "大家都很高兴，因为这个句子真的太长了，需要被切开才能被语音模型正确地读出来。"
            ),
        ],
    ),
    ("第二章 中英混合", ["他在 New York 住了3年，读了《三体》和 The Lord of the Rings。", "好。"]),
]



# --- books with structure that is not prose (line numbers, notes, math, running heads, nested TOCs) ----

_POEM = {
    "en": [
        "Shall I compare thee to a summer's day?",
        "Thou art more lovely and more temperate:",
        "Rough winds do shake the darling buds of May,",
        "And summer's lease hath all too short a date;",
        "Sometime too hot the eye of heaven shines,",
        "And often is his gold complexion dimm'd;",
    ],
    "zh": ["床前明月光", "疑是地上霜", "举头望明月", "低头思故乡", "春眠不觉晓", "处处闻啼鸟"],
}
_PLAY = {
    "en": ("Act II", ["HAMLET. To be, or not to be, that is the question.", "OPHELIA. Good my lord."]),
    "zh": ("第二幕", ["王：明月几时有？", "李：把酒问青天。"]),
}
_LINE_NUMBER_MARKUP = (
    '<span class="linenum">{n}</span>',
    '<span epub:type="linenum">{n}</span>',
    '<span class="line-number">{n}</span>',
)


def poetry_epub(path: Path, *, language: str = "en") -> Path:
    """A poem and a scene of a play whose lines carry margin numbers in four markups: spans classed as
    line numbers (two spellings), ``epub:type="linenum"``, and numbers floated right."""
    lines = []
    for n, line in enumerate(_POEM[language], start=1):
        number = _LINE_NUMBER_MARKUP[n // 2 % 3].format(n=n) if n % 2 == 0 else ""
        lines.append(f'<div class="line">{escape(line)}{number}</div>')
    act, speeches = _PLAY[language]
    play = "".join(
        f'<p>{escape(text)}<span style="float: right">{10 * n}</span></p>'
        for n, text in enumerate(speeches, start=1)
    )
    title = "静夜思" if language == "zh" else "Sonnet"
    documents = [
        ("poem.xhtml", xhtml_document(f"<h1>{title}</h1><div>{''.join(lines)}</div>", language=language)),
        ("play.xhtml", xhtml_document(f"<h1>{act}</h1>{play}", language=language)),
    ]
    nav = f'<ol><li><a href="poem.xhtml">{title}</a></li><li><a href="play.xhtml">{act}</a></li></ol>'
    return custom_epub(path, documents, nav=nav, language=language, title="Poems")


_ENDNOTES = {
    "en": (
        ("Chapter One", "Chapter Two", "Notes"),
        [
            'He entered the room<a epub:type="noteref" href="notes.xhtml#n1" id="r1">1</a> and sat down.',
            "It was late.",
        ],
        [
            'The next day<sup><a href="notes.xhtml#n2" id="r2">2</a></sup> he left'
            '<a href="notes.xhtml#n3" id="r3">[3]</a>.'
        ],
        ["The first note, about the room.", "The second note.", "The third note, about leaving."],
    ),
    "zh": (
        ("第一章", "第二章", "注释"),
        ['他走进房间<a epub:type="noteref" href="notes.xhtml#n1" id="r1">1</a>，坐了下来。', "天色已晚。"],
        ['第二天<sup><a href="notes.xhtml#n2" id="r2">2</a></sup>，他出发了<a href="notes.xhtml#n3" id="r3">③</a>。'],
        ["这是第一条注释。", "这是第二条注释。", "这是第三条注释。"],
    ),
}


def endnotes_epub(path: Path, *, language: str = "en", notes_first_in_spine: bool = False) -> Path:
    """Two chapters whose note references (a ``noteref`` link, a link in a superscript, a bracketed or
    circled mark) point to a notes document whose notes link back; the TOC lists the notes last."""
    titles, one, two, notes = _ENDNOTES[language]

    def chapter(title: str, paragraphs: list[str]) -> str:
        body = f"<h1>{title}</h1>" + "".join(f"<p>{paragraph}</p>" for paragraph in paragraphs)
        return xhtml_document(body, title=title, language=language)

    back = {1: "c1.xhtml#r1", 2: "c2.xhtml#r2", 3: "c2.xhtml#r3"}
    items = "".join(
        f'<li id="n{n}" epub:type="endnote"><p>{escape(text)} '
        f'<a epub:type="backlink" href="{back[n]}">↩</a></p></li>'
        for n, text in enumerate(notes, start=1)
    )
    section = f'<section epub:type="endnotes"><h1>{titles[2]}</h1><ol>{items}</ol></section>'
    documents = [
        ("c1.xhtml", chapter(titles[0], one)),
        ("c2.xhtml", chapter(titles[1], two)),
        ("notes.xhtml", xhtml_document(section, title=titles[2], language=language)),
    ]
    names = [name for name, _ in documents]
    nav = "<ol>" + "".join(f'<li><a href="{n}">{t}</a></li>' for n, t in zip(names, titles)) + "</ol>"
    spine = [names[2], names[0], names[1]] if notes_first_in_spine else None
    return custom_epub(path, documents, nav=nav, spine=spine, language=language, title="Noted")


def math_epub(path: Path, *, language: str = "en") -> Path:
    """A chapter with MathML: inline with ``alttext``, inline and displayed without."""
    mathml = '<math xmlns="http://www.w3.org/1998/Math/MathML"{}><mi>x</mi></math>'
    with_alt = mathml.format(' alttext="x^2 + y^2 = z^2"')
    bare, shown = mathml.format(""), mathml.format(' display="block"')
    if language == "zh":
        body = f"<h1>第一章</h1><p>勾股定理是{with_alt}。</p><p>质能方程{bare}很有名。</p>{shown}<p>证毕。</p>"
    else:
        body = (
            f"<h1>Math</h1><p>Pythagoras says {with_alt}.</p><p>Einstein wrote {bare} once.</p>"
            f"{shown}<p>Done.</p>"
        )
    title = "第一章" if language == "zh" else "Math"
    documents = [("math.xhtml", xhtml_document(body, language=language))]
    nav = f'<ol><li><a href="math.xhtml">{title}</a></li></ol>'
    return custom_epub(path, documents, nav=nav, language=language)


def running_heads_epub(path: Path, *, chapters: int = 5, language: str = "en") -> Path:
    """Chapters each opened by the same header and closed by navigation, as converted manuals are."""
    header = "来自《手册》，第3版" if language == "zh" else "From The Manual, Version 3.2"
    documents, entries = [], []
    for n in range(1, chapters + 1):
        if language == "zh":
            title, text = f"第{n}章", f"这是第{n}章的正文。"
            footer = f'<p><a href="c{n - 1}.xhtml">上一页</a> | <a href="c{n + 1}.xhtml">下一页</a></p>'
        else:
            title, text = f"Chapter {n}", f"This is the text of chapter {n}."
            footer = f'<p>Previous topic</p><p><a href="c{n - 1}.xhtml">Chapter {n - 1}</a></p>'
        body = f'<div class="header">{escape(header)}</div><h1>{title}</h1><p>{text}</p>{footer}'
        documents.append((f"c{n}.xhtml", xhtml_document(body, title=title, language=language)))
        entries.append(f'<li><a href="c{n}.xhtml">{title}</a></li>')
    nav = "<ol>" + "".join(entries) + "</ol>"
    return custom_epub(path, documents, nav=nav, language=language, title="The Manual")


def nested_toc_epub(path: Path) -> Path:
    """An anthology whose TOC nests three levels deep (section, story, part of the story); every story
    has a part named 'I. The Beginning'."""
    documents: list[tuple[str, str]] = []
    nav = ["<ol>"]
    for section, stories in (("SECTION I", ("THE CLOVER", "THE ROSE")), ("SECTION II", ("THE OAK",))):
        name = f"{section.split()[1].lower()}.xhtml"
        documents.append((name, xhtml_document(f"<h1>{section}</h1>")))
        nav.append(f'<li><a href="{name}">{section}</a><ol>')
        for story in stories:
            key = story.split()[1].lower()
            nav.append(f'<li><a href="{key}1.xhtml">{story}</a><ol>')
            for part, title in ((1, "I. The Beginning"), (2, f"II. The {key.title()} Grows")):
                body = f"<h2>{title}</h2><p>Story of {story.lower()}, part {part}.</p>"
                documents.append((f"{key}{part}.xhtml", xhtml_document(body)))
                nav.append(f'<li><a href="{key}{part}.xhtml">{title}</a></li>')
            nav.append("</ol></li>")
        nav.append("</ol></li>")
    nav.append("</ol>")
    return custom_epub(path, documents, nav="".join(nav), title="Anthology")


PLS_DOCUMENT = """<?xml version="1.0" encoding="UTF-8"?>
<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en">
  <lexeme><grapheme>Hermione</grapheme><alias>Her my oh nee</alias></lexeme>
  <lexeme><grapheme>Quidditch</grapheme><phoneme>ˈkwɪdɪtʃ</phoneme></lexeme>
  <lexeme><grapheme>Voldemort</grapheme><grapheme>voldemort</grapheme>
    <alias>Vol de more</alias><alias prefer="true">Vol de mor</alias></lexeme>
</lexicon>"""


def pls_epub(path: Path, chapters: Sequence[ChapterSpec] = (
        ("One", ["Hermione and Hagrid watched Voldemort play Quidditch and Snitch."]),)) -> Path:
    """An EPUB 3 with pronunciation lexicons (PLS): one in the manifest, one linked from the content
    documents only; aliases for Hermione, Voldemort and Hagrid, phonemes alone for Quidditch and Snitch."""
    linked = PLS_DOCUMENT.replace("Hermione", "Hagrid").replace("Her my oh nee", "Hag rid").replace("Quidditch", "Snitch")
    link = '<head><link rel="pronunciation" type="application/pls+xml" href="../linked.pls"/>'
    documents = [(f"text/c{n}.xhtml", chapter_xhtml(title, paragraphs).replace("<head>", link))
                 for n, (title, paragraphs) in enumerate(chapters, start=1)]
    nav = "<ol>" + "".join(f'<li><a href="{name}">{escape(title)}</a></li>'
                           for (name, _), (title, _) in zip(documents, chapters)) + "</ol>"
    return custom_epub(path, documents, nav=nav, extra_members={"OEBPS/names.pls": PLS_DOCUMENT, "OEBPS/linked.pls": linked},
                       extra_manifest=['<item id="pls" href="names.pls" media-type="application/pls+xml"/>'])
