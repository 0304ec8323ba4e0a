"""Audio assembly: sentence WAVs in, finished audiobooks out (M4B with chapters; MP3/Ogg/FLAC/WAV).

Public API::

    write_sentence_wav(path, waveform, *, durable=True) -> seconds   # used by synthesis, atomic
    SentenceWavWriter().write(key, path, waveform); .seconds()    # a batch: parallel, as they come
    assemble_audiobook(chapters, metadata, out_dir, work_dir, options) -> AssemblyReport
    start_helpers(stitch_helpers_wanted(options, chapters))   # stitch helpers ready ahead (kept)

Each name is imported on first use (``pipeline/lazy_exports.py``): a module that needs one type
does not import the whole assembly.
"""

from pipeline.lazy_exports import lazy_exports

__getattr__ = lazy_exports(globals(), {
    "assemble_audiobook": "pipeline.audio.assemble",
    "SUPPORTED_FORMATS": "pipeline.audio.assembly_types",
    "AssemblyOptions": "pipeline.audio.assembly_types",
    "AssemblyReport": "pipeline.audio.assembly_types",
    "ChapterAudio": "pipeline.audio.assembly_types",
    "ChapterReport": "pipeline.audio.assembly_types",
    "SentenceAudio": "pipeline.audio.assembly_types",
    "start_helpers": "pipeline.audio.stitch_helpers",
    "stitch_helpers_wanted": "pipeline.audio.stitch_helpers",
    "SentenceWavWriter": "pipeline.audio.wavio",
    "write_sentence_wav": "pipeline.audio.wavio",
})

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
