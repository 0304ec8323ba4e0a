"""Kindle books (.mobi, .azw3, .azw): unpacked by KindleUnpack (the ``mobi`` package) into a
temporary folder, then read by the EPUB reader (KF8: AZW3 and the KF8 half of a combined MOBI), the
HTML reader (Mobipocket 6) or the PDF reader (Print Replica); the folder is removed afterwards.

The PalmDB header is checked first: a file that is not a Kindle book, or whose text is encrypted
(Kindle DRM), is refused before anything is unpacked; the unpacked files count against the same
byte cap as an EPUB's members, and the EPUB they make is read under the EPUB's caps.
"""

from __future__ import annotations

import re
import shutil
import struct
import tempfile
from dataclasses import replace
from pathlib import Path

from pipeline.errors import BookError
from pipeline.ingest.chapters import RawBook
from pipeline.ingest.epub import read_epub
from pipeline.ingest.html import read_html
from pipeline.ingest.office import dublin_core
from pipeline.ingest.options import IngestOptions
from pipeline.ingest.pdf import read_pdf
from pipeline.ingest.xmlsafe import HostileXmlError, parse_xml

_KINDLE_IDENTS = (b"BOOKMOBI", b"TEXtREAd")
_PALMDB_HEADER = 78
_DRM_FIX = "use a DRM-free copy of the book"
# Mobipocket 6 markup: headings are paragraphs set in a large font (sizes 1-7, 3 the text's)
_FONT_HEADING = re.compile(
    rb'<p\b[^>]*>\s*<font size="?([5-7])"?>\s*(?:<b>)?((?:(?!</?p\b|</font).){1,400}?)(?:</b>)?\s*</font>\s*</p>',
    re.DOTALL | re.IGNORECASE,
)
_GUIDE_TOC = re.compile(rb'<reference\s+type="toc"[^>]*?filepos=0*(\d{1,10})', re.IGNORECASE)


def read_kindle(path: Path, options: IngestOptions) -> RawBook:
    """Read an unencrypted MOBI, AZW or AZW3 book.

    Raises:
        BookError: not a Kindle book, DRM-protected, damaged, or over the caps.
    """
    _check_header(path, options)
    with tempfile.TemporaryDirectory(prefix="tts-jobs-kindle-") as folder:
        unpacked = _unpack(path, Path(folder), options)
        try:
            book = _read_unpacked(unpacked, options)
        except BookError as exc:  # name the user's file, not the temporary one
            raise BookError(path, exc.problem, exc.fix) from None
    book.format = path.suffix.lower().lstrip(".")
    return book


def _check_header(path: Path, options: IngestOptions) -> None:
    size = path.stat().st_size
    if size > options.max_file_bytes:
        raise BookError(
            path,
            f"is {size:,} bytes, over the {options.max_file_bytes:,}-byte limit",
            "split the book, or raise the limit with --max-book-mb",
        )
    with path.open("rb") as handle:
        head = handle.read(_PALMDB_HEADER + 8)
        if len(head) < _PALMDB_HEADER + 8 or head[60:68] not in _KINDLE_IDENTS:
            raise BookError(path, "is not a Kindle book (no MOBI header)", "check the file, or convert it to EPUB")
        (first_record,) = struct.unpack_from(">L", head, _PALMDB_HEADER)
        handle.seek(first_record)
        palmdoc = handle.read(16)
    if len(palmdoc) < 16:
        raise BookError(path, "is a damaged Kindle book (its first record is missing)", "get a fresh copy")
    _, text_length, _, _, encryption = struct.unpack_from(">HxxLHHH", palmdoc)
    if encryption:
        scheme = {1: "old Mobipocket encryption", 2: "Mobipocket/Kindle encryption"}.get(encryption, "encryption")
        raise BookError(path, f"DRM-protected: {scheme}", _DRM_FIX)
    if text_length > options.max_uncompressed_bytes:
        raise BookError(
            path,
            f"says its text is {text_length:,} bytes (more than {options.max_uncompressed_bytes:,})",
            "refuse this file; if it is a genuine book, raise the limit with --max-book-mb",
        )


