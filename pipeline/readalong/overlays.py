"""EPUB 3 media overlays: which clip of which chapter's audio plays while each marked sentence is
highlighted, and the SMIL documents that say so.

Within a chapter's audio the clips are contiguous: each marked sentence's clip runs from the start
of its speech to the start of the next marked sentence's clip (the pause after it included), the
first from the chapter's first sample, the last to its end. So the overlays together play every
sample of every chapter's audio once, and a sentence that is not marked (words the reader supplies,
or one that could not be wrapped) is heard within a neighbour's clip: the next one's where it opens
their paragraph ('Note 2.' before the note's words), else the one before. Times are written in whole
milliseconds, and durations are summed from the same numbers, so the package's ``media:duration``
values add up exactly.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

from pipeline.readalong.subtitles import ms
from pipeline.readalong.timings import ChapterTiming


@dataclass(frozen=True)
class Clip:
    """One ``<par>``: the text fragment ``document#fragment`` and ``audio``'s ``begin:end`` ms."""

    document: str  # the content document's path in the EPUB
    fragment: str
    audio: str  # the chapter audio's path in the EPUB
    begin: int
    end: int


def chapter_clips(chapter: ChapterTiming, audio: str, marked: Mapping[int, tuple[str, str]]) -> list[Clip]:
    """The clips of one chapter's marked sentences, in reading order.

    Args:
        chapter: its timings.
        audio: its audio's path in the EPUB.
        marked: (document, fragment id) by sentence index, for the sentences marked in the text.
    """
    begins: list[tuple[int, int]] = []  # (sentence index, where its clip begins), marked sentences in order
    waiting: int | None = None  # where a run of unmarked sentences of the current paragraph began
    paragraph = None
    for sentence in chapter.sentences:
        if sentence.paragraph != paragraph:
            paragraph, waiting = sentence.paragraph, None
        if sentence.index not in marked:
            waiting = sentence.start if waiting is None else waiting
            continue
        begins.append(
            (sentence.index, 0 if not begins else (waiting if waiting is not None else sentence.start))
        )
        waiting = None
    clips = []
    for number, (index, begin) in enumerate(begins):
        end = begins[number + 1][1] if number + 1 < len(begins) else chapter.samples
        document, fragment = marked[index]
        clips.append(Clip(document, fragment, audio, ms(begin), ms(end)))
    return clips


def longest_rising(values: Sequence[int]) -> set[int]:
    """The values of a longest strictly rising subsequence of ``values`` (patience sorting)."""
    tails: list[int] = []  # tails[k]: the position of the smallest last value of a rising run of k + 1
    tail_values: list[int] = []
    before: list[int] = []  # for each position, the position before it in its run (-1: none)
    for position, value in enumerate(values):
        k = bisect_right(tail_values, value - 1)
        before.append(tails[k - 1] if k else -1)
        if k == len(tails):
            tails.append(position)
            tail_values.append(value)
        else:
            tails[k], tail_values[k] = position, value
    kept: set[int] = set()
    position = tails[-1] if tails else -1
    while position >= 0:
        kept.add(values[position])
        position = before[position]
    return kept


def clock(milliseconds: int) -> str:
    """A SMIL full clock value: '0:01:02.345'."""
    hours, rest = divmod(milliseconds, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, rest = divmod(rest, 1000)
    return f"{hours}:{minutes:02d}:{seconds:02d}.{rest:03d}"


def duration(clips: Sequence[Clip]) -> int:
    return sum(clip.end - clip.begin for clip in clips)


def smil_document(clips: Sequence[Clip], text_href: str, audio_hrefs: Mapping[str, str]) -> bytes:
    """The overlay of one content document.

    Args:
        clips: the document's, in document order.
        text_href: the document as the SMIL refers to it (relative to the SMIL).
        audio_hrefs: each audio path as the SMIL refers to it.
    """
    pars = []
    for number, clip in enumerate(clips, start=1):
        src = quoteattr(f"{text_href}#{clip.fragment}")
        pars.append(
            f'    <par id="par{number}">\n      <text src={src}/>\n'
            f'      <audio src={quoteattr(audio_hrefs[clip.audio])} clipBegin="{clock(clip.begin)}"'
            f' clipEnd="{clock(clip.end)}"/>\n    </par>'
        )
    body = "\n".join(pars)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<smil xmlns="http://www.w3.org/ns/SMIL" xmlns:epub="http://www.idpf.org/2007/ops" version="3.0">\n'
        f"  <body>\n{body}\n  </body>\n</smil>\n"
    ).encode("utf-8")
