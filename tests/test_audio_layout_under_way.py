"""An assembly that begins while chapters ahead are still being encoded (the last sentence came
while a stretch was prepared) lays out the chapters after that stretch before it waits for it,
and the audiobook is the one assembled all at the end, whatever the preparation then keeps: the
stretch, less (it failed), or more (one more begun as the speaking ended)."""

from __future__ import annotations

import time

import pytest

from pipeline.audio import AssemblyOptions, assemble_audiobook
from pipeline.audio.ahead import BookAhead
from pipeline.audio.layout import REST_DIR
from pipeline.audio.prepared import save_under_way, under_way
from pipeline.bench.synthetic_audio import tone_book
from pipeline.types import SAMPLE_RATE
from tests.m4b_encodes import spy_m4b_encodes
from tests.test_audio_m4b import METADATA
from tests.test_audio_m4b_pieces import _plays_alike

TITLES = ["One", "Two", "Three", "Four", "Five"]
OPTIONS = AssemblyOptions(threads=2, chapter_pause_ms=1500)


@pytest.fixture()
def book(tmp_path):  # type: ignore[no-untyped-def]
    return tone_book(tmp_path / "sentences", TITLES, body_sentences=3, seconds=0.3)


@pytest.fixture()
def encoded(monkeypatch):  # type: ignore[no-untyped-def]
    """The chapter indices of the M4B pieces the assembly itself encodes."""
    return spy_m4b_encodes(monkeypatch)


def test_the_chapters_after_a_stretch_being_encoded_are_laid_out_before_the_assembly_waits_for_it(
        tmp_path, book, encoded):
    work = tmp_path / "work"
    at_the_end = assemble_audiobook(book, METADATA, tmp_path / "end", tmp_path / "w0", OPTIONS)
    encoded.clear()
    ahead = BookAhead(work, OPTIONS, chapters=5)
    ahead.prepare(book[:1])
    assert under_way(work) == 1  # what the stretch being encoded completes, said as it began
    stretch = ahead.lay_out(book[1:3])  # laid out; its encodes run once the assembly has begun
    ahead.say_under_way(stretch)  # as ahead.encode says when it begins
    seen_before_the_wait: list[str] = []
    begun_before_the_wait: set[int] = set()

    def take():  # type: ignore[no-untyped-def]
        seen_before_the_wait.extend(sorted(p.name for p in (work / REST_DIR).glob("*.wav")))
        deadline = time.monotonic() + 30
        while set(encoded) != {3, 4} and time.monotonic() < deadline:  # begun beside the stretch's
            time.sleep(0.01)
        begun_before_the_wait.update(encoded)
        ahead.encode(stretch)
        return ahead.prepared

    report = assemble_audiobook(book, METADATA, tmp_path / "ahead", work, OPTIONS, prepared=take)

    assert seen_before_the_wait == ["chapter_0004.wav", "chapter_0005.wav"]
    assert under_way(work) == 3
    assert begun_before_the_wait == {3, 4} and sorted(encoded) == [3, 4]  # not encoded again after it
    _plays_alike(at_the_end, report, sentences=5 * 4)


def test_pieces_encoded_beside_a_stretch_are_taken_only_if_planned_after_what_was_kept(
        tmp_path, book, encoded):
    """The assembly takes the pieces it encoded while it waited only where the chapters kept ahead
    end where it planned them after: with the first chapter kept and a stretch after it said
    wrongly (an earlier attempt's word, say), every later piece is encoded again, and the
    audiobook is the one assembled at the end; said rightly (the stretch failed, but its chapters
    are cut as the assembly cuts them), they are taken."""
    from pipeline.audio.aac import AacPiece

    at_the_end = assemble_audiobook(book, METADATA, tmp_path / "end", tmp_path / "w0", OPTIONS)
    for said_rightly in (False, True):
        work = tmp_path / f"work{said_rightly}"
        ahead = BookAhead(work, OPTIONS, chapters=5)
        ahead.prepare(book[:1])
        stretch = ahead.lay_out(book[1:3])
        if said_rightly:
            ahead.say_under_way(stretch)
        else:
            save_under_way(work, 3, [AacPiece(0, 0, 5 * SAMPLE_RATE, 1000)] * 3)
        encoded.clear()

        report = assemble_audiobook(book, METADATA, tmp_path / f"out{said_rightly}", work, OPTIONS,
                                    prepared=lambda: ahead.prepared)  # noqa: B023 - called at once

        assert encoded.count(3) == (1 if said_rightly else 2) and sorted(set(encoded)) == [1, 2, 3, 4]
        _plays_alike(at_the_end, report, sentences=5 * 4)


