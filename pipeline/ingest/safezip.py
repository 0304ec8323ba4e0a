"""Reading EPUB members in memory, without trusting anything the ZIP headers say.

Nothing is ever extracted to disk. Every member read is decompressed in chunks and counted, with a
cap on the whole book, on one member and on the compression ratio, so a zip bomb stops after at most
one chunk past the cap however its headers lie.
"""

from __future__ import annotations

import itertools
import logging
import posixpath
import stat
import struct
import zipfile
import zlib
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self

from pipeline.errors import BookError
from pipeline.ingest.options import IngestOptions, MiB

logger = logging.getLogger(__name__)

_CHUNK = 256 * 1024
_EOCD_SIGNATURE = b"PK\x05\x06"
_EOCD_SEARCH = 65_557  # 22-byte record + the largest possible archive comment
_RATIO_GRACE_BYTES = 1 * MiB  # tiny members may compress absurdly well (a run of spaces) and are harmless
# Errors that the zipfile and zlib modules raise on damaged archives.
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    struct.error,
)


class SafeZip:
    """A ZIP archive opened for reading members into memory under byte caps.

    Args:
        path: the archive.
        options: the limits to enforce.

    Raises:
        BookError: the file is not a ZIP, is damaged, or holds hostile entries.
    """

    def __init__(self, path: Path, options: IngestOptions) -> None:
        self.path = path
        self._options = options
        self._bytes_read = 0
        _check_entry_count_cheaply(path, options.max_entries)
        try:
            self._zip = zipfile.ZipFile(path)
        except ZIP_ERRORS as exc:
            raise _not_a_zip(path, exc) from None
        try:
            self._infos = _validated_entries(path, self._zip.infolist(), options.max_entries)
        except BaseException:
            self._zip.close()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()

    def has(self, name: str) -> bool:
        return name in self._infos

    def names(self) -> list[str]:
        """The members' names, in the archive's order."""
        return list(self._infos)

    def read(self, name: str, max_bytes: int | None = None) -> bytes:
        """The member's bytes, decompressed and counted chunk by chunk.

        Args:
            name: the member's exact name.
            max_bytes: a tighter cap for this member than the general one.

        Raises:
            BookError: missing member, damaged data or a cap exceeded.
        """
        info = self._infos.get(name)
        if info is None:
            raise BookError(
                self.path, f"the EPUB has no member '{name}'", "the file is incomplete; get a fresh copy"
            )
        cap = self._member_cap(info, max_bytes)
        try:
            data = self._read_counted(info, cap)
        except BookError:
            raise
        except ZIP_ERRORS as exc:
            raise BookError(
                self.path,
                f"member '{name}' is damaged ({_one_line(exc)})",
                "the file is corrupt or truncated; get a fresh copy",
            ) from None
        self._bytes_read += len(data)
        return data

    def _member_cap(self, info: zipfile.ZipInfo, max_bytes: int | None) -> int:
        options = self._options
        ratio_cap = max(info.compress_size * options.max_compression_ratio, _RATIO_GRACE_BYTES)
        caps = [options.max_member_bytes, options.max_uncompressed_bytes - self._bytes_read, ratio_cap]
        if max_bytes is not None:
            caps.append(max_bytes)
        return max(min(caps), 0)

    def _read_counted(self, info: zipfile.ZipInfo, cap: int) -> bytes:
        # Never trust info.file_size: count what really comes out of the decompressor.
        chunks: list[bytes] = []
        total = 0
        with self._zip.open(info) as member:
            while chunk := member.read(_CHUNK):
                total += len(chunk)
                if total > cap:
                    raise self._bomb(info, cap)
                chunks.append(chunk)
        return b"".join(chunks)

    def _bomb(self, info: zipfile.ZipInfo, cap: int) -> BookError:
        return BookError(
            self.path,
            f"member '{info.filename}' decompresses to more than {cap:,} bytes "
            f"(compressed {info.compress_size:,}): a zip bomb or a book too large to read",
            "refuse this file; if it is a genuine book, raise the limit with --max-book-mb",
        )


