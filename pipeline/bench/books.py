"""Valid EPUB 2 and 3 books written in code: the benchmarks' books, and the tests' fixtures
(``tests/books.py`` adds the plain formats and the hostile and unusual books).

``write_epub`` writes an ordinary book; ``epub_members`` + ``zip_bytes`` give its pieces so a caller
can damage or replace any of them (a hostile OPF, a missing container, a symlink entry) before
writing the archive.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

ChapterSpec = tuple[str, list[str]]

CONTAINER_XML = """<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles>
    <rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
  </rootfiles>
</container>
"""

XHTML_HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" lang="{lang}" xml:lang="{lang}">
<head><title>{title}</title></head>
"""


def chapter_xhtml(
    title: str, paragraphs: Sequence[str], *, language: str = "en", body_attrs: str = ""
) -> str:
    """A content document: an <h1> title (when non-empty) and one <p> per paragraph."""
    heading = f"<h1>{escape(title)}</h1>\n" if title else ""
    body = "\n".join(f"<p>{escape(text)}</p>" for text in paragraphs)
    return (
        XHTML_HEAD.format(lang=language, title=escape(title or "Untitled"))
        + f"<body{body_attrs}>\n<section>\n{heading}{body}\n</section>\n</body>\n</html>\n"
    )


def xhtml_document(body: str, *, title: str = "Untitled", language: str = "en") -> str:
    """A content document around ready-made body markup."""
    return XHTML_HEAD.format(lang=language, title=escape(title)) + f"<body>\n{body}\n</body>\n</html>\n"


def image_mime(data: bytes) -> str:
    return "image/png" if data.startswith(b"\x89PNG") else "image/jpeg"


