"""Real weights are checked against the release's sha256 list, once per file as it is on disk.

Hashing the ~1.1 GB of weights costs about a second at every start, so a file whose identity
(inode, size, modification time) is the one recorded when it last matched is not hashed again.
The record lives beside the weights (``tts_jobs_verified.json``); where that folder is read-only
every start hashes, as before.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from pipeline.engine.modules.release import RELEASE_SHA256
from pipeline.engine.weights import ASSET_FILES, ModelFiles
from pipeline.errors import ModelError
from pipeline.files import file_sha256

log = logging.getLogger(__name__)

VERIFIED_RECORD = "tts_jobs_verified.json"


def verify_real_weights(files: ModelFiles, expected: Mapping[str, str] = RELEASE_SHA256) -> None:
    """Check real weights against the sha256 list of the chattts 0.2.5 release.

    Raises:
        ModelError: naming the first file whose digest differs.
    """
    if files.synthetic:
        return
    record_path = files.root / VERIFIED_RECORD
    known = _read_record(record_path)
    verified: dict[str, list[int]] = {}
    for key, relative in ASSET_FILES.items():
        path = files.asset(relative)
        identity = _identity(path)
        if known.get(relative) != identity and file_sha256(path) != expected[key]:
            raise ModelError(f"{path}: sha256 does not match chattts 0.2.5's list; the file is "
                             "corrupt or from another release: download it again "
                             "(`tts-jobs model download`)")
        verified[relative] = identity
    if verified != known:
        _write_record(record_path, verified)


def _identity(path: Path) -> list[int]:
    stat = path.stat()  # through symlinks: the Hugging Face cache links to its blobs
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns]


def _read_record(path: Path) -> dict[str, list[int]]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _write_record(path: Path, verified: dict[str, list[int]]) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        temporary.write_text(json.dumps(verified, indent=1), encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:  # a read-only model folder: every start hashes
        log.info("%s: not recorded (%s); the weights are hashed again at the next start", path, exc)
        temporary.unlink(missing_ok=True)
