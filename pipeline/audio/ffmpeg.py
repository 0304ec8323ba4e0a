"""Running ffmpeg/ffprobe, with failures turned into AssemblyErrors that name the file and the fix."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import AssemblyError

log = logging.getLogger(__name__)

_INSTALL_FIX = "install ffmpeg (Debian/Ubuntu: apt-get install ffmpeg) and make sure it is on PATH"


def ffmpeg_binary() -> str:
    """Path of the ffmpeg executable. Raises AssemblyError if none is installed."""
    return _binary("ffmpeg")


def run_ffmpeg(args: Sequence[str], output: Path, action: str, cwd: Path | None = None, nice: int = 0) -> None:
    """Run ``ffmpeg -y <args>`` quietly.

    Args:
        args: everything after the global options.
        output: the file being produced, named in errors.
        action: what is being done, for the error message ("encode the M4B").
        cwd: directory to run in (for relative input names).
        nice: lower ffmpeg's priority by this much (an encode beside a GPU's feeding threads).

    Raises:
        AssemblyError: ffmpeg is missing or failed; the message carries ffmpeg's last error lines.
    """
    command = [ffmpeg_binary(), "-nostdin", "-hide_banner", "-loglevel", "error", "-y", *args]
    if nice and shutil.which("nice"):
        command = ["nice", "-n", str(nice), *command]
    log.debug("running %s", " ".join(command))
    completed = subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, cwd=cwd
    )
    if completed.returncode != 0:
        detail = _last_lines(completed.stderr.decode("utf-8", "replace"))
        raise AssemblyError(f"{output}: ffmpeg could not {action}: {detail} ({_fix_for_ffmpeg(detail)})")


def probe(path: Path) -> dict:
    """ffprobe's JSON view of a file: format, streams and chapters."""
    command = [
        _binary("ffprobe"),
        "-v",
        "error",
        "-show_format",
        "-show_streams",
        "-show_chapters",
        "-of",
        "json",
        str(path),
    ]
    completed = subprocess.run(command, capture_output=True, check=False)
    if completed.returncode != 0:
        detail = _last_lines(completed.stderr.decode("utf-8", "replace"))
        raise AssemblyError(f"{path}: ffprobe cannot read it: {detail} (the file is damaged; assemble again)")
    return json.loads(completed.stdout)


@dataclass(frozen=True)
class LoudnessReading:
    """What ffmpeg's ebur128 filter measures on a file."""

    integrated_lufs: float
    true_peak_dbtp: float


def measure_loudness(path: Path) -> LoudnessReading:
    """Measure a file's integrated loudness and true peak with ffmpeg's EBU R128 scanner.

    Independent of this package's own meter, so outputs can be checked against it.
    """
    command = [
        ffmpeg_binary(),
        "-nostdin",
        "-hide_banner",
        "-nostats",
        "-i",
        str(path),
        "-af",
        "ebur128=peak=true",
        "-f",
        "null",
        "-",
    ]
    completed = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    text = completed.stderr.decode("utf-8", "replace")
    summary = text[text.rfind("Summary:") :]
    integrated = re.search(r"I:\s+(-?[\d.]+|-inf) LUFS", summary)
    peak = re.search(r"Peak:\s+(-?[\d.]+|-inf) dBFS", summary)
    if completed.returncode != 0 or integrated is None or peak is None:
        raise AssemblyError(
            f"{path}: ffmpeg cannot measure its loudness: {_last_lines(text)} (the file is damaged)"
        )
    return LoudnessReading(float(integrated.group(1)), float(peak.group(1)))


def decode_pcm(path: Path, sample_rate: int) -> np.ndarray:
    """Decode any audio file to mono int16 samples at ``sample_rate`` (for checks and tests)."""
    command = [
        ffmpeg_binary(),
        "-nostdin",
        "-v",
        "error",
        "-i",
        str(path),
        "-map",
        "0:a",
        "-ac",
        "1",
        "-ar",
        str(sample_rate),
        "-f",
        "s16le",
        "-",
    ]
    completed = subprocess.run(command, capture_output=True, check=False)
    if completed.returncode != 0:
        detail = _last_lines(completed.stderr.decode("utf-8", "replace"))
        raise AssemblyError(f"{path}: ffmpeg cannot decode it: {detail} (the file is damaged)")
    return np.frombuffer(completed.stdout, dtype="<i2")


def image_decodes(path: Path) -> bool:
    """Whether ffmpeg can decode the image at ``path`` (a cover it cannot decode breaks the mux)."""
    command = [
        ffmpeg_binary(),
        "-nostdin",
        "-v",
        "error",
        "-xerror",
        "-i",
        str(path),
        "-frames:v",
        "1",
        "-f",
        "null",
        "-",
    ]
    completed = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    return completed.returncode == 0 and not completed.stderr.strip()


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise AssemblyError(f"{name}: not found ({_INSTALL_FIX})")
    return found


def _fix_for_ffmpeg(detail: str) -> str:
    lowered = detail.lower()
    if "no space left" in lowered or "disk quota" in lowered:
        return "the disk is full: free some space and run the assembly again"
    if "permission denied" in lowered or "read-only file system" in lowered:
        return "check that the output directory is writable by this user"
    if "unknown encoder" in lowered or "encoder not found" in lowered:
        return "this ffmpeg build lacks the encoder: install a full ffmpeg build"
    return "check the file named and run the assembly again; report a bug if it persists"


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-count:]) or "no error message"
