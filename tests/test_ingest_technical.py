"""Technical books as a careful narrator reads them: formulas whose alt text is a placeholder, code
listings, navigation lines a documentation toolchain adds, letter-spaced small capitals. EPUBs are
built here; what is checked is what the voice is given (``inspect --sentences`` shows the same) and
the warnings that count what was left out or stood in for."""

from __future__ import annotations

from pathlib import Path

import pytest
from books import custom_epub, xhtml_document

from pipeline.ingest import IngestOptions, read_book
from pipeline.text import split_sentences
from pipeline.types import Book

_MATHML = 'xmlns="http://www.w3.org/1998/Math/MathML"'
_INTEGRAL = "<munderover><mo>∑</mo><mn>0</mn><mi>n</mi></munderover><mi>x</mi>"


def formula(alt: str = "Alternative text not available", markup: str = _INTEGRAL, display: bool = False) -> str:
    shown = ' display="block"' if display else ""
    return f'<math {_MATHML} alttext="{alt}"{shown}>{markup}</math>'


def book_of(tmp_path: Path, body: str, language: str = "en", **options) -> Book:
    title = "一" if language == "zh" else "One"
    documents = [("c.xhtml", xhtml_document(f"<h1>{title}</h1>{body}", language=language))]
    nav = f'<ol><li><a href="c.xhtml">{title}</a></li></ol>'
    path = custom_epub(tmp_path / "b.epub", documents, nav=nav, language=language)
    return read_book(path, IngestOptions(**options))


def sentences(book: Book) -> list[str]:
    return [sentence.text for chapter in book.chapters for sentence in split_sentences(chapter)][1:]


# --- formulas ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alt", ["Alternative text not available", "image", "formula", "eq_0042.png", ""])
def test_a_placeholder_alt_text_is_never_read_and_a_run_of_formulas_gets_one_stand_in(tmp_path: Path, alt: str):
    body = (
        f"<p>Then {formula(alt)}.</p><p>Let {formula(alt)}, {formula(alt)} and {formula(alt)} hold.</p>"
        f"{formula(alt, display=True)}{formula(alt, display=True)}{formula(alt, display=True)}<p>Done.</p>"
    )
    book = book_of(tmp_path, body)
    assert sentences(book) == ["Then a formula.", "Let a formula hold.", "a formula", "Done."]
    assert "7 formulas without a text alternative (alttext) or simple MathML: read as 'a formula' 3 times" in (
        book.warnings[0]
    )
    if alt:
        assert book.warnings[1].startswith("7 formula alt texts only said that none was given")
    assert "vailable" not in " ".join(sentences(book))


def test_chinese_formulas_get_a_chinese_stand_in(tmp_path: Path):
    body = f"<p>于是{formula()}。</p><p>设{formula()}，{formula()}成立。</p><p>证毕。</p>"
    book = book_of(tmp_path, body, language="zh")
    assert sentences(book) == ["于是公式。", "设公式成立。", "证毕。"]
    assert "read as 'a formula' 2 times" in book.warnings[0]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_simple_mathml_is_read_as_the_formula_says(tmp_path: Path, language: str):
    markup = "<mi>a</mi><mo>−</mo><msup><mi>b</mi><mn>2</mn></msup><mo>=</mo><mi>c</mi>"
    if language == "zh":
        body = f"<p>所以{formula(markup=markup)}成立。</p>"
        expected = "所以 a 减 b平方等于 c 成立。"
    else:
        body = f"<p>So {formula(markup=markup)} is simple.</p>"
        expected = "So a minus b squared equals c is simple."
    book = book_of(tmp_path, body, language=language)
    assert sentences(book) == [expected]
    assert "1 formula without a text alternative read from the MathML" in book.warnings


def test_greek_letters_and_fractions_in_mathml_are_named(tmp_path: Path):
    markup = "<mfrac><mi>α</mi><mi>β</mi></mfrac>"
    book = book_of(tmp_path, f"<p>The ratio {formula('', markup)} is small.</p>")
    assert sentences(book) == ["The ratio alpha divided by beta is small."]


# --- code listings ----------------------------------------------------------------------------------------

_LISTING = (
    '<pre><code>&lt;table&gt;\n  &lt;caption&gt;1927 New York Yankees&lt;/caption&gt;\n'
    '  &lt;tr&gt;&lt;th rowspan="2"&gt;Player&lt;/th&gt;&lt;/tr&gt;\n&lt;/table&gt;</code></pre>'
)


