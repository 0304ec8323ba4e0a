"""Per-chapter MP3 / Ogg Opus / FLAC / WAV files: safe numbered names, tags, covers, lengths."""

from __future__ import annotations

import base64
import hashlib
import subprocess

import numpy as np
import pytest
from mutagen.flac import FLAC, Picture
from mutagen.id3 import ID3
from mutagen.oggopus import OggOpus
from mutagen.wave import WAVE

from pipeline.audio import AssemblyOptions, assemble_audiobook
from pipeline.audio.ffmpeg import decode_pcm, ffmpeg_binary, probe
from pipeline.bench.synthetic_audio import tone_book
from pipeline.types import SAMPLE_RATE, BookMetadata

TITLES = ["Opening", "../../etc/passwd", "CON", "Opening"]
FORMATS = ("mp3", "ogg", "flac", "wav")


@pytest.fixture(scope="module")
def jpeg_cover(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("cover") / "cover.jpg"
    subprocess.run(
        [
            ffmpeg_binary(),
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "color=c=blue:s=16x16",
            "-frames:v",
            "1",
            str(path),
        ],
        check=True,
    )
    return path.read_bytes()


@pytest.fixture(scope="module")
def book(tmp_path_factory, jpeg_cover):
    root = tmp_path_factory.mktemp("formats")
    chapters = tone_book(root / "sentences", TITLES, body_sentences=1)
    metadata = BookMetadata(
        title="Formats",
        authors=("Ann Author",),
        language="zh-CN",
        date="2001",
        cover=jpeg_cover,
        cover_mime="image/jpeg",
        description="About formats.",
    )
    options = AssemblyOptions(formats=FORMATS, narrator="Nora Narrator")
    report = assemble_audiobook(chapters, metadata, root / "out", root / "work", options)
    return report, root, chapters, metadata, options


def outputs_of(report, extension):
    return [p for p in report.outputs if p.suffix == f".{extension}"]


def test_one_numbered_safely_named_file_per_chapter_and_format(book):
    report, root, *_ = book
    expected = ["01 - Opening", "02 - .._.._etc_passwd", "03 - CON", "04 - Opening"]
    for extension in FORMATS:
        files = outputs_of(report, extension)
        assert [p.stem for p in files] == expected
        assert all(p.parent == root / "out" and p.is_file() for p in files)
    assert sorted(p.name for p in (root / "out").iterdir()) == sorted(p.name for p in report.outputs)


@pytest.mark.parametrize("extension", FORMATS)
def test_each_file_holds_its_chapter_audio(book, extension):
    report, *_ = book
    for file, chapter in zip(outputs_of(report, extension), report.chapters, strict=True):
        seconds = len(decode_pcm(file, SAMPLE_RATE)) / SAMPLE_RATE
        assert seconds == pytest.approx(chapter.seconds, abs=0.06), file.name


def test_codecs_are_what_each_extension_promises(book):
    report, *_ = book
    codecs = {p.suffix: probe(p)["streams"][0]["codec_name"] for p in report.outputs}
    assert codecs == {".mp3": "mp3", ".ogg": "opus", ".flac": "flac", ".wav": "pcm_s16le"}


def test_mp3_tags_and_cover(book):
    report, _, _, metadata, _ = book
    for number, file in enumerate(outputs_of(report, "mp3"), start=1):
        tags = ID3(file)
        assert tags["TIT2"].text == [TITLES[number - 1]]
        assert tags["TRCK"].text == [f"{number}/4"]
        assert tags["TALB"].text == ["Formats"]
        assert tags["TPE1"].text == ["Ann Author"]
        assert tags["TCOM"].text == ["Nora Narrator"]
        assert tags["TCON"].text == ["Audiobook"]
        assert tags["TLAN"].text == ["zho"]  # ISO 639-2 of the book's zh-CN
        assert tags.getall("APIC")[0].data == metadata.cover


def test_flac_and_opus_tags_and_cover(book):
    report, _, _, metadata, _ = book
    for extension, reader in (("flac", FLAC), ("ogg", OggOpus)):
        for number, file in enumerate(outputs_of(report, extension), start=1):
            audio = reader(file)
            assert audio["TITLE"] == [TITLES[number - 1]]
            assert audio["TRACKNUMBER"] == [str(number)] and audio["TRACKTOTAL"] == ["4"]
            assert audio["ALBUM"] == ["Formats"] and audio["ARTIST"] == ["Ann Author"]
            assert audio["COMPOSER"] == ["Nora Narrator"] and audio["DATE"] == ["2001"]
            assert audio["LANGUAGE"] == ["zh-CN"]
            if extension == "flac":
                cover = audio.pictures[0].data
            else:
                cover = Picture(base64.b64decode(audio["METADATA_BLOCK_PICTURE"][0])).data
            assert cover == metadata.cover


def test_wav_tags(book):
    report, *_ = book
    tags = WAVE(outputs_of(report, "wav")[1]).tags
    assert tags["TIT2"].text == ["../../etc/passwd"]
    assert tags["TRCK"].text == ["2/4"]
    assert tags["TLAN"].text == ["zho"]


def test_rerunning_reproduces_identical_files(tmp_path, jpeg_cover):
    chapters = tone_book(tmp_path / "sentences", ["One", "Two"], body_sentences=1)
    metadata = BookMetadata(title="Again", authors=("A",), cover=jpeg_cover, cover_mime="image/jpeg")
    options = AssemblyOptions(formats=("m4b", *FORMATS))
    runs = [
        assemble_audiobook(chapters, metadata, tmp_path / f"out{n}", tmp_path / f"work{n}", options)
        for n in (1, 2)
    ]
    digests = [{p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.outputs} for run in runs]
    assert len(digests[0]) == 1 + 2 * len(FORMATS)
    assert digests[0] == digests[1]


def test_every_chapter_is_levelled_to_the_target_on_its_own(tmp_path):
    """A quiet and a loud chapter (12 dB apart as spoken) play equally loud: each chapter reaches
    the target loudness by its own gain, as audiobook platforms check each file, and so a chapter
    finished early can be encoded before the rest of the book is spoken."""
    quiet = tone_book(tmp_path / "quiet", ["Quiet"], body_sentences=2, amplitude=0.05)
    loud = tone_book(tmp_path / "loud", ["Loud"], body_sentences=2, amplitude=0.2)
    chapters = [quiet[0], type(loud[0])(1, "Loud", loud[0].sentences)]
    report = assemble_audiobook(
        chapters,
        BookMetadata(title="Levels"),
        tmp_path / "out",
        tmp_path / "work",
        AssemblyOptions(formats=("flac",)),
    )
    peaks = [float(np.abs(decode_pcm(p, SAMPLE_RATE).astype(np.float64)).max()) for p in report.outputs]
    assert 20 * np.log10(peaks[1] / peaks[0]) == pytest.approx(0.0, abs=0.5)


@pytest.mark.parametrize("gain_db", [3.214, -7.5, 0.001])
def test_wav_chapters_carry_exactly_the_gain_ffmpeg_gives_the_other_formats(tmp_path, gain_db):
    """WAV chapters are written without ffmpeg: the same samples as its volume filter (loud
    passages clipped the same way), padded to the chapter's length, tagged."""
    import wave

    from pipeline.audio.export import encode_chapter_file
    from pipeline.audio.ffmpeg import run_ffmpeg
    from pipeline.audio.levelling import Loudness
    from pipeline.audio.stitch import StitchedChapter
    from pipeline.audio.tags import TrackTags

    pcm = (np.random.default_rng(0).standard_normal(250_000) * 9000).clip(-32768, 32767).astype(np.int16)
    work = tmp_path / "chapter_0001.wav"
    with wave.open(str(work), "wb") as out:
        out.setnchannels(1), out.setsampwidth(2), out.setframerate(SAMPLE_RATE)
        out.writeframes(pcm.tobytes())
    samples = len(pcm) + 1234  # a chapter longer than its work file: padded with silence
    chapter = StitchedChapter(index=0, title="One", wav_path=work, samples=samples, trailing_silence=1234)
    tags = TrackTags(title="One", album="Book", artist="A", narrator="", year="", description="",
                     track=1, track_total=1)
    loudness = Loudness(gain_db=gain_db)

    written = encode_chapter_file(chapter, "wav", tags, tmp_path / "01 - One.wav", loudness, "64k")

    by_ffmpeg = tmp_path / "by_ffmpeg.wav"
    run_ffmpeg(["-i", str(work), "-af", loudness.ffmpeg_filter(samples), "-c:a", "pcm_s16le", str(by_ffmpeg)],
               by_ffmpeg, "encode the reference")
    ours, theirs = decode_pcm(written, SAMPLE_RATE), decode_pcm(by_ffmpeg, SAMPLE_RATE)
    assert len(ours) == samples and np.array_equal(ours, theirs)
    assert WAVE(written).tags["TIT2"].text == ["One"]
    assert probe(written)["streams"][0]["codec_name"] == "pcm_s16le"
