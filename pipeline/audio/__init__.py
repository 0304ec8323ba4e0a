"""Audio assembly: sentence WAVs in, finished audiobooks out (M4B with chapters; MP3/Ogg/FLAC/WAV).

Public API::

    write_sentence_wav(path, waveform, *, durable=True) -> seconds   # used by synthesis, atomic
    SentenceWavWriter().write(key, path, waveform); .seconds()    # a batch: parallel, as they come
    assemble_audiobook(chapters, metadata, out_dir, work_dir, options) -> AssemblyReport
    start_helpers(stitch_helpers_wanted(options, chapters))   # stitch helpers ready ahead (kept)
"""

from pipeline.audio.assemble import assemble_audiobook
from pipeline.audio.assembly_types import (
    SUPPORTED_FORMATS,
    AssemblyOptions,
    AssemblyReport,
    ChapterAudio,
    ChapterReport,
    SentenceAudio,
)
from pipeline.audio.stitch_helpers import start_helpers, stitch_helpers_wanted
from pipeline.audio.wavio import SentenceWavWriter, write_sentence_wav

__all__ = [
    "SUPPORTED_FORMATS",
    "AssemblyOptions",
    "AssemblyReport",
    "ChapterAudio",
    "ChapterReport",
    "SentenceAudio",
    "SentenceWavWriter",
    "assemble_audiobook",
    "start_helpers",
    "stitch_helpers_wanted",
    "write_sentence_wav",
]