def test_a_code_listing_is_announced_and_skipped_by_default(tmp_path: Path):
    book = book_of(tmp_path, f"<p>A table looks like this:</p>{_LISTING}<p>Use <code>max_len=512</code> here.</p>")
    assert sentences(book) == [
        "A table looks like this:",
        "Code listing, four lines, skipped.",
        "Use max len equals five hundred twelve here.",
    ]
    warning = (
        "1 code listing (4 lines) announced and skipped (--code read reads them, --code skip leaves them "
        "out without a word)"
    )
    assert book.warnings == (warning,)


def test_code_skip_leaves_listings_out_and_code_read_reads_them(tmp_path: Path):
    body = f"<p>A table looks like this:</p>{_LISTING}<p>End.</p>"
    skipped = book_of(tmp_path, body, code="skip")
    assert sentences(skipped) == ["A table looks like this:", "End."]
    assert skipped.warnings[0].startswith("1 code listing (4 lines) left out")
    read = book_of(tmp_path, body, code="read")
    assert "New York Yankees" in " ".join(sentences(read)) and not read.warnings


def test_a_chinese_listing_is_announced_in_chinese_and_numbers_in_a_chinese_sentence_stay_chinese(
    tmp_path: Path,
):
    body = (
        "<p>设置如下：</p><pre>buckets = [64, 128, 256, 512]\nmax_len = 512</pre>"
        "<p>设置<code>buckets=[64,128,256,512]</code>即可。</p>"
    )
    texts = sentences(book_of(tmp_path, body, language="zh"))
    assert texts[:2] == ["设置如下：", "代码清单，两行，略过。"]
    assert "六十四、一百二十八、二百五十六、五百一十二" in texts[2]


def test_a_poem_set_in_pre_is_no_listing(tmp_path: Path):
    body = '<pre class="poem">Shall I compare thee\nto a summer\'s day?</pre>'
    assert sentences(book_of(tmp_path, body)) == ["Shall I compare thee, to a summer's day?"]


def test_a_div_classed_as_a_program_listing_is_a_listing(tmp_path: Path):
    body = '<div class="programlisting"><p>x = 1</p>\n<p>y = 2</p></div><p>After.</p>'
    assert sentences(book_of(tmp_path, body)) == ["Code listing, two lines, skipped.", "After."]


# --- navigation and letter spacing -------------------------------------------------------------------------


def test_dita_navigation_lines_are_left_out_and_counted(tmp_path: Path):
    body = (
        "<p>Body text.</p>"
        '<div class="familylinks"><div class="parentlink"><strong>Parent topic:</strong> '
        '<a href="c.xhtml">Installing</a></div></div>'
        '<div class="related-links"><p><strong>Previous topic:</strong> <a href="c.xhtml">Before</a></p>'
        '<p>Next topic: <a href="c.xhtml">After</a></p></div>'
    )
    book = book_of(tmp_path, body)
    assert sentences(book) == ["Body text."]
    assert "left out 3 navigation lines ('Parent topic:', 'Previous topic:', 'Next topic:')" in book.warnings


def test_chinese_navigation_lines_are_left_out(tmp_path: Path):
    body = '<p>正文。</p><div class="familylinks"><p>上级主题： <a href="c.xhtml">安装</a></p></div>'
    assert sentences(book_of(tmp_path, body, language="zh")) == ["正文。"]


def test_letter_spaced_small_capitals_are_read_as_words(tmp_path: Path):
    body = "<p>T h i s  s e c t i o n  describes the rest, as a b c shows.</p>"
    book = book_of(tmp_path, body)
    assert sentences(book) == ["This section describes the rest, as a b c shows."]
    assert "2 letter-spaced words (small capitals) read as words" in book.warnings


def test_the_code_choice_is_kept_with_the_job_and_a_bad_one_is_refused():
    from jobs.choices.options import JobOptions, check_choices
    from pipeline.errors import OptionError

    options = JobOptions(code="skip")
    assert JobOptions.from_json(options.to_json()).reading().code == "skip"
    assert JobOptions.from_json({}).code == "announce"  # a job recorded before the option existed
    with pytest.raises(OptionError, match="unknown --code loud: use announce, skip, read"):
        check_choices(JobOptions(code="loud"))


def test_markdown_fences_follow_the_code_choice(tmp_path: Path):
    path = tmp_path / "b.md"
    path.write_text("# 第一章\n\n设置如下：\n\n```python\nbuckets = [64, 128]\nmax_len = 512\n```\n\n完。\n", encoding="utf-8")
    paragraphs = lambda **options: read_book(path, IngestOptions(**options)).chapters[0].paragraphs
    assert paragraphs() == ("设置如下：", "代码清单，2行，略过。", "完。")
    assert paragraphs(code="skip") == ("设置如下：", "完。")
    assert paragraphs(code="read") == ("设置如下：", "buckets = [64, 128]", "max_len = 512", "完。")


