"""Encode stitched chapters into the finished files, each written under a temporary name first.

* M4B: every chapter is encoded to AAC on its own (in parallel; see :mod:`pipeline.audio.aac`),
  then the frames are joined into one file (:mod:`pipeline.audio.m4b`).
* MP3 / Ogg Opus / FLAC / WAV: one file per chapter, tagged afterwards with mutagen. A WAV that
  needs no limiter is written by this process (:mod:`pipeline.audio.gained_wav`); the rest goes
  through ffmpeg.

Every file is produced under a hidden name in the output directory and renamed only once encoded
and tagged (:mod:`pipeline.audio.publish`). Bit-exact flags keep encoder version strings out, so
re-running assembly reproduces identical bytes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

from mutagen import MutagenError

from pipeline.audio.aac import AacChapterPlan, AacPiece
from pipeline.audio.aac_frames import keep_adts_frames
from pipeline.audio.assembly_types import AssemblyOptions
from pipeline.audio.failures import os_error_fix, remove_quietly
from pipeline.audio.ffmpeg import run_ffmpeg
from pipeline.audio.gained_wav import write_stitched_wav
from pipeline.audio.levelling import LIMITER_MARGIN_DB, MAX_GAIN_DB, Loudness
from pipeline.audio.loudness import integrated_lufs
from pipeline.audio.publish import partial_path, publish
from pipeline.audio.stitch import MeasuredChapter, StitchedChapter
from pipeline.audio.tags import TrackTags, write_tags
from pipeline.audio.wav_reading import canonical_samples_offset
from pipeline.errors import AssemblyError
from pipeline.temp_files import temporary_sibling
from pipeline.types import SAMPLE_RATE

log = logging.getLogger(__name__)

BITEXACT = ["-fflags", "+bitexact", "-flags:a", "+bitexact"]
_CODEC_ARGS = {
    "mp3": lambda bitrate: ["-c:a", "libmp3lame", "-b:a", bitrate, "-f", "mp3"],
    "ogg": lambda bitrate: ["-c:a", "libopus", "-b:a", bitrate, "-f", "ogg"],
    "flac": lambda bitrate: ["-c:a", "flac", "-compression_level", "5", "-f", "flac"],
    "wav": lambda bitrate: ["-c:a", "pcm_s16le", "-f", "wav"],
}


def chapter_loudness(chapter: MeasuredChapter, options: AssemblyOptions) -> Loudness:
    """The gain that brings one chapter to the target loudness, and a limiter only if its peaks
    need one. A chapter's treatment depends on that chapter alone."""
    measured = integrated_lufs([chapter.step_energies])
    if not options.normalize_loudness or math.isinf(measured):
        return Loudness()
    gain = min(options.target_lufs - measured, MAX_GAIN_DB)
    peak_after_gain = 20.0 * math.log10(max(chapter.true_peak, 1.0) / 32768.0) + gain
    ceiling = options.true_peak_db - LIMITER_MARGIN_DB
    return Loudness(gain_db=gain, limit_dbfs=ceiling if peak_after_gain > ceiling else None)


def encode_m4b_piece(
    chapter: StitchedChapter, piece: AacPiece, plan: AacChapterPlan, aac_path: Path, loudness: Loudness,
    bitrate: str, nice: int = 0,
) -> int:
    """Encode one piece of a chapter (often the whole chapter) to AAC and keep its frames in
    ``aac_path`` (:mod:`pipeline.audio.aac_frames`, what the M4B is written from); returns their count.

    The piece is read as raw samples from its first byte in the chapter WAV (which
    :func:`pipeline.audio.stitch.stitch_chapter` writes with the canonical 44-byte header) and
    cut at its end before the gain, so that padding to the plan's length adds silence, never the
    next piece's speech. ``-aac_coder fast``: the default two-loop coder runs at ~25x real time on
    one core, far too slow for a 20-hour book; at speech bitrates the difference is hard to hear.
    """
    first_byte = canonical_samples_offset(chapter.wav_path) + 2 * piece.start
    args = ["-f", "s16le", "-ar", str(SAMPLE_RATE), "-ac", "1", "-skip_initial_bytes", str(first_byte),
            "-i", str(chapter.wav_path), "-map", "0:a", "-map_metadata", "-1"]
    args += ["-af", f"atrim=end_sample={piece.samples}," + loudness.ffmpeg_filter(plan.input_samples)]
    args += ["-c:a", "aac", "-aac_coder", "fast", "-b:a", bitrate, *BITEXACT, "-f", "adts"]
    where = f" from {piece.start / SAMPLE_RATE:.1f} s" if piece.start else ""
    adts_path = temporary_sibling(aac_path)  # what ffmpeg writes, until its frames are kept
    encode_file(args, adts_path, f"encode chapter {chapter.index + 1}{where} to AAC", nice=nice)
    partial = partial_path(aac_path)
    try:
        frames = keep_adts_frames(adts_path, partial)
    except ValueError as exc:
        remove_quietly(partial)
        raise AssemblyError(f"{exc} (ffmpeg wrote a damaged AAC stream; run the assembly again)") from exc
    except OSError as exc:
        remove_quietly(partial)
        raise AssemblyError(f"{aac_path}: cannot write it: {exc.strerror} ({os_error_fix(exc)})") from exc
    finally:
        remove_quietly(adts_path)
    publish(partial, aac_path)
    if frames != plan.expected_frames:
        log.debug("%s: %d AAC frames, %d planned; chapter marks follow the real count",
                  aac_path, frames, plan.expected_frames)
    return frames


