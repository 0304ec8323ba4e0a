"""An M4B encoded in pieces, or with its first chapters assembled ahead (in this process or by
another), plays as the one encoded chapter by chapter at the end: the same length, every sentence
where it is there (within one AAC frame), every chapter mark at its audio."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.audio import AssemblyOptions, assemble_audiobook
from pipeline.audio.aac import FRAME
from pipeline.audio.ffmpeg import decode_pcm, probe
from pipeline.bench.synthetic_audio import tone_book
from pipeline.types import SAMPLE_RATE, BookMetadata
from tests.m4b_encodes import spy_m4b_encodes
from tests.test_audio_m4b import METADATA


def test_long_chapters_are_encoded_in_pieces_that_play_as_one(tmp_path, monkeypatch):
    """A book of a few long chapters (a plain-text book without headings is one) has its M4B
    encoded in pieces cut in the pauses, one core each, and plays like the same book encoded
    chapter by chapter: the same length, every sentence starting where it does there (within
    one AAC frame), and each chapter mark where its audio starts."""
    from pipeline.audio import ahead, early_m4b

    chapters = tone_book(tmp_path / "sentences", ["First", "Second"], body_sentences=11, seconds=0.3)
    cuts: list[int] = []
    real_cut = early_m4b.cut_into_pieces
    monkeypatch.setattr(early_m4b, "cut_into_pieces",
                        lambda *args: cuts.append(len(real_cut(*args))) or real_cut(*args))
    options = AssemblyOptions(normalize_loudness=False, threads=2, chapter_pause_ms=1500)

    monkeypatch.setattr(ahead, "MIN_PIECE_SECONDS", 3.0)
    pieces = assemble_audiobook(chapters, BookMetadata(title="Pieces"), tmp_path / "pieces", tmp_path / "w1",
                                options)
    monkeypatch.setattr(ahead, "MIN_PIECE_SECONDS", 3600.0)
    whole = assemble_audiobook(chapters, BookMetadata(title="Whole"), tmp_path / "whole", tmp_path / "w2",
                               options)

    assert cuts[0] >= 5 and cuts[1] == 2  # both chapters cut, then each whole
    decoded = [decode_pcm(report.outputs[0], SAMPLE_RATE).astype(np.int32) for report in (pieces, whole)]
    assert abs(len(decoded[0]) - len(decoded[1])) <= FRAME
    onsets = [_onsets(samples) for samples in decoded]
    assert len(onsets[0]) == len(onsets[1]) == 24
    assert max(abs(a - b) for a, b in zip(*onsets, strict=True)) <= FRAME
    marks = [[round(float(m["start_time"]) * SAMPLE_RATE) for m in probe(r.outputs[0])["chapters"]]
             for r in (pieces, whole)]
    second_chapter_onset = onsets[0][12]
    assert abs(marks[0][1] - marks[1][1]) <= FRAME and 0 <= second_chapter_onset - marks[0][1] <= FRAME


def _onsets(samples: np.ndarray) -> list[int]:
    """Where each tone burst starts: sound after at least 0.1 s of quiet."""
    loud = np.flatnonzero(np.abs(samples) > 0.01 * 32768)
    gaps = np.flatnonzero(np.diff(loud) > SAMPLE_RATE // 10)
    return [int(loud[0])] + [int(loud[i + 1]) for i in gaps]


def test_chapters_assembled_ahead_make_the_same_audiobook_and_are_not_encoded_again(tmp_path, monkeypatch):
    """The first chapters of a book, assembled ahead (measured, levelled, stitched, encoded) while
    the rest is still being spoken, are taken by the assembly as they are: only the later
    chapters are encoded then, and the M4B plays like one assembled all at the end — the same
    length, every sentence where it is there (within a frame), every chapter mark at its audio.
    A chapter whose sentences changed since it was prepared is assembled anew, with all after it."""
    from pipeline.audio.ahead import BookAhead

    titles = ["One", "Two", "Three", "Four"]
    chapters = tone_book(tmp_path / "sentences", titles, body_sentences=4, seconds=0.3)
    options = AssemblyOptions(threads=2, chapter_pause_ms=1500)
    encoded = spy_m4b_encodes(monkeypatch)  # chapter indices of the pieces the assembly itself encodes

    at_the_end = assemble_audiobook(chapters, METADATA, tmp_path / "end", tmp_path / "w1", options)
    assert sorted(set(encoded)) == [0, 1, 2, 3]
    encoded.clear()
    book = BookAhead(tmp_path / "w2", options, chapters=4)
    book.prepare(chapters[:1])
    book.prepare(chapters[1:3])
    with pytest.raises(ValueError):
        book.prepare(chapters[3:])  # the last chapter is the assembly's: it ends the M4B
    ahead = assemble_audiobook(chapters, METADATA, tmp_path / "ahead", tmp_path / "w2", options,
                               prepared=book.prepared)
    assert sorted(set(encoded)) == [3]  # only the chapter not prepared

    onsets, marks = _plays_alike(at_the_end, ahead, sentences=4 * 5)
    assert [m["tags"]["title"] for m in probe(ahead.outputs[0])["chapters"]] == titles
    for mark, first_sentence in zip(marks[1], onsets[1][::5], strict=True):
        assert 0 <= first_sentence - mark <= FRAME

    encoded.clear()
    book = BookAhead(tmp_path / "w3", options, chapters=4)
    book.prepare(chapters[:3])
    changed = [chapters[0], type(chapters[1])(1, "Two", chapters[1].sentences[:-1]), *chapters[2:]]
    assemble_audiobook(changed, METADATA, tmp_path / "changed", tmp_path / "w3", options, prepared=book.prepared)
    assert sorted(set(encoded)) == [1, 2, 3]  # the first chapter kept; the changed one and after, anew


def test_each_stretch_prepared_ahead_is_cut_into_pieces_for_every_encoding_thread(tmp_path, monkeypatch):
    """Chapters assembled ahead are encoded in pieces cut to their stretch's own length, about
    four per encoding thread, whatever the stretch: a stretch of one chapter and one of two both
    keep every thread busy to their end (the two-chapter stretch's pieces twice as long), and the
    M4B plays like the book assembled at the end."""
    from pipeline.audio import ahead
    from pipeline.audio.ahead import BookAhead

    titles = ["One", "Two", "Three", "Four"]
    chapters = tone_book(tmp_path / "sentences", titles, body_sentences=11, seconds=0.3)
    options = AssemblyOptions(threads=2, chapter_pause_ms=1500)
    at_the_end = assemble_audiobook(chapters, METADATA, tmp_path / "end", tmp_path / "w1", options)
    monkeypatch.setattr(ahead, "MIN_PIECE_SECONDS", 0.5)

    book = BookAhead(tmp_path / "w2", options, chapters=4)
    book.prepare(chapters[:1])
    book.prepare(chapters[1:3])
    one, two = list(book.prepared[0].pieces), [p for c in book.prepared[1:] for p in c.pieces]

    assert len(one) >= 2 * options.threads and len(two) >= 2 * options.threads
    mean = [sum(p.samples for p in pieces) / len(pieces) for pieces in (one, two)]
    assert 1.4 <= mean[1] / mean[0] <= 2.6
    ahead_book = assemble_audiobook(chapters, METADATA, tmp_path / "ahead", tmp_path / "w2", options,
                                    prepared=book.prepared)
    _plays_alike(at_the_end, ahead_book, sentences=4 * 12)


def test_chapters_prepared_by_one_process_and_assembled_by_another_make_the_same_audiobook(tmp_path, monkeypatch):
    """A cluster's CPU tasks: one prepares the first chapter and keeps the list in the work
    directory, a later one (a new BookAhead from that list) prepares the next two, and the
    assembly takes the list from the file: it encodes only the last chapter, and the M4B plays
    like one assembled all at the end. A list that cannot be read is no list."""
    from pipeline.audio.ahead import BookAhead
    from pipeline.audio.prepared import PREPARED_FILE, load_prepared, save_prepared

    titles = ["One", "Two", "Three", "Four"]
    chapters = tone_book(tmp_path / "sentences", titles, body_sentences=3, seconds=0.3)
    options = AssemblyOptions(threads=2, chapter_pause_ms=1500)
    at_the_end = assemble_audiobook(chapters, METADATA, tmp_path / "end", tmp_path / "w1", options)
    encoded = spy_m4b_encodes(monkeypatch)

    work = tmp_path / "w2"
    first = BookAhead(work, options, chapters=4)
    first.prepare(chapters[:1])
    save_prepared(work, first.prepared)
    later = BookAhead(work, options, chapters=4, prepared=load_prepared(work))
    assert later.next_position == 1
    later.prepare(chapters[1:3])
    save_prepared(work, later.prepared)
    ahead = assemble_audiobook(chapters, METADATA, tmp_path / "ahead", work, options, prepared=load_prepared(work))

    assert sorted(set(encoded)) == [3]
    _plays_alike(at_the_end, ahead, sentences=4 * 4)

    (tmp_path / "w3").mkdir()
    (tmp_path / "w3" / PREPARED_FILE).write_bytes(b"not a list")
    assert load_prepared(tmp_path / "w3") == [] and load_prepared(tmp_path / "nowhere") == []


def _plays_alike(at_the_end, ahead, sentences: int):  # type: ignore[no-untyped-def]
    """Both M4Bs as long as each other, every sentence and chapter mark within a frame of the
    other's; returns each one's sentence onsets and chapter marks (samples)."""
    decoded = [decode_pcm(r.outputs[0], SAMPLE_RATE).astype(np.int32) for r in (at_the_end, ahead)]
    assert abs(len(decoded[0]) - len(decoded[1])) <= FRAME
    onsets = [_onsets(samples) for samples in decoded]
    assert len(onsets[0]) == len(onsets[1]) == sentences
    assert max(abs(a - b) for a, b in zip(*onsets, strict=True)) <= FRAME
    marks = [[round(float(m["start_time"]) * SAMPLE_RATE) for m in probe(r.outputs[0])["chapters"]]
             for r in (at_the_end, ahead)]
    assert max(abs(a - b) for a, b in zip(*marks, strict=True)) <= FRAME
    return onsets, marks
