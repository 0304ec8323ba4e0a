"""A PDF's compressed streams measured before PDFium inflates them: PDFium has no cap of its own, so
one small stream that inflates to gigabytes (a decompression bomb) would take all the memory there is.

Every Flate stream that reading the text may inflate (content, font, object streams: not images,
which reading the text never decodes) is inflated here in chunks and counted, under the caps that
bound an EPUB's members: its expansion ratio, its size, and the size of all of them together.
"""

from __future__ import annotations

import mmap
import re
import zlib
from pathlib import Path

from pipeline.errors import BookError
from pipeline.ingest.options import IngestOptions, MiB

_STREAM = re.compile(rb"stream\r?\n")
_ZLIB_HEADERS = (b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda")
_IMAGE = re.compile(rb"/Subtype\s*/Image")
_DICTIONARY_LOOKBACK = 2048  # bytes before 'stream' searched for the stream's dictionary
_CHUNK = 64 * 1024
_RATIO_GRACE_BYTES = 1 * MiB  # small streams may compress absurdly well (a run of spaces) and are harmless


def refuse_stream_bombs(path: Path, options: IngestOptions) -> None:
    """Raise a BookError when a stream of the PDF inflates past the caps.

    Raises:
        BookError: a stream's expansion ratio or size, or all streams' size, is over its cap.
    """
    with path.open("rb") as handle:
        try:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file: PDFium says what is wrong with it
            return
        with data:
            total = 0
            for match in _STREAM.finditer(data):
                start = match.end()
                if data[start : start + 2] not in _ZLIB_HEADERS or _is_image(data, match.start()):
                    continue
                total += _inflated_size(path, data, start, options, options.max_uncompressed_bytes - total)


def _is_image(data: mmap.mmap, at: int) -> bool:
    head = data[max(0, at - _DICTIONARY_LOOKBACK) : at]
    return bool(_IMAGE.search(head[head.rfind(b" obj") + 1 :]))


def _inflated_size(path: Path, data: mmap.mmap, start: int, options: IngestOptions, left: int) -> int:
    """How many bytes the stream at ``start`` inflates to, stopping at the first cap it passes."""
    inflater = zlib.decompressobj()
    consumed = produced = 0
    position = start
    while not inflater.eof and position < len(data):
        chunk = data[position : position + _CHUNK]
        position += len(chunk)
        try:
            produced += len(inflater.decompress(chunk, _CHUNK * 16))
            while inflater.unconsumed_tail:
                produced += len(inflater.decompress(inflater.unconsumed_tail, _CHUNK * 16))
                _check(path, produced, consumed + len(chunk), options, left)
        except zlib.error:
            return produced  # not Flate after all, or damaged: PDFium decides what to make of it
        consumed += len(chunk) - len(inflater.unused_data)
        _check(path, produced, consumed, options, left)
    return produced


def _check(path: Path, produced: int, consumed: int, options: IngestOptions, left: int) -> None:
    too_expanded = produced > _RATIO_GRACE_BYTES and produced > consumed * options.max_compression_ratio
    if too_expanded or produced > min(options.max_member_bytes, left):
        raise BookError(
            path,
            f"a compressed stream inflates to {produced:,} bytes and more (from {consumed:,}): "
            "a decompression bomb or a book too large to read",
            "refuse this file; if it is a genuine book, raise the limit with --max-book-mb",
        )