def encode_chapter_file(
    chapter: StitchedChapter,
    audio_format: str,
    tags: TrackTags,
    final_path: Path,
    loudness: Loudness,
    bitrate: str,
    nice: int = 0,
) -> Path:
    """Encode one chapter to MP3/Ogg Opus/FLAC/WAV and tag it; returns the final path."""
    if audio_format == "wav" and loudness.limit_dbfs is None:
        return write_stitched_wav(chapter, tags, final_path, loudness.volume_db)
    args = ["-i", str(chapter.wav_path), "-map", "0:a", "-map_metadata", "-1"]
    args += ["-af", loudness.ffmpeg_filter(chapter.samples)]
    args += [*_CODEC_ARGS[audio_format](bitrate), *BITEXACT]
    return encode_file(args, final_path, f"encode chapter {tags.track} as {audio_format}",
                       finish=lambda partial: write_tags(partial, audio_format, tags), nice=nice)


def encode_readalong_audio(
    chapter: StitchedChapter, final_path: Path, loudness: Loudness, bitrate: str, nice: int = 0
) -> Path:
    """Encode one chapter as AAC in MP4 (an audio type every EPUB 3 reader plays) for a read-along
    EPUB. The MP4's edit list hides the encoder's priming, so the file plays exactly the chapter's
    samples from its first: the timings of its sentences hold in it unchanged."""
    args = ["-i", str(chapter.wav_path), "-map", "0:a", "-map_metadata", "-1"]
    args += ["-af", loudness.ffmpeg_filter(chapter.samples)]
    args += ["-c:a", "aac", "-aac_coder", "fast", "-b:a", bitrate, *BITEXACT, "-movflags", "+faststart",
             "-f", "mp4"]
    return encode_file(args, final_path, f"encode chapter {chapter.index + 1} for the read-along EPUB",
                       nice=nice)


def encode_clip(wav_path: Path, audio_format: str, final_path: Path, filters: str,
                bitrate: str = "64k") -> Path:
    """A short WAV (a preview) as ``audio_format`` (a per-chapter format) through ffmpeg's
    ``filters``, untagged, written as the other files are: under a temporary name, then renamed."""
    args = ["-i", str(wav_path), "-map", "0:a", "-map_metadata", "-1", "-af", filters]
    args += ["-ar", str(SAMPLE_RATE), *_CODEC_ARGS[audio_format](bitrate), *BITEXACT]
    return encode_file(args, final_path, f"encode the preview as {audio_format}")


def encode_file(
    args: list[str],
    final_path: Path,
    action: str,
    cwd: Path | None = None,
    finish: Callable[[Path], object] | None = None,
    nice: int = 0,
) -> Path:
    """Run ffmpeg into the partial file, then ``finish`` it (tags), then give it its final name."""
    partial = partial_path(final_path)
    try:
        run_ffmpeg([*args, str(partial)], final_path, action, cwd=cwd, nice=nice)
        if finish is not None:
            finish(partial)
    except (OSError, MutagenError) as exc:
        remove_quietly(partial)
        cause = exc if isinstance(exc, OSError) else exc.__cause__ or exc.__context__
        if isinstance(cause, OSError):
            raise AssemblyError(
                f"{final_path}: cannot write it: {cause.strerror} ({os_error_fix(cause)})"
            ) from exc
        raise AssemblyError(
            f"{final_path}: cannot tag it: {exc} (report a bug with this file's format)"
        ) from exc
    except BaseException:
        remove_quietly(partial)
        raise
    return publish(partial, final_path)
