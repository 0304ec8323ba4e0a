"""What a listener's library sees of the books `tts-jobs` makes: each book named the way `inspect`
names it, one audiobook per folder, and a finished book never replaced behind its job's back."""

from __future__ import annotations

import json
from pathlib import Path

from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import cli, ffprobe_chapters, status_json

TEXT = "It was a dark night. The wind blew hard.\n\nShe walked home alone.\n"


def _tags(path: Path) -> dict[str, str]:
    import mutagen

    audio = mutagen.File(path, easy=True)
    return {key: values[0] for key, values in (audio.tags or {}).items()}


def test_a_book_without_a_title_is_named_after_its_file(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    book = tmp_path / "night walk.txt"
    book.write_text(TEXT, encoding="utf-8")
    inspected = json.loads(cli(["inspect", str(book), "--json"], env).stdout)

    result = cli(["run", str(book), "--out", str(tmp_path / "out")], env)

    assert result.returncode == 0, result.stderr
    [m4b] = [Path(line) for line in result.stdout.splitlines()]
    assert inspected["title"] == "night walk"
    assert m4b == tmp_path / "out" / "Unknown Author" / "night walk" / "night walk.m4b"
    tags = _tags(m4b)
    assert (tags["title"], tags["album"]) == ("night walk", "night walk")
    assert [c["tags"]["title"] for c in ffprobe_chapters(m4b)] == ["night walk"]
    [status] = status_json(env)
    assert status["title"] == "night walk"
    # the run's summary and status give one speed, and both say what was cut at the length limit
    summary = next(line for line in result.stderr.splitlines() if "done night walk:" in line)
    assert f"({status['x_realtime']:.1f}× real time)" in summary
    cut = status["sentences_hit_limit"]
    assert (f"; {cut} sentence{'s' if cut > 1 else ''} cut at the length limit" in summary) == (cut > 0)
    assert f"{cut} cut at the length limit" in cli(["status", str(status["id"])], env).stdout


def _duration(path: Path) -> float:
    import mutagen

    return mutagen.File(path).info.length


def test_a_finished_book_is_never_replaced_behind_its_jobs_back(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    """Other choices make another edition beside the first; the same choices make nothing new
    (done, and where); --fresh makes it again, and the first job no longer claims the files."""
    env = env_for(settings_factory())
    book = write_epub(tmp_path / "book.epub", "Two Rooms", [("One", ["A first short line."]),
                                                             ("Two", ["A second short line."])])
    out = ["--out", str(tmp_path / "out")]
    first = cli(["run", str(book), *out], env)
    assert first.returncode == 0, first.stderr
    [whole] = [Path(line) for line in first.stdout.splitlines()]
    whole_seconds = _duration(whole)

    part = cli(["run", str(book), *out, "--chapters", "1"], env)

    assert part.returncode == 0, part.stderr
    [one] = [Path(line) for line in part.stdout.splitlines()]
    assert one == tmp_path / "out" / "Test Author" / "Two Rooms (chapters 1)" / "Two Rooms.m4b"
    assert whole.is_file() and _duration(whole) == whole_seconds  # the first edition untouched
    assert len(ffprobe_chapters(whole)) == 2 and len(ffprobe_chapters(one)) == 1
    jobs = {s["id"]: s for s in status_json(env)}
    assert jobs[1]["outputs"] == [str(whole)] and jobs[2]["outputs"] == [str(one)]

    again = cli(["run", str(book), *out], env)

    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [str(whole)]
    assert "done already, by job 1" in again.stderr and str(whole.parent) in again.stderr
    assert len(status_json(env)) == 2  # no new job, nothing spoken again

    fresh = cli(["run", str(book), *out, "--fresh"], env)

    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.splitlines() == [str(whole)]
    jobs = {s["id"]: s for s in status_json(env)}
    assert jobs[3]["outputs"] == [str(whole)] and jobs[1]["outputs"] == []
    assert any("made again by job 3" in warning for warning in status_json(env, 1)["warnings"])


AUDIO = {".m4b", ".mp3", ".ogg", ".flac", ".wav"}


def test_two_audio_formats_make_two_audiobooks_each_in_its_own_folder(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    """A library lists a folder of audio as one book: `-f m4b,mp3` is the M4B in the book's folder
    and the MP3s (with their subtitles) in `<Title> (MP3)` beside it, never both in one."""
    env = env_for(settings_factory())
    book = write_epub(tmp_path / "book.epub", "Two Shelves", [("One", ["A first short line."]),
                                                               ("Two", ["A second short line."])])

    result = cli(["run", str(book), "--out", str(tmp_path / "out"), "-f", "m4b,mp3,srt"], env)

    assert result.returncode == 0, result.stderr
    made = [Path(line) for line in result.stdout.splitlines()]
    shelf = tmp_path / "out" / "Test Author"
    by_folder = {folder.name: sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
                 for folder in shelf.iterdir()}
    assert {name: [f for f in files if Path(f).suffix in AUDIO | {".srt"}] for name, files in by_folder.items()} == {
        "Two Shelves": ["Two Shelves.m4b", "Two Shelves.srt"],
        "Two Shelves (MP3)": ["01 - One.mp3", "01 - One.srt", "02 - Two.mp3", "02 - Two.srt"],
    }
    for files in by_folder.values():  # one audiobook a folder, each with what a library reads of it
        assert len({Path(f).suffix for f in files if Path(f).suffix in AUDIO}) == 1 and "metadata.json" in files
    [status] = status_json(env)
    assert sorted(map(Path, status["outputs"])) == sorted(made) and all(p.is_file() for p in made)
    assert status["out_dir"] == str(shelf / "Two Shelves")
