"""The cover image: found in the manifest (EPUB 3 ``cover-image``, the EPUB 2 cover meta, or a
name that says cover) and kept only when its bytes are a JPEG, PNG, GIF or WebP image."""

from __future__ import annotations

import posixpath

from pipeline.errors import BookError
from pipeline.ingest.epub.package import ManifestItem, Package
from pipeline.ingest.epub.reading import Reading
from pipeline.ingest.options import MiB
from pipeline.ingest.safezip import SafeZip

_MAX_COVER_BYTES = 32 * MiB
_IMAGE_MAGIC = {
    b"\xff\xd8\xff": "image/jpeg",
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
}


def read_cover(
    archive: SafeZip, package: Package, legacy_cover: str, reading: Reading
) -> tuple[bytes | None, str]:
    """The cover's bytes and MIME type; (None, '') when there is none or it is left out (warned).

    Args:
        legacy_cover: the content of EPUB 2's ``<meta name="cover">`` ('' when there is none).
    """
    item = _cover_item(package, legacy_cover)
    if item is None or not archive.has(item.member):
        return None, ""
    try:
        data = archive.read(item.member, max_bytes=_MAX_COVER_BYTES)
    except BookError as exc:
        reading.warn(f"cover image left out: {exc.problem}")
        return None, ""
    mime = _sniff_image(data)
    if not mime:
        reading.warn(f"cover '{item.member}' is not a JPEG, PNG, GIF or WebP image; left out")
        return None, ""
    return data, mime


def _cover_item(package: Package, legacy_cover: str) -> ManifestItem | None:
    images = [
        item for item in package.manifest.values() if item.media_type.startswith("image/") and item.member
    ]
    for item in images:
        if "cover-image" in item.properties:
            return item
    if legacy_cover:
        item = package.manifest.get(legacy_cover)
        if item is not None and item.member:
            return item
        for item in images:  # some books put the href, not the id, in <meta name="cover">
            if item.member.endswith(legacy_cover):
                return item
    for item in images:
        if "cover" in item.id.lower() or "cover" in posixpath.basename(item.member).lower():
            return item
    return None


def _sniff_image(data: bytes) -> str:
    for magic, mime in _IMAGE_MAGIC.items():
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return ""