# --- running headers run into the first paragraph ----------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_running_header_run_into_the_first_paragraph_is_left_out_too(tmp_path: Path, language: str):
    header = "来自 手册 第三版" if language == "zh" else "From The Manual, Version 3.2"
    documents, entries = [], []
    for n in range(1, 6):
        title, text = (f"第{n}章", f"这是第{n}章。") if language == "zh" else (f"Chapter {n}", f"This is part {n}.")
        opening = f"<p>{header}</p><p>{text}</p>" if n <= 3 else f"<p>{header} {text}</p>"
        documents.append((f"c{n}.xhtml", xhtml_document(f"{opening}<h1>{title}</h1><p>{text}</p>", language=language)))
        entries.append(f'<li><a href="c{n}.xhtml">{title}</a></li>')
    book = read_book(custom_epub(tmp_path / "r.epub", documents, nav=f"<ol>{''.join(entries)}</ol>", language=language))
    assert all(header not in paragraph for chapter in book.chapters for paragraph in chapter.paragraphs)
    assert book.chapters[4].paragraphs[0] == ("这是第5章。" if language == "zh" else "This is part 5.")
    assert book.warnings[0].startswith("left out 5 running headers and footers")


@pytest.mark.parametrize(
    "language,body,expected",
    [
        ("en", "<p>Call <code>getElementById()</code> with <code>maxLength=512</code>.</p>",
         "Call get Element By Id with max Length equals five hundred twelve."),
        ("zh", "<p>调用<code>XMLHttpRequest</code>，设<code>batch_size=32</code>即可。</p>",
         "调用XML Http Request，设batch size等于三十二即可。"),
    ],
)
def test_inline_code_keeps_identifiers_as_words_and_numbers_in_the_sentence_language(
    tmp_path: Path, language: str, body: str, expected: str
):
    assert sentences(book_of(tmp_path, body, language=language)) == [expected]


def test_a_code_block_of_several_lines_alone_in_its_paragraph_is_a_listing(tmp_path: Path):
    body = "<p>Before.</p><p><code>x = 1<br/>y = 2<br/>z = 3</code></p><p>Keep <code>x = 1</code> inline.</p>"
    assert sentences(book_of(tmp_path, body)) == [
        "Before.",
        "Code listing, three lines, skipped.",
        "Keep x equals one inline.",
    ]


def test_announcements_that_close_every_chapter_are_no_running_footer(tmp_path: Path):
    documents, entries = [], []
    for n in range(1, 6):
        body = f"<h1>Chapter {n}</h1><p>Step {n} is shown below.</p>{_LISTING}"
        documents.append((f"c{n}.xhtml", xhtml_document(body)))
        entries.append(f'<li><a href="c{n}.xhtml">Chapter {n}</a></li>')
    book = read_book(custom_epub(tmp_path / "l.epub", documents, nav=f"<ol>{''.join(entries)}</ol>"))
    assert all(chapter.paragraphs[-1] == "Code listing, 4 lines, skipped." for chapter in book.chapters)
    assert not any("running headers" in warning for warning in book.warnings)


def test_letter_spaced_words_in_spans_of_their_own_are_read_as_words(tmp_path: Path):
    body = '<p><span class="sc">T h i s</span> <span class="sc">s e c t i o n</span> ends here.</p>'
    assert sentences(book_of(tmp_path, body)) == ["This section ends here."]


def test_tex_alt_text_is_read_where_simple_and_stood_in_for_where_not(tmp_path: Path):
    simple = formula(r"\frac{a}{b} \leq \alpha", "<mi>q</mi><mo>+</mo><mtable/>")
    integral = formula(r"\int_0^1 f(x)\,dx", "<mi>q</mi><mo>+</mo><mtable/>")
    book = book_of(tmp_path, f"<p>We have {simple} here.</p><p>And {integral} there.</p>")
    assert sentences(book) == ["We have a divided by b at most alpha here.", "And a formula there."]


def test_placeholder_image_alt_text_is_not_read_even_when_alt_text_is_asked_for(tmp_path: Path):
    body = '<p>See <img src="a.png" alt="image"/> and <img src="b.png" alt="A red door"/> now.</p>'
    assert sentences(book_of(tmp_path, body, image_alt_text=True)) == ["See and A red door now."]


def test_status_names_a_code_choice_that_is_not_the_default():
    from jobs.choices.options import JobOptions
    from jobs.cli.output import describe_options

    assert "code skip" in describe_options(JobOptions(code="skip").shown())
    assert "code" not in describe_options(JobOptions().shown())


def test_letter_spaced_words_without_wider_gaps_are_joined_into_one_word_not_spelled(tmp_path: Path):
    body = "<p>Intro: T h i s s e c t i o n describes it.</p>"
    assert sentences(book_of(tmp_path, body)) == ["Intro: Thissection describes it."]
