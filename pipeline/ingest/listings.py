"""Code listings: what a listener hears of a block of program code.

Read aloud token by token, a listing is noise ("tr, th rowspan equals two..."). By default a listing
is announced and skipped ("Code listing, 12 lines, skipped."), in the language of the text around
it; ``--code skip`` leaves it out without a word, ``--code read`` reads it as text. Either way the
listings left out are counted in the book's warnings.

A block is a listing when it is a ``<pre>`` that looks like code (it holds a ``<code>``, a class says
so, or its text has the punctuation of code), a ``<code>`` of several lines alone in its paragraph,
a ``<div>``/``<code>`` whose class says so (``programlisting``, ``codeblock``, ``highlight``,
``sourceCode``...), or a Markdown fence.
"""

from __future__ import annotations

import re

from lxml import etree

from pipeline.ingest.xmlsafe import local_name

_CODE_CLASS = re.compile(
    r"(?:^|[\s_-])(?:code|codeblock|code-block|programlisting|program-listing|listing|sourcecode|source"
    r"|highlight|highlighter|syntax|screen|prettyprint|language-\w+|lang-\w+|brush:?)(?:$|[\s_-])",
    re.IGNORECASE,
)
_POETRY_CLASS = re.compile(r"poem|poetry|verse|stanza|lyrics", re.IGNORECASE)
# Punctuation that prose in a <pre> (a poem, a letter laid out by hand) seldom holds.
_CODE_TEXT = re.compile(r"[{};<>=\[\]]|\w\(|\)\s*$|^\s*(?:#|//|def |import |class |\$ )", re.MULTILINE)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_CAMEL_CASE = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
INLINE_CODE = frozenset(("code", "kbd", "samp", "var", "tt"))


def is_listing(element: etree._Element, name: str) -> bool:
    """Whether a block element holds a code listing (see the module's docstring)."""
    classes = (
        f"{element.get('class') or ''} {element.get('data-type') or ''} {element.get('outputclass') or ''}"
    )
    if name == "pre":
        if _POETRY_CLASS.search(classes):
            return False
        if _CODE_CLASS.search(classes) or any(
            local_name(child) in ("code", "samp", "kbd") for child in element
        ):
            return True
        return bool(_CODE_TEXT.search("".join(element.itertext())))
    if name == "code" and _alone_in_its_block(element):  # <p><code>line<br/>line</code></p>
        return "\n" in "".join(element.itertext()).strip() or any(
            local_name(child) == "br" for child in element
        )
    if name in ("div", "figure", "code", "table"):
        return bool(_CODE_CLASS.search(classes)) and "\n" in "".join(element.itertext()).strip()
    return False


def _alone_in_its_block(element: etree._Element) -> bool:
    parent = element.getparent()
    if parent is None or local_name(parent) not in (
        "p",
        "div",
        "section",
        "body",
        "li",
        "figure",
        "blockquote",
    ):
        return False
    around = (parent.text or "") + (element.tail or "")
    return not around.strip() and len(parent) == 1


def identifier_words(text: str) -> str:
    """The words of identifiers in inline code: 'getElementById' → 'get Element By Id', 'XMLHttpRequest'
    → 'XML Http Request' (underscores already part words), a call's empty brackets silent; numbers stay
    for the text stage to read."""
    if "()" in text:
        text = text.replace("()", "")
    return _CAMEL_CASE.sub(" ", text) if _CAMEL_CASE.search(text) else text


def element_lines(element: etree._Element) -> int:
    """The lines of a listing element that hold anything, its line breaks (``<br/>``) counted too."""
    breaks = sum(1 for item in element.iter() if local_name(item) == "br")
    return max(listing_lines("".join(element.itertext())), breaks + 1 if breaks else 0)


def listing_lines(text: str) -> int:
    """The lines of a listing that hold anything."""
    return sum(1 for line in text.splitlines() if line.strip())


def announcement(lines: int, chinese: bool) -> str:
    """What is said in a listing's place: 'Code listing, 12 lines, skipped.' or '代码清单，12行，略过。'
    (the text stage reads the number in the sentence's language)."""
    if chinese:
        return f"代码清单，{lines}行，略过。"
    return f"Code listing, {lines} {'line' if lines == 1 else 'lines'}, skipped."


def chinese_around(language: str, nearby: str) -> bool:
    """Whether words supplied here are said in Chinese: the document's language, else the text before."""
    if language:
        return language.lower().startswith("zh")
    return bool(_CJK.search(nearby))
