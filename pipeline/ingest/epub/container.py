"""The EPUB container: its ``mimetype`` member, and ``META-INF/container.xml``, which names the
package document (the OPF) that everything else is found from."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

from pipeline.errors import BookError
from pipeline.ingest.epub.members import DAMAGED_EPUB_FIX, parse_required_xml
from pipeline.ingest.epub.reading import Reading
from pipeline.ingest.safezip import SafeZip

_CONTAINER = "META-INF/container.xml"
_PACKAGE_MEDIA_TYPES = ("application/oebps-package+xml", "")


def check_mimetype(archive: SafeZip, reading: Reading) -> None:
    """Warn when the ``mimetype`` member is missing or wrong (the book is read anyway); refuse an
    oversized or damaged one."""
    if not archive.has("mimetype"):
        reading.warn("no 'mimetype' member; reading it as an EPUB anyway")
        return
    try:
        mimetype = archive.read("mimetype", max_bytes=1024).strip()
    except BookError:
        raise BookError(
            reading.path,
            "the 'mimetype' member is oversized or damaged, so this is not a sound EPUB",
            "a hostile or damaged file; refuse it",
        ) from None
    if mimetype != b"application/epub+zip":
        reading.warn(
            f"'mimetype' says {mimetype[:60]!r}, not application/epub+zip; reading it as an EPUB anyway"
        )


def package_document_member(archive: SafeZip, path: Path) -> str:
    """The archive path of the package document: the first rootfile of container.xml that is in
    the archive, OPF rootfiles first.

    Raises:
        BookError: container.xml is missing or damaged, or names no package document in the archive.
    """
    if not archive.has(_CONTAINER):
        raise BookError(
            path, f"{_CONTAINER} is missing, so the package document cannot be found", DAMAGED_EPUB_FIX
        )
    root = parse_required_xml(archive, _CONTAINER, path)
    candidates = [rootfile for rootfile in root.iter("{*}rootfile") if rootfile.get("full-path")]
    preferred = [r for r in candidates if r.get("media-type", "") in _PACKAGE_MEDIA_TYPES]
    for rootfile in preferred or candidates:
        member = unquote(rootfile.get("full-path", "")).lstrip("/")
        if archive.has(member):
            return member
    named = candidates[0].get("full-path") if candidates else None
    problem = (
        f"{_CONTAINER} names package document '{named}', which is not in the archive"
        if named
        else f"{_CONTAINER} names no package document"
    )
    raise BookError(path, problem, DAMAGED_EPUB_FIX)
