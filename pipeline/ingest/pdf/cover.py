"""A PDF's cover: PDFs have no cover of their own, so the picture that fills most of page 1 stands
for one: its JPEG as stored, or page 1 drawn as a PNG when the picture is stored otherwise."""

from __future__ import annotations

import struct
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pypdfium2 as pdfium

_MIN_SHARE = 0.5  # of page 1's area, for its largest picture to be the cover
_RENDER_WIDTH = 800  # pixels of a cover drawn from the page


def first_page_cover(document: pdfium.PdfDocument) -> tuple[bytes | None, str]:
    """The cover image's bytes and MIME type; (None, '') when page 1 holds no picture that fills it."""
    import pypdfium2.raw as pdfium_c

    if len(document) == 0:
        return None, ""
    page = document[0]
    try:
        width, height = page.get_size()
        largest, largest_area = None, 0.0
        for image in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=2):
            left, bottom, right, top = image.get_bounds()
            area = max(right - left, 0.0) * max(top - bottom, 0.0)
            if area > largest_area:
                largest, largest_area = image, area
        if largest is None or largest_area < _MIN_SHARE * width * height:
            return None, ""
        filters = largest.get_filters()
        if filters[-1:] == ["DCTDecode"] and all(name in largest.SIMPLE_FILTERS for name in filters[:-1]):
            return bytes(largest.get_data(decode_simple=True)), "image/jpeg"  # the JPEG as stored
        bitmap = page.render(scale=_RENDER_WIDTH / max(width, 1.0), rev_byteorder=True)
        return _png(bitmap.to_numpy()), "image/png"
    finally:
        page.close()


def _png(pixels) -> bytes:  # type: ignore[no-untyped-def]
    """RGB or RGBA pixels (height × width × channels, uint8) as a PNG file."""
    height, width, channels = pixels.shape
    colour_type = {3: 2, 4: 6}[channels]
    rows = b"".join(b"\x00" + row.tobytes() for row in pixels)
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows, 6)) + _chunk(b"IEND", b"")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
