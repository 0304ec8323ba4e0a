"""Audio assembly: sentence WAVs in, finished audiobooks out (M4B with chapters; MP3/Ogg/FLAC/WAV).

Public API::

    write_sentence_wav(path, waveform, *, durable=True) -> seconds   # used by synthesis, atomic
    write_sentence_wavs([(path, waveform), ...]) -> [seconds]     # a batch: parallel
    SentenceWavWriter().write(key, path, waveform); .seconds()    # the same, handed in one by one
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
from pipeline.audio.wavio import SentenceWavWriter, write_sentence_wav, write_sentence_wavs

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
    "write_sentence_wavs",
]
