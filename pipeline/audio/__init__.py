"""Audio assembly: sentence WAVs in, finished audiobooks out (M4B with chapters; MP3/Ogg/FLAC/WAV).

Public API::

    write_sentence_wav(path, waveform, *, durable=True) -> seconds   # used by synthesis, atomic
    SentenceWavWriter().write(key, path, waveform); .seconds()    # a batch: parallel, as they come
    assemble_audiobook(chapters, metadata, out_dir, work_dir, options) -> AssemblyReport
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
    "write_sentence_wav",
]