@pytest.mark.parametrize("kept, said, assembled", [
    (1, 3, [1, 2, 3, 4]),  # the stretch under way failed: its chapters laid out after the wait
    (3, 1, [3, 4]),  # a stretch more was begun as the speaking ended: the early lay-out of it unused
])
def test_what_the_preparation_keeps_decides_what_is_taken_not_what_it_said(
        tmp_path, book, encoded, kept, said, assembled):
    work = tmp_path / "work"
    at_the_end = assemble_audiobook(book, METADATA, tmp_path / "end", tmp_path / "w0", OPTIONS)
    encoded.clear()
    ahead = BookAhead(work, OPTIONS, chapters=5)
    ahead.prepare(book[:1])
    if kept == 3:
        ahead.prepare(book[1:3])
    save_under_way(work, said)

    report = assemble_audiobook(book, METADATA, tmp_path / "ahead", work, OPTIONS,
                                prepared=lambda: ahead.prepared)

    assert sorted(set(encoded)) == assembled
    _plays_alike(at_the_end, report, sentences=5 * 4)


@pytest.mark.parametrize("formats", [("m4b",), ("wav",)])
def test_a_work_directory_left_by_an_earlier_attempt_is_cleared_when_nothing_of_it_is_taken(
        tmp_path, book, formats):
    """An earlier attempt's leftovers (its word of a stretch under way among them) cost only the
    space they take until nothing of them is taken: then they are removed, and the book is
    assembled whole, as it would be in an empty work directory."""
    options = AssemblyOptions(threads=2, chapter_pause_ms=1500, formats=formats)
    work = tmp_path / "work"
    work.mkdir()
    save_under_way(work, 2)
    (work / "chapter_0002.wav").write_bytes(b"half a chapter of an attempt that died")
    (work / "files").mkdir()
    seen: list[list[str]] = []

    def take():  # type: ignore[no-untyped-def]
        seen.append(sorted(p.name for p in work.iterdir()))
        return []

    fresh = assemble_audiobook(book, METADATA, tmp_path / "fresh", tmp_path / "w0", options)
    report = assemble_audiobook(book, METADATA, tmp_path / "out", work, options, prepared=take)

    assert seen == [["chapter_0002.wav", "files", REST_DIR, "under-way"]]
    assert not {"chapter_0002.wav", "files", "under-way"} & {p.name for p in work.iterdir()}
    assert [p.read_bytes() for p in report.outputs if p.suffix == ".wav"] == \
        [p.read_bytes() for p in fresh.outputs if p.suffix == ".wav"]
    if formats == ("m4b",):
        _plays_alike(fresh, report, sentences=5 * 4)


def test_pieces_encoded_beside_a_preparation_that_kept_nothing_are_finished_before_its_place_is_cleared(
        tmp_path, book, encoded):
    """The preparation said a stretch and its pieces, then nothing it made holds (its list is
    gone): the pieces begun beside it are let finish before the work directory is cleared, and
    the book is assembled whole, as at the end."""
    work = tmp_path / "work"
    at_the_end = assemble_audiobook(book, METADATA, tmp_path / "end", tmp_path / "w0", OPTIONS)
    ahead = BookAhead(work, OPTIONS, chapters=5)
    ahead.prepare(book[:1])
    ahead.say_under_way(ahead.lay_out(book[1:3]))
    encoded.clear()

    report = assemble_audiobook(book, METADATA, tmp_path / "out", work, OPTIONS, prepared=list)

    assert sorted(set(encoded)) == [0, 1, 2, 3, 4] and encoded.count(3) == 2  # begun early, then again
    _plays_alike(at_the_end, report, sentences=5 * 4)
