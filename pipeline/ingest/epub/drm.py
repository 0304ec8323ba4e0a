"""Refusing DRM-protected EPUBs: their text is encrypted, and reading it would be noise or a crime.

Font obfuscation (IDPF or Adobe, on font files only) is no DRM: it hides nothing that is read.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

from lxml import etree

from pipeline.errors import BookError
from pipeline.ingest.epub.members import MAX_METADATA_XML_BYTES
from pipeline.ingest.safezip import SafeZip
from pipeline.ingest.xmlsafe import parse_xml

_DRM_MARKERS = {
    "META-INF/rights.xml": "Adobe ADEPT",
    "META-INF/license.lcpl": "Readium LCP",
    "META-INF/sinf.xml": "Apple FairPlay",
}
_ENCRYPTION = "META-INF/encryption.xml"
_FONT_EXTENSIONS = (".ttf", ".otf", ".woff", ".woff2", ".eot")
_FONT_OBFUSCATION = frozenset(("http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"))


def refuse_drm(archive: SafeZip, path: Path) -> None:
    """Raise a BookError naming the scheme when the EPUB is DRM-protected."""
    for member, scheme in _DRM_MARKERS.items():
        if archive.has(member):
            raise _drm(path, f"{scheme} ({member})")
    if not archive.has(_ENCRYPTION):
        return
    try:
        root = parse_xml(archive.read(_ENCRYPTION, max_bytes=MAX_METADATA_XML_BYTES))
    except (etree.LxmlError, ValueError):
        raise _drm(path, f"an unreadable {_ENCRYPTION}") from None
    for encrypted in root.iter("{*}EncryptedData"):
        method = next(encrypted.iter("{*}EncryptionMethod"), None)
        algorithm = method.get("Algorithm", "") if method is not None else ""
        reference = next(encrypted.iter("{*}CipherReference"), None)
        uri = unquote(reference.get("URI", "")) if reference is not None else ""
        is_font = uri.lower().endswith(_FONT_EXTENSIONS) and algorithm in _FONT_OBFUSCATION
        if not is_font:  # font obfuscation is harmless; anything else hides the text
            raise _drm(path, f"{_ENCRYPTION} encrypting '{uri or 'content'}'")


def _drm(path: Path, detail: str) -> BookError:
    return BookError(path, f"DRM-protected: {detail}", "use a DRM-free copy of the book")
