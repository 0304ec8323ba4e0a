"""The M4B a listener gets: one AAC file with chapters, tags, cover, right loudness and timing."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from mutagen.mp4 import MP4, Atoms

from pipeline.audio import AssemblyOptions, assemble_audiobook
from pipeline.audio.aac import FRAME
from pipeline.audio.ffmpeg import decode_pcm, measure_loudness, probe
from pipeline.bench.synthetic_audio import tone_book
from pipeline.types import SAMPLE_RATE, BookMetadata

TITLES = ["Prologue", "Chapter 1; in which a=b #1", "Back\\slash\nand a second line", "Épilogue — 終章"]
FRAME_SECONDS = FRAME / SAMPLE_RATE


def tiny_png() -> bytes:
    """A valid 2x2 red PNG, built by hand so the test needs no image library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


METADATA = BookMetadata(
    title="The Test Book",
    authors=("Ann Author", "Bob Writer"),
    language="en-GB",
    date="2019-05-01",
    description="A book\nabout tests.",
    cover=tiny_png(),
    cover_mime="image/png",
)


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    root = tmp_path_factory.mktemp("m4b")
    chapters = tone_book(root / "sentences", TITLES, body_sentences=3)
    report = assemble_audiobook(
        chapters, METADATA, root / "out", root / "work", AssemblyOptions(narrator="Nora Narrator")
    )
    return report, root / "out"


def test_one_m4b_with_only_finished_files_in_out_dir(book):
    report, out_dir = book
    assert report.outputs == (out_dir / "The Test Book.m4b",)
    assert sorted(p.name for p in out_dir.iterdir()) == ["The Test Book.m4b"]
    streams = probe(report.outputs[0])["streams"]
    audio = [s for s in streams if s["codec_type"] == "audio"]
    assert [(s["codec_name"], int(s["sample_rate"]), s["channels"]) for s in audio] == [
        ("aac", SAMPLE_RATE, 1)
    ]


def test_chapter_titles_survive_ffmetadata_special_characters(book):
    report, _ = book
    chapters = probe(report.outputs[0])["chapters"]
    assert [c["tags"]["title"] for c in chapters] == TITLES


def test_chapter_marks_match_the_report_within_one_aac_frame(book):
    report, _ = book
    chapters = probe(report.outputs[0])["chapters"]
    assert len(chapters) == len(report.chapters)
    for mark, expected in zip(chapters, report.chapters, strict=True):
        assert abs(float(mark["start_time"]) - expected.start_seconds) <= FRAME_SECONDS
    assert float(chapters[-1]["end_time"]) == pytest.approx(report.total_seconds, abs=2 * FRAME_SECONDS)