def _unpack(path: Path, folder: Path, options: IngestOptions) -> Path:
    """The EPUB, HTML or PDF that KindleUnpack makes of the book in ``folder``."""
    from loguru import logger
    from mobi.kindleunpack import unpackBook

    logger.disable("mobi")  # KindleUnpack logs every step; its failures come back as exceptions
    source = folder / f"book{path.suffix.lower()}"
    shutil.copyfile(path, source)
    try:
        unpackBook(str(source), str(folder), epubver="A")
    except Exception as exc:  # KindleUnpack raises anything on a damaged file: one line for all
        problem = " ".join(str(exc).split())[:200] or type(exc).__name__
        if "encrypt" in problem.lower() or "drm" in problem.lower():
            raise BookError(path, f"DRM-protected ({problem})", _DRM_FIX) from None
        raise BookError(path, f"is a damaged Kindle book ({problem})", "get a fresh copy or convert it") from None
    unpacked = sum(file.stat().st_size for file in folder.rglob("*") if file.is_file()) - path.stat().st_size
    if unpacked > options.max_uncompressed_bytes:
        raise BookError(
            path,
            f"unpacks to more than {options.max_uncompressed_bytes:,} bytes",
            "refuse this file; if it is a genuine book, raise the limit with --max-book-mb",
        )
    for candidate in (folder / "mobi8" / "book.epub", folder / "mobi7" / "book.html", folder / "book.001.pdf"):
        if candidate.is_file():
            return candidate
    raise BookError(path, "holds no text that KindleUnpack could unpack", "convert it to EPUB with Calibre")


def _read_unpacked(unpacked: Path, options: IngestOptions) -> RawBook:
    if unpacked.suffix == ".epub":
        return read_epub(unpacked, options)
    if unpacked.suffix == ".pdf":
        return read_pdf(unpacked, options)
    markup, contents_left_out = _mobipocket_markup(unpacked.read_bytes(), options.keep_front_matter)
    unpacked.write_bytes(markup)
    book = read_html(unpacked, options)
    if contents_left_out:
        book.warnings.append("left out the table of contents page (--keep-front-matter reads it)")
    fields = _opf_fields(unpacked.parent / "content.opf")
    book.metadata = replace(
        book.metadata,
        title=fields.get("title") or book.metadata.title,
        authors=tuple(filter(None, [fields.get("creator", "")])) or book.metadata.authors,
        language=fields.get("language") or book.metadata.language,
        publisher=fields.get("publisher", ""),
        date=fields.get("date", ""),
        description=fields.get("description", ""),
    )
    return book


def _mobipocket_markup(html: bytes, keep_contents: bool) -> tuple[bytes, bool]:
    """Mobipocket 6 HTML with its large-font paragraphs as headings, and without the table of
    contents page its guide points to (the page runs to the next page break) unless kept; whether
    one was left out."""
    html = _FONT_HEADING.sub(lambda match: b"<h%d>%s</h%d>" % (8 - int(match.group(1)), match.group(2),
                                                            8 - int(match.group(1))), html)
    toc = None if keep_contents else _GUIDE_TOC.search(html)
    start = html.find(b'<a id="filepos%s"' % toc.group(1)) if toc else -1
    if start < 0:
        return html, False
    end = html.find(b"<mbp:pagebreak", start)
    end = html.find(b"</body>", start) if end < 0 else end
    return (html[:start] + html[end:], True) if end > start else (html, False)


def _opf_fields(opf: Path) -> dict[str, str]:
    """The Dublin Core fields of the package document KindleUnpack wrote beside a Mobipocket 6 book."""
    if not opf.is_file():
        return {}
    try:
        return dublin_core(parse_xml(opf.read_bytes()))
    except (HostileXmlError, ValueError, SyntaxError):
        return {}
