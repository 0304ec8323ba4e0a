"""Read-along: what the same run makes beside the audiobook from the exact time span of every
sentence it speaks and the words the book writes for it.

    from pipeline.readalong import write_readalong
    read_along = write_readalong(book, sentences, report, options, out_dir, reading=..., identifier=...)

- ``timings``: every sentence's speech in its chapter's audio and in the book's timeline (the M4B's),
  exact to the sample, with its words as written and their place in the book (``<Title>.timings.json``);
- ``subtitles``: SRT and WebVTT, a cue per sentence (long ones split at clause marks);
- ``epub``: an EPUB 3 with media overlays: the book's own text (or, for TXT, Markdown and HTML,
  simple XHTML chapters) highlighted sentence by sentence as its audio plays.

Pure functions over the book, the text stage's sentences and the audio assembly's report: no
database, no Celery.
"""

from pipeline.readalong.outputs import TIMINGS_SUFFIX, ReadAlong, write_readalong
from pipeline.readalong.timings import BookTimings, ChapterTiming, SentenceTiming, book_timings

__all__ = [
    "TIMINGS_SUFFIX",
    "BookTimings",
    "ChapterTiming",
    "ReadAlong",
    "SentenceTiming",
    "book_timings",
    "write_readalong",
]