def test_each_chapter_mark_is_where_its_audio_starts(book):
    report, _ = book
    samples = decode_pcm(report.outputs[0], SAMPLE_RATE).astype(np.int32)
    audible = np.abs(samples) > 0.01 * 32768
    for mark in probe(report.outputs[0])["chapters"]:
        start = round(float(mark["start_time"]) * SAMPLE_RATE)
        search_from = max(0, start - SAMPLE_RATE // 2)
        onset = search_from + int(np.argmax(audible[search_from:]))
        # Silence right before the mark (the chapter pause), sound within one frame after it.
        assert 0 <= onset - start <= FRAME, mark["tags"]["title"]


def test_duration_matches_the_report(book):
    report, _ = book
    duration = float(probe(report.outputs[0])["format"]["duration"])
    assert duration == pytest.approx(report.total_seconds, abs=2 * FRAME_SECONDS)
    decoded = decode_pcm(report.outputs[0], SAMPLE_RATE)
    assert len(decoded) / SAMPLE_RATE == pytest.approx(report.total_seconds, abs=2 * FRAME_SECONDS)


def test_audiobook_tags_and_cover_read_back_with_mutagen(book):
    report, _ = book
    tags = MP4(report.outputs[0]).tags
    assert tags["©nam"] == ["The Test Book"]
    assert tags["©alb"] == ["The Test Book"]
    assert tags["©ART"] == ["Ann Author, Bob Writer"]
    assert tags["aART"] == ["Ann Author, Bob Writer"]
    assert tags["©wrt"] == ["Nora Narrator"]
    assert tags["©gen"] == ["Audiobook"]
    assert tags["©day"] == ["2019"]
    assert tags["desc"] == ["A book\nabout tests."]
    assert tags["stik"] == [2]
    assert bytes(tags["covr"][0]) == METADATA.cover


def test_cover_is_an_attached_picture_stream(book):
    report, _ = book
    pictures = [s for s in probe(report.outputs[0])["streams"] if s["codec_type"] == "video"]
    assert len(pictures) == 1 and pictures[0]["disposition"]["attached_pic"] == 1


def test_quicktime_and_nero_chapters_and_faststart(book):
    report, _ = book
    data = report.outputs[0].read_bytes()
    with open(report.outputs[0], "rb") as handle:
        atoms = Atoms(handle)
    top_level = [atom.name for atom in atoms.atoms]
    assert top_level.index(b"moov") < top_level.index(b"mdat"), "moov must come first (+faststart)"
    references = []
    for trak in atoms.path(b"moov")[-1].findall(b"trak"):
        for tref in trak.findall(b"tref"):
            references += _child_atom_names(data[tref.offset + 8 : tref.offset + tref.length])
    assert b"chap" in references, (
        "a QuickTime chapter track must be referenced (Apple players ignore Nero chpl)"
    )
    nero = MP4(report.outputs[0]).chapters
    assert [chapter.title for chapter in nero] == TITLES


def test_brand_and_the_books_language_on_the_audio_and_chapter_tracks(book):
    report, _ = book
    info = probe(report.outputs[0])
    assert info["format"]["tags"]["major_brand"] == "M4B "
    assert track_languages(info) == {"audio": "eng", "chapters": "eng"}


@pytest.mark.parametrize("language, code", [("zh-CN", "zho"), ("", "und")])
def test_a_chinese_or_unknown_language_is_on_both_tracks_of_every_part(tmp_path, language, code):
    chapters = tone_book(tmp_path / "sentences", ["第一章", "第二章", "第三章"], body_sentences=0)
    options = AssemblyOptions(split_hours=2.5 / 3600, normalize_loudness=False)
    metadata = BookMetadata(title="书", language=language)
    report = assemble_audiobook(chapters, metadata, tmp_path / "out", tmp_path / "work", options)

    assert len(report.outputs) > 1
    for part in report.outputs:
        info = probe(part)
        assert info["format"]["tags"]["major_brand"] == "M4B "
        assert track_languages(info) == {"audio": code, "chapters": code}, part.name


def track_languages(info: dict) -> dict[str, str]:
    """ffprobe's language of the audio track and of the chapter (QuickTime text) track."""
    kinds = {"audio": "audio", "data": "chapters"}  # ffprobe lists the chapter track as a data stream
    found = {kinds[s["codec_type"]]: s["tags"]["language"] for s in info["streams"] if s["codec_type"] in kinds}
    assert len(found) == len([s for s in info["streams"] if s["codec_type"] in kinds]), info["streams"]
    return found


def _child_atom_names(payload: bytes) -> list[bytes]:
    names, position = [], 0
    while position + 8 <= len(payload):
        size = struct.unpack(">I", payload[position : position + 4])[0]
        names.append(payload[position + 4 : position + 8])
        position += max(size, 8)
    return names


def test_loudness_on_target_with_true_peak_under_ceiling(book):
    report, _ = book
    reading = measure_loudness(report.outputs[0])
    assert reading.integrated_lufs == pytest.approx(-18.0, abs=1.0)
    assert reading.true_peak_dbtp <= -1.5


def test_split_hours_makes_parts_each_with_its_own_chapters(tmp_path):
    chapters = tone_book(tmp_path / "sentences", ["One", "Two", "Three", "Four", "Five"], body_sentences=1)
    options = AssemblyOptions(split_hours=6.0 / 3600, chapter_pause_ms=500)
    report = assemble_audiobook(
        chapters, BookMetadata(title="Split"), tmp_path / "out", tmp_path / "work", options
    )
    assert all(2.5 < c.seconds < 3.0 for c in report.chapters[:-1])  # so two chapters fit in a part

    assert [p.name for p in report.outputs] == [
        "Split - Part 1.m4b",
        "Split - Part 2.m4b",
        "Split - Part 3.m4b",
    ]
    titles, total = [], 0.0
    for number, part in enumerate(report.outputs, start=1):
        info = probe(part)
        assert float(info["chapters"][0]["start_time"]) == 0.0
        assert float(info["format"]["duration"]) <= 6.0 + 2 * FRAME_SECONDS
        assert info["format"]["tags"]["title"] == f"Split (Part {number} of 3)"
        assert info["format"]["tags"]["track"] == f"{number}/3"
        titles += [c["tags"]["title"] for c in info["chapters"]]
        total += float(info["format"]["duration"])
    assert titles == ["One", "Two", "Three", "Four", "Five"]
    assert total == pytest.approx(report.total_seconds, abs=6 * FRAME_SECONDS)


def test_many_chapters_keep_exact_marks(tmp_path):
    """Many short chapters: errors would accumulate here if the marks drifted per chapter."""
    titles = [f"Chapter {n}" for n in range(1, 13)]
    chapters = tone_book(tmp_path / "sentences", titles, body_sentences=0, seconds=0.3)
    options = AssemblyOptions(chapter_pause_ms=700, normalize_loudness=False)
    report = assemble_audiobook(
        chapters, BookMetadata(title="Many"), tmp_path / "out", tmp_path / "work", options
    )
    marks = probe(report.outputs[0])["chapters"]
    drift = [
        abs(float(m["start_time"]) - c.start_seconds) for m, c in zip(marks, report.chapters, strict=True)
    ]
    assert max(drift) <= FRAME_SECONDS / 2 + 0.001
