"""The M4B written by tts-jobs itself plays as the one ffmpeg's mux makes of the same AAC pieces:
the same samples, chapters and tags, read back by ffmpeg, ffprobe and mutagen; and the cases a
long or oddly titled book brings (hundreds of chapters, long titles, a book over 49 hours)."""

from __future__ import annotations

import struct
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from mutagen.mp4 import MP4

from pipeline.audio.aac import FRAME, PRIMING
from pipeline.audio.aac_frames import keep_adts_frames, read_frames
from pipeline.audio.ffmpeg import decode_pcm, ffmpeg_binary, probe
from pipeline.audio.m4b import M4B_BRAND, ChapterMark, write_m4b
from pipeline.audio.mp4_boxes import AudioTrack, movie
from pipeline.audio.tags import TrackTags
from pipeline.types import SAMPLE_RATE

TAGS = TrackTags(title="Der Wal", album="Der Wal", artist="Hermann Melville", narrator="Nora",
                 year="1851", description="Ein Buch; über = #Wale", language="de", track=1, track_total=1,
                 cover=None, publisher="Harbour Press")


def adts_piece(path: Path, seconds: float, frequency: int) -> Path:
    subprocess.run([ffmpeg_binary(), "-nostdin", "-v", "error", "-f", "lavfi", "-i",
                    f"sine=frequency={frequency}:sample_rate={SAMPLE_RATE}:duration={seconds}", "-ac", "1",
                    "-c:a", "aac", "-aac_coder", "fast", "-b:a", "64k", "-fflags", "+bitexact",
                    "-flags:a", "+bitexact", "-f", "adts", str(path)], check=True, timeout=60)
    return path


@pytest.fixture(scope="module")
def pieces(tmp_path_factory) -> list[Path]:  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("pieces")
    return [adts_piece(folder / f"{n}.aac", seconds, 300 + 200 * n)
            for n, seconds in enumerate([2.5, 0.7, 4.0])]


def write_ours(pieces: list[Path], marks: list[ChapterMark], path: Path, tags: TrackTags = TAGS,
               cover: bytes | None = None) -> Path:
    frames = []
    for adts in pieces:
        kept = adts.with_name(adts.name + f".{path.stem}.frames")
        keep_adts_frames(adts, kept)
        frames.append(read_frames(kept))
    with open(path, "wb") as out:
        write_m4b(out, frames, marks, tags, cover, M4B_BRAND)
    return path


def write_ffmpegs(pieces: list[Path], marks: list[ChapterMark], path: Path) -> Path:
    """What tts-jobs ran before: ffmpeg's concat of the ADTS pieces, muxed with its metadata."""
    meta = path.with_suffix(".txt")
    lines = [";FFMETADATA1", "title=Der Wal"]
    for mark in marks:
        lines += ["[CHAPTER]", f"TIMEBASE=1/{SAMPLE_RATE}", f"START={mark.start}", f"END={mark.end}",
                  f"title={mark.title}"]
    meta.write_text("\n".join(lines) + "\n", encoding="utf-8")
    joined = "concat:" + "|".join(str(p) for p in pieces)
    subprocess.run([ffmpeg_binary(), "-nostdin", "-v", "error", "-itsoffset", f"-{PRIMING / SAMPLE_RATE:.9f}",
                    "-f", "aac", "-i", joined, "-f", "ffmetadata", "-i", str(meta), "-map", "0:a", "-c:a", "copy",
                    "-map_metadata", "1", "-map_chapters", "1", "-fflags", "+bitexact", "-f", "ipod", str(path)],
                   check=True, timeout=60)
    return path


def marks_of(pieces: list[Path], titles: list[str]) -> list[ChapterMark]:
    counts = [read_frames_count(p) for p in pieces]
    starts = list(np.cumsum([0, *counts[:-1]]) * FRAME)
    ends = [*starts[1:], sum(counts) * FRAME - PRIMING]
    return [ChapterMark(t, int(s), int(e)) for t, s, e in zip(titles, starts, ends, strict=True)]


def read_frames_count(adts: Path) -> int:
    return keep_adts_frames(adts, adts.with_name(adts.name + ".count"))


