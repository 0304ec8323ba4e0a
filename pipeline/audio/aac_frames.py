"""An encoded piece's AAC frames, kept as the M4B writer wants them.

ffmpeg encodes a piece to ADTS: every frame behind a 7-byte header. The encode step (one piece per
core, beside the GPU) walks those headers anyway to count the frames, so it keeps the frames in a
file of their own: a small header, each frame's size, then the frames one after another. The M4B
writer (:mod:`pipeline.audio.m4b`) then builds its frame table from the sizes and copies the frames
into the book's ``mdat`` as one run of bytes per piece, in the kernel: ffmpeg's mux of a 25.8-hour
book (2.2 million ADTS frames, 740 MB) took 13 s on one core after the last sentence.

Layout, big-endian: ``MAGIC``, the frame count (u32), the AudioSpecificConfig (u16), one u16 size
per frame, the frames.
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

MAGIC = b"TTSAACF1"
_HEAD = struct.Struct(">8sIH")
_SIZE = np.dtype(">u2")


@dataclass(frozen=True)
class AacFrames:
    """One piece's frames as kept: what the M4B's tables need, and where the frames lie."""

    path: Path
    config: int  # the AudioSpecificConfig (object type, sampling frequency index, channels)
    sizes: np.ndarray  # bytes of each frame
    frames_at: int  # where the first frame starts in the file

    @property
    def count(self) -> int:
        return len(self.sizes)

    @property
    def frame_bytes(self) -> int:
        return int(self.sizes.sum(dtype=np.int64))


def keep_adts_frames(adts_path: Path, frames_path: Path) -> int:
    """Write the frames of the ADTS file ``adts_path`` to ``frames_path`` (the layout above);
    returns their count.

    Raises:
        ValueError: ``adts_path`` is not a clean ADTS stream of one raw block per frame (damaged).
    """
    data = memoryview(adts_path.read_bytes())
    sizes, frames, config, position = [], [], None, 0
    while position < len(data):
        header = bytes(data[position:position + 9])
        if len(header) < 7 or header[0] != 0xFF or header[1] & 0xF6 != 0xF0:
            raise ValueError(f"{adts_path}: no ADTS header at byte {position}")
        length = ((header[3] & 0x03) << 11) | (header[4] << 3) | (header[5] >> 5)
        header_length = 7 if header[1] & 0x01 else 9  # protection_absent, else a CRC follows
        if length <= header_length or position + length > len(data):
            raise ValueError(f"{adts_path}: bad ADTS frame length at byte {position}")
        if header[6] & 0x03:
            raise ValueError(f"{adts_path}: several raw blocks in the ADTS frame at byte {position}")
        config = config if config is not None else _audio_specific_config(header)
        sizes.append(length - header_length)
        frames.append(data[position + header_length:position + length])
        position += length
    if config is None:
        raise ValueError(f"{adts_path}: no AAC frames")
    with open(frames_path, "wb") as out:
        out.write(_HEAD.pack(MAGIC, len(sizes), config))
        out.write(np.asarray(sizes, dtype=_SIZE).tobytes())
        out.writelines(frames)
    return len(sizes)


def _audio_specific_config(header: bytes) -> int:
    """The two-byte AudioSpecificConfig an MP4 ``esds`` carries, from an ADTS header."""
    object_type = (header[2] >> 6) + 1
    frequency_index = (header[2] >> 2) & 0x0F
    channels = ((header[2] & 0x01) << 2) | (header[3] >> 6)
    return (object_type << 11) | (frequency_index << 7) | (channels << 3)


def read_frames(path: Path) -> AacFrames:
    """The sizes and layout of a frames file (the frames themselves stay on disk).

    Raises:
        ValueError: not a frames file, or cut short.
    """
    with open(path, "rb") as handle:
        head = handle.read(_HEAD.size)
        if len(head) < _HEAD.size or head[:8] != MAGIC:
            raise ValueError(f"{path}: not an AAC frames file")
        _, count, config = _HEAD.unpack(head)
        sizes = np.frombuffer(handle.read(2 * count), dtype=_SIZE)
        end = handle.seek(0, os.SEEK_END)
    frames = AacFrames(path, config, sizes.astype(np.uint32), _HEAD.size + 2 * count)
    if len(sizes) != count or end != frames.frames_at + frames.frame_bytes:
        raise ValueError(f"{path}: the frames file is cut short")
    return frames


def copy_frames(frames: AacFrames, out: BinaryIO, at: int) -> None:
    """Write ``frames``' frames into ``out`` from byte ``at`` on, in the kernel where it can: by
    positioned writes, so that several pieces may be copied into one file at once."""
    left, offset = frames.frame_bytes, frames.frames_at
    with open(frames.path, "rb") as source:
        while left:
            try:
                copied = os.copy_file_range(source.fileno(), out.fileno(), left, offset, at)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                break  # a file system that cannot: copied through this process below
            if copied == 0:
                raise ValueError(f"{frames.path}: the frames file is cut short")
            left, offset, at = left - copied, offset + copied, at + copied
        while left:
            chunk = os.pread(source.fileno(), min(left, shutil.COPY_BUFSIZE), offset)
            if not chunk:
                raise ValueError(f"{frames.path}: the frames file is cut short")
            written = os.pwrite(out.fileno(), chunk, at)
            left, offset, at = left - written, offset + written, at + written
