"""Audio assembly: sentence WAVs in, finished audiobooks out (M4B with chapters; MP3/Ogg/FLAC/WAV).

Public API::

    write_sentence_wav(path, waveform, *, durable=True) -> seconds   # used by synthesis, atomic
    SentenceWavWriter().write(key, path, waveform); .seconds()    # a batch: parallel, as they come
    assemble_audiobook(chapters, metadata, out_dir, work_dir, options) -> AssemblyReport
    with warm_helpers(stitch_helpers_wanted(options, chapters)): ...   # start stitch helpers ahead
"""

from pipeline.audio.assemble import assemble_audiobook
from pipeline.audio.model import (
    SUPPORTED_FORMATS,
    AssemblyOptions,
    AssemblyReport,
    ChapterAudio,
    ChapterReport,
    SentenceAudio,
)
from pipeline.audio.stitch_helpers import stitch_helpers_wanted, warm_helpers
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
    "stitch_helpers_wanted",
    "warm_helpers",
    "write_sentence_wav",
]