def test_it_plays_the_same_samples_and_chapters_as_ffmpegs_mux(tmp_path, pieces) -> None:  # type: ignore[no-untyped-def]
    marks = marks_of(pieces, ["Erstes Kapitel", "Zwei", "Das Ende"])
    ours = write_ours(pieces, marks, tmp_path / "ours.m4b")
    theirs = write_ffmpegs(pieces, marks, tmp_path / "theirs.m4b")

    assert np.array_equal(decode_pcm(ours, SAMPLE_RATE), decode_pcm(theirs, SAMPLE_RATE))
    ours_info, theirs_info = probe(ours), probe(theirs)
    assert float(ours_info["format"]["duration"]) == pytest.approx(float(theirs_info["format"]["duration"]),
                                                                   abs=0.002)
    def times(info: dict) -> list[float]:
        return [float(c[key]) for c in info["chapters"] for key in ("start_time", "end_time")]

    assert times(ours_info) == pytest.approx(times(theirs_info), abs=0.001)
    assert [c["tags"]["title"] for c in ours_info["chapters"]] == ["Erstes Kapitel", "Zwei", "Das Ende"]
    assert ours_info["format"]["tags"]["major_brand"] == "M4B "
    languages = {s["codec_type"]: s["tags"]["language"] for s in ours_info["streams"]}
    assert languages == {"audio": "deu", "data": "deu"}  # the chapter track says German too


def test_tags_cover_and_nero_chapters_read_back_with_mutagen(tmp_path, pieces) -> None:  # type: ignore[no-untyped-def]
    cover = b"\x89PNG\r\n\x1a\n" + bytes(64)
    tags = replace(TAGS, track=2, track_total=3)
    path = write_ours(pieces, marks_of(pieces, ["Eins", "Zwei", "Drei"]), tmp_path / "tagged.m4b", tags, cover)
    audio = MP4(path)
    assert audio.tags["©nam"] == ["Der Wal"] and audio.tags["©wrt"] == ["Nora"]
    assert audio.tags["desc"] == ["Ein Buch; über = #Wale"] and audio.tags["stik"] == [2]
    assert audio.tags["trkn"] == [(2, 3)]
    assert bytes(audio.tags["covr"][0]) == cover and audio.tags["covr"][0].imageformat == 14  # PNG
    assert bytes(audio.tags["----:com.apple.iTunes:PUBLISHER"][0]) == b"Harbour Press"
    assert [c.title for c in audio.chapters] == ["Eins", "Zwei", "Drei"]
    assert audio.info.length == pytest.approx((sum(read_frames_count(p) for p in pieces) * FRAME - PRIMING)
                                              / SAMPLE_RATE, abs=0.05)


def test_hundreds_of_chapters_and_long_titles(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """300 chapters: players' QuickTime chapters have all of them at their exact starts (no
    rounding drift); Nero's list holds 255, as its one-byte count allows; a 400-byte title is
    cut there on a character's edge, whole in the QuickTime track."""
    piece = adts_piece(tmp_path / "one.aac", 30.0, 440)
    frames = read_frames_count(piece)
    starts = [round(n * (frames * FRAME - PRIMING) / 300) for n in range(300)]
    long_title = "Ü" * 200  # 400 bytes of UTF-8
    titles = [long_title if n == 7 else f"Kapitel {n + 1}" for n in range(300)]
    marks = [ChapterMark(t, s, e) for t, s, e in zip(titles, starts, [*starts[1:], frames * FRAME - PRIMING],
                                                       strict=True)]
    path = write_ours([piece], marks, tmp_path / "many.m4b")
    chapters = probe(path)["chapters"]
    assert [c["tags"]["title"] for c in chapters] == titles
    assert max(abs(float(c["start_time"]) - m.start / SAMPLE_RATE) for c, m in zip(chapters, marks, strict=True)) \
        <= 0.0005 + 1e-9  # half a millisecond: the chapter track's clock
    nero = MP4(path).chapters
    assert len(nero) == 255 and nero[7].title == "Ü" * 127


def test_a_book_over_49_hours_gets_64_bit_media_times() -> None:
    """At 24 kHz a part longer than 2**32 samples (49.7 h) overflows a version-0 mdhd."""
    frames = 2**32 // FRAME + 10
    audio = AudioTrack(sample_rate=SAMPLE_RATE, config=0x1308, sizes=np.full(frames, 9, dtype=np.uint32),
                       frame=FRAME, priming=PRIMING, language="eng", offset=4096)
    index = movie(audio, None, b"")
    at = index.index(b"mdhd")
    version, timescale, duration = index[at + 4], *struct.unpack(">IQ", index[at + 24:at + 36])
    assert (version, timescale, duration) == (1, SAMPLE_RATE, frames * FRAME)
