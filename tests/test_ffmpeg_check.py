"""`run` knows before a word is spoken whether this host's ffmpeg can make the files asked for:
the assembly's own gain-and-limiter chain and each format's encoder, run over a twentieth of a
second of silence. A missing ffmpeg, or one that cannot run the chain, ends the command with one
`error:` line naming what is missing and the fix (exit 2, no model loaded, no job recorded);
otherwise it would fail the job after the whole book was spoken."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from pipeline.audio.ffmpeg_check import FfmpegCheck, check_command, explain
from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import status_json
from tests.test_cli_early_checks import refused

# What ffmpeg 4.2.2 (imageio-ffmpeg 0.4.9's static build) prints for the assembly's chain
FFMPEG_4_2_LIMITER = """[Parsed_alimiter_2 @ 0x6363580] Option 'latency' not found
[AVFilterGraph @ 0x635b100] Error initializing filter 'alimiter' with args 'limit=0.7499:attack=5:release=50:level=0:latency=1'
Error reinitializing filters!
Failed to inject frame into filter network: Option not found
Error while processing the decoded data for stream #0:0
"""


@pytest.fixture()
def book(tmp_path: Path) -> Path:
    return write_epub(tmp_path / "book.epub", "Checked", [("One", ["A sentence to read."])])


def path_with(folder: Path, ffmpeg_script: str | None = None) -> str:
    """A PATH of one folder: holding a stand-in ``ffmpeg`` with this script, or no ffmpeg at all."""
    folder.mkdir(parents=True, exist_ok=True)
    if ffmpeg_script is not None:
        stand_in = folder / "ffmpeg"
        stand_in.write_text(ffmpeg_script, encoding="utf-8")
        stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
    return str(folder)


def test_this_hosts_ffmpeg_makes_every_format() -> None:
    check = FfmpegCheck(["m4b", "mp3", "ogg", "flac", "wav", "epub", "srt"])

    check.result()  # no error: the chain and every encoder ran

    codecs = [args[0] for args in check.encoders]
    assert codecs == sorted(set(codecs)) and {"aac", "libmp3lame", "libopus", "flac", "pcm_s16le"} == set(codecs)
    command = check_command("ffmpeg", check.encoders)
    chains = [command[i + 1] for i, arg in enumerate(command) if arg == "-af"]
    assert len(chains) == len(codecs)  # every encoder behind the assembly's own chain, limiter on
    assert all("alimiter=" in chain and "latency=1" in chain and "resampler=soxr" in chain for chain in chains)


def test_subtitles_alone_need_no_ffmpeg(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PATH", path_with(tmp_path / "empty"))

    FfmpegCheck(["srt", "vtt"]).result()


@pytest.mark.parametrize(("stderr", "words"), [
    (FFMPEG_4_2_LIMITER, ["alimiter", "latency", "newer ffmpeg"]),
    ("Unknown encoder 'libopus'\n", ["libopus", "full ffmpeg build"]),
    ("[SWR @ 0x1] Requested resampling engine is unavailable\nError reinitializing filters!\n",
     ["soxr", "full ffmpeg build"]),
    ("something else broke\n", ["something else broke"]),
])
def test_what_ffmpeg_says_is_turned_into_what_is_missing_and_the_fix(stderr: str, words: list[str]) -> None:
    said = explain(stderr)
    assert all(word in said for word in words), said


def test_a_run_without_ffmpeg_is_refused_before_the_model_loads(tmp_path: Path, book: Path,
                                                                settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = {**env_for(settings_factory()), "PATH": path_with(tmp_path / "bin")}

    refused(["run", str(book), "--out", str(tmp_path / "out")], env, "ffmpeg", "not found", "install ffmpeg")

    assert status_json(env) == []  # no job recorded
    assert not (tmp_path / "out").exists()


def test_a_run_on_an_ffmpeg_whose_limiter_lacks_an_option_is_refused_naming_it(
        tmp_path: Path, book: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    # ffmpeg 4.2's answer, said by a stand-in (the PATH holds nothing else, not even cat)
    old = f"#!{sys.executable}\nimport sys\nsys.stderr.write({FFMPEG_4_2_LIMITER!r})\nsys.exit(1)\n"
    env = {**env_for(settings_factory()), "PATH": path_with(tmp_path / "bin", old)}

    line = refused(["run", str(book), "-f", "mp3"], env, "alimiter", "latency", "newer ffmpeg")

    assert str(tmp_path / "bin" / "ffmpeg") in line
    assert status_json(env) == []


def test_a_bad_book_is_what_is_said_even_without_ffmpeg(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = {**env_for(settings_factory()), "PATH": path_with(tmp_path / "bin")}

    refused(["run", str(tmp_path / "missing.epub")], env, "missing.epub", "no such file")


def test_a_stand_in_ffmpeg_left_running_by_a_refusal_is_ended(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PATH", path_with(tmp_path / "bin", f"#!{sys.executable}\nimport time\ntime.sleep(30)\n"))
    check = FfmpegCheck(["m4b"])

    check.abandon()

    assert check._process is not None and check._process.returncode is not None
    assert os.environ["PATH"] == str(tmp_path / "bin")


def test_a_worker_that_assembles_refuses_to_start_without_ffmpeg(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = {**env_for(settings_factory()), "PATH": path_with(tmp_path / "bin")}

    refused(["worker", "--cpu"], env, "ffmpeg", "not found", "install ffmpeg")


def test_a_worker_is_told_which_formats_its_ffmpeg_cannot_make(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pipeline.audio.ffmpeg_check import check_for_worker

    # an ffmpeg built without libopus: every other encode of the check goes through
    no_opus = "\n".join([f"#!{sys.executable}", "import sys", "if 'libopus' in sys.argv:",
                         "    sys.stderr.write(\"Unknown encoder 'libopus'\")", "    sys.exit(1)", ""])
    monkeypatch.setenv("PATH", path_with(tmp_path / "bin", no_opus))
    warnings: list[str] = []

    check_for_worker(warnings.append)  # the M4B can be made: the worker starts

    assert len(warnings) == 1 and warnings[0].startswith("ogg files cannot be made here") and "libopus" in warnings[0]


def test_a_preview_without_ffmpeg_is_refused_before_the_model_loads(tmp_path: Path, book: Path,
                                                                    settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = {**env_for(settings_factory()), "PATH": path_with(tmp_path / "bin")}

    refused(["preview", str(book), "-o", str(tmp_path / "sample.mp3")], env, "ffmpeg", "not found")

    assert not (tmp_path / "sample.mp3").exists()