def epub_members(
    title: str,
    chapters: Sequence[ChapterSpec],
    *,
    author: str = "Test Author",
    language: str = "en",
    cover: bytes | None = None,
    version: int = 3,
) -> dict[str, bytes | str]:
    """Every member of a valid EPUB 2 or 3, by archive name, in archive order (mimetype first)."""
    members: dict[str, bytes | str] = {
        "mimetype": "application/epub+zip",
        "META-INF/container.xml": CONTAINER_XML,
    }
    manifest: list[str] = []
    spine: list[str] = []
    toc: list[tuple[str, str]] = []
    if cover is not None:
        extension = "png" if image_mime(cover) == "image/png" else "jpg"
        members[f"OEBPS/images/cover.{extension}"] = cover
        properties = ' properties="cover-image"' if version >= 3 else ""
        manifest.append(
            f'<item id="cover-image" href="images/cover.{extension}" media-type="{image_mime(cover)}"'
            f"{properties}/>"
        )
        members["OEBPS/text/cover.xhtml"] = xhtml_document(
            f'<section epub:type="cover"><img src="../images/cover.{extension}" alt="Cover"/></section>',
            title="Cover",
            language=language,
        )
        manifest.append('<item id="cover" href="text/cover.xhtml" media-type="application/xhtml+xml"/>')
        spine.append('<itemref idref="cover" linear="yes"/>')
    for number, (chapter_title, paragraphs) in enumerate(chapters, start=1):
        name = f"text/chapter{number:03d}.xhtml"
        members[f"OEBPS/{name}"] = chapter_xhtml(chapter_title, paragraphs, language=language)
        manifest.append(f'<item id="ch{number}" href="{name}" media-type="application/xhtml+xml"/>')
        spine.append(f'<itemref idref="ch{number}"/>')
        toc.append((chapter_title, name))
    if version >= 3:
        members["OEBPS/nav.xhtml"] = nav_document(toc, language=language)
        manifest.append(
            '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        )
    else:
        members["OEBPS/toc.ncx"] = ncx_document(title, toc)
        manifest.append('<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>')
    members["OEBPS/content.opf"] = opf_document(
        title,
        author=author,
        language=language,
        version=version,
        manifest=manifest,
        spine=spine,
        cover_id="cover-image" if cover is not None and version < 3 else "",
    )
    return members


def opf_document(
    title: str,
    *,
    author: str = "Test Author",
    language: str = "en",
    version: int = 3,
    manifest: Iterable[str] = (),
    spine: Iterable[str] = (),
    cover_id: str = "",
    extra_metadata: str = "",
    guide: str = "",
) -> str:
    """A package document; ``manifest`` and ``spine`` are ready-made <item>/<itemref> lines."""
    toc_attr = ' toc="ncx"' if version < 3 else ""
    cover_meta = f'<meta name="cover" content="{cover_id}"/>' if cover_id else ""
    modified = '<meta property="dcterms:modified">2024-01-01T00:00:00Z</meta>' if version >= 3 else ""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="{"3.0" if version >= 3 else "2.0"}" unique-identifier="uid">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:opf="http://www.idpf.org/2007/opf">
    <dc:identifier id="uid">urn:uuid:12345678-1234-1234-1234-123456789012</dc:identifier>
    <dc:title>{escape(title)}</dc:title>
    <dc:creator>{escape(author)}</dc:creator>
    <dc:language>{escape(language)}</dc:language>
    {modified}{cover_meta}{extra_metadata}
  </metadata>
  <manifest>
    {chr(10).join(manifest)}
  </manifest>
  <spine{toc_attr}>
    {chr(10).join(spine)}
  </spine>
  {guide}
</package>
"""


def nav_document(
    entries: Sequence[tuple[str, str]] | str, *, language: str = "en", landmarks: str = ""
) -> str:
    """An EPUB 3 navigation document; ``entries`` are (title, href) or a ready-made <ol>."""
    if isinstance(entries, str):
        items = entries
    else:
        items = (
            "<ol>\n"
            + "\n".join(f"<li><a href={quoteattr(href)}>{escape(title)}</a></li>" for title, href in entries)
            + "\n</ol>"
        )
    return xhtml_document(
        f'<nav epub:type="toc" id="toc"><h1>Contents</h1>\n{items}\n</nav>\n{landmarks}',
        title="Contents",
        language=language,
    )


def ncx_document(title: str, entries: Sequence[tuple[str, str]] | str) -> str:
    """An EPUB 2 NCX; ``entries`` are (title, src) or ready-made <navPoint> markup."""
    if isinstance(entries, str):
        points = entries
    else:
        points = "\n".join(
            f'<navPoint id="np{n}" playOrder="{n}"><navLabel><text>{escape(label)}</text></navLabel>'
            f"<content src={quoteattr(src)}/></navPoint>"
            for n, (label, src) in enumerate(entries, start=1)
        )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
  <head><meta name="dtb:uid" content="urn:uuid:12345678-1234-1234-1234-123456789012"/></head>
  <docTitle><text>{escape(title)}</text></docTitle>
  <navMap>
{points}
  </navMap>
</ncx>
"""


def zip_bytes(
    members: dict[str, bytes | str] | Iterable[tuple[str, bytes | str]],
    *,
    compression: int = zipfile.ZIP_DEFLATED,
) -> bytes:
    """A ZIP archive of ``members`` in the given order; 'mimetype' is always stored uncompressed."""
    buffer = io.BytesIO()
    items = members.items() if isinstance(members, dict) else members
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in items:
            payload = data.encode("utf-8") if isinstance(data, str) else data
            archive.writestr(
                zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)),
                payload,
                compress_type=zipfile.ZIP_STORED if name == "mimetype" else compression,
            )
    return buffer.getvalue()


def write_epub(
    path: Path,
    title: str,
    chapters: list[tuple[str, list[str]]],
    *,
    author: str = "Test Author",
    language: str = "en",
    cover: bytes | None = None,
    version: int = 3,
) -> Path:
    """Write a valid EPUB (3 with a nav document, or 2 with an NCX) with one XHTML file per chapter.

    Each chapter file holds an ``<h1>`` with the chapter's title and one ``<p>`` per paragraph; the
    table of contents lists every chapter. With ``cover``, the image and a cover page come first.
    """
    path = Path(path)
    members = epub_members(title, chapters, author=author, language=language, cover=cover, version=version)
    path.write_bytes(zip_bytes(members))
    return path
