"""Whether this host's ffmpeg can make the files a book asks for, known before a word is spoken.

The assembly runs ffmpeg only after the whole book is spoken: a missing ffmpeg, one built without
an encoder a format needs (libmp3lame, libopus), or one whose loudness limiter lacks an option the
assembly passes (ffmpeg 4.2's ``alimiter`` has no ``latency``) would fail the job at its end,
after the GPU's work. So `run` sends a twentieth of a second of silence through the very filter
chain and encoders the assembly uses (:class:`pipeline.audio.levelling.Loudness`, the limiter on),
one output per encoder, in one ffmpeg process started at once and read when the other checks are
done (it runs beside them: ~0.15 s), and refuses with one line naming what is missing and the fix.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from pipeline.audio.ffmpeg import ffmpeg_binary
from pipeline.audio.levelling import Loudness
from pipeline.errors import AssemblyError, InputError
from pipeline.types import SAMPLE_RATE

# The encoder each output format needs (srt and vtt need none; WAV is written by ffmpeg when a
# chapter needs the limiter). The M4B and a read-along EPUB's audio use the same AAC options.
ENCODERS = {"m4b": ("aac", "-aac_coder", "fast"), "epub": ("aac", "-aac_coder", "fast"),
            "mp3": ("libmp3lame",), "ogg": ("libopus",), "flac": ("flac",), "wav": ("pcm_s16le",)}
CHECK_SAMPLES = SAMPLE_RATE // 20
_NEWER = "install a newer ffmpeg (Debian 12's 5.1 has it; 4.2 does not) and make sure it is first on PATH"


def encoder_args(formats: tuple[str, ...] | list[str]) -> list[tuple[str, ...]]:
    """The distinct encoders (with their options) that ``formats`` need, in a stable order."""
    return sorted({ENCODERS[f] for f in formats if f in ENCODERS})


class FfmpegCheck:
    """ffmpeg run once over silence for ``formats``, started now; ``result()`` waits for it. As a
    context manager around a command's other checks: its answer once they pass (raised at the
    block's end), ended unheard when one of them raises (that error is what is said)."""

    def __init__(self, formats: tuple[str, ...] | list[str]) -> None:
        self.encoders = encoder_args(formats)
        self.binary: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._missing: str | None = None
        if not self.encoders:
            return
        try:
            self.binary = ffmpeg_binary()
        except AssemblyError as exc:
            self._missing = str(exc)
            return
        self._process = subprocess.Popen(check_command(self.binary, self.encoders), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def __enter__(self) -> FfmpegCheck:
        return self

    def __exit__(self, failed: type[BaseException] | None, *_: object) -> None:
        if failed is None:
            self.result()
        else:
            self.abandon()

    def abandon(self) -> None:
        """No answer wanted (another check failed first): the run ends, ffmpeg with it."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
        if self._process is not None:
            self._process.communicate()

    def result(self) -> None:
        """Raises InputError naming what this ffmpeg cannot do, and the fix; None when it can."""
        if self._missing is not None:
            raise InputError(self._missing)
        if self._process is None:
            return
        _, stderr = self._process.communicate()
        if self._process.returncode != 0:
            raise InputError(f"ffmpeg at {self.binary} cannot make these files: "
                             f"{explain(stderr.decode(errors='replace'))}")


def check_command(binary: str, encoders: list[tuple[str, ...]]) -> list[str]:
    """Silence in; per encoder, the assembly's gain and limiter chain and that encoder, to nowhere."""
    chain = Loudness(gain_db=1.0, limit_dbfs=-2.5).ffmpeg_filter(CHECK_SAMPLES)
    command = [binary, "-hide_banner", "-nostdin", "-v", "error", "-f", "lavfi",
               "-i", f"anullsrc=r={SAMPLE_RATE}:cl=mono", "-t", f"{CHECK_SAMPLES / SAMPLE_RATE:.3f}"]
    for codec, *options in encoders:
        command += ["-map", "0:a", "-af", chain, "-c:a", codec, *options, "-f", "null", "-"]
    return command


def explain(stderr: str) -> str:
    """What ffmpeg's error output says is missing, and the fix."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("Unknown encoder") or "encoder not found" in line.lower():
            name = line.split("'")[1] if line.count("'") >= 2 else "an encoder"
            return f"it has no {name} encoder (install a full ffmpeg build, e.g. Debian's ffmpeg package)"
        if "alimiter" in line and "not found" in line:
            return f"its loudness limiter (alimiter) lacks an option the assembly uses ({line}): {_NEWER}"
        if "resampling engine is unavailable" in line or "resampler=soxr" in line:
            return f"it was built without the soxr resampler ({line}): install a full ffmpeg build"
    return f"{' / '.join(lines[-3:]) or 'no error message'} (install a full, recent ffmpeg build)"


WORKER_FORMATS = ("m4b", "mp3", "ogg", "flac")


def check_for_worker(warn: Callable[[str], object]) -> None:
    """A worker that assembles books, at its start: raises InputError when its ffmpeg cannot make
    the default M4B (it could finish no book); ``warn`` hears each other format it cannot make
    (a book asking for one fails its assembly with that reason). One ffmpeg run checks them all;
    only when it fails are they checked one by one (side by side), to say which."""
    try:
        FfmpegCheck(WORKER_FORMATS).result()
        return
    except InputError:
        pass
    checks = {audio_format: FfmpegCheck([audio_format]) for audio_format in WORKER_FORMATS}
    try:
        checks.pop("m4b").result()
    except InputError:
        for check in checks.values():
            check.abandon()
        raise
    for audio_format, check in checks.items():
        try:
            check.result()
        except InputError as exc:
            warn(f"{audio_format} files cannot be made here: {exc}")