def _check_entry_count_cheaply(path: Path, max_entries: int) -> None:
    """Refuse archives with too many entries before zipfile builds an object per entry."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - _EOCD_SEARCH))
            tail = handle.read()
    except OSError as exc:
        raise BookError(path, f"cannot be read ({_one_line(exc)})", "check the file's permissions") from None
    at = tail.rfind(_EOCD_SIGNATURE)
    if at < 0 or at + 22 > len(tail):
        return  # zipfile will give the precise complaint
    (entries,) = struct.unpack("<H", tail[at + 10 : at + 12])
    if entries != 0xFFFF and entries > max_entries:
        raise _too_many(path, entries, max_entries)


def _validated_entries(
    path: Path, infos: list[zipfile.ZipInfo], max_entries: int
) -> dict[str, zipfile.ZipInfo]:
    if len(infos) > max_entries:
        raise _too_many(path, len(infos), max_entries)
    _refuse_overlaps(path, infos)
    entries: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        _check_entry(path, info)
        if info.is_dir():
            continue
        if info.filename in entries:
            raise BookError(
                path,
                f"the archive holds '{info.filename}' twice",
                "a damaged or tampered file; get a fresh copy",
            )
        entries[info.filename] = info
    return entries


def _refuse_overlaps(path: Path, infos: list[zipfile.ZipInfo]) -> None:
    """Entries whose data runs into the next entry's header: the 'overlapping files' zip bomb."""
    ordered = sorted(infos, key=lambda info: info.header_offset)
    for current, following in itertools.pairwise(ordered):
        if current.header_offset + current.compress_size > following.header_offset:
            raise BookError(
                path,
                f"members '{current.filename}' and '{following.filename}' overlap in the archive",
                "an overlapping-entries zip bomb or a damaged file; refuse it",
            )


def _check_entry(path: Path, info: zipfile.ZipInfo) -> None:
    name = info.orig_filename  # zipfile cuts names at a NUL byte; the original shows the trick
    problem = unsafe_name_problem(name)
    if problem:
        raise BookError(path, f"member name {name!r} {problem}", "a hostile or damaged archive; refuse it")
    if info.create_system == 3 and stat.S_ISLNK(info.external_attr >> 16):
        raise BookError(path, f"member '{name}' is a symbolic link", "a hostile archive; refuse it")
    if info.flag_bits & 0x1:
        raise BookError(
            path,
            f"member '{name}' is encrypted (password-protected ZIP)",
            "use an unencrypted copy of the book",
        )


def unsafe_name_problem(name: str) -> str:
    """Why a member name could escape the archive, or '' when it is safe."""
    if "\x00" in name:
        return "contains a NUL character"
    if "\\" in name:
        return "contains a backslash"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    if ".." in name.split("/"):
        return "climbs out of the archive with '..'"
    return ""


def resolve_href(base_member: str, href: str) -> str | None:
    """The archive member an href inside ``base_member`` points at, or None if it leaves the archive.

    Fragments and queries must already be removed; percent-decoding is the caller's job.
    """
    if not href or ":" in href.split("/")[0] or href.startswith("/") or "\\" in href or "\x00" in href:
        return None  # a scheme (http:, file:, data:), an absolute path or a hostile name
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(base_member), href))
    if joined in (".", "..") or joined.startswith(("../", "/")):
        return None
    return joined


def _too_many(path: Path, entries: int, max_entries: int) -> BookError:
    return BookError(
        path,
        f"the archive has {entries:,} entries (more than {max_entries:,})",
        "a hostile or damaged archive; refuse it",
    )


def _not_a_zip(path: Path, exc: BaseException) -> BookError:
    return BookError(
        path,
        f"is not a readable ZIP archive, so not an EPUB ({_one_line(exc)})",
        "the file is corrupt, truncated or not an EPUB; re-export or re-download it",
    )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]
