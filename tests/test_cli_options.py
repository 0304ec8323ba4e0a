"""The options of a book as a user meets them on the command line: `inspect` shows their effect,
`preview` lets one hear it, `run` makes the audiobook with them and `status` shows them; a bad
option ends with one line before any model loads."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.books import pls_epub, write_epub
from tests.conftest import env_for
from tests.e2e_helpers import cli, ffprobe_chapters, ffprobe_seconds, status_json

CHAPTERS = [
    ("Loomings", ["Call me Ishmael. Hermione met Voldemort in 1851."]),
    ("The Carpet-Bag", ['"Come," said the landlord, "the harpooneer is a dark complexioned chap."',
                        "I stuffed a shirt or two into my old carpet-bag."]),
    ("The Spouter-Inn", ["Entering that gable-ended Spouter-Inn, you found yourself in a wide, low entry."]),
]


@pytest.fixture()
def env(settings_factory) -> dict[str, str]:  # type: ignore[no-untyped-def]
    environment = env_for(settings_factory())
    environment.pop("TTS_JOBS_BROKER_URL")  # nothing here needs a broker
    return environment


def test_inspect_shows_the_chapters_pronunciations_and_dialogue_a_run_would_read(tmp_path: Path, env) -> None:  # type: ignore[no-untyped-def]
    book = pls_epub(tmp_path / "book.epub", CHAPTERS)
    names = tmp_path / "names.txt"
    names.write_text("# pronunciations\nharpooneer = harpoon-eer\n1851 = eighteen fifty-one\n", encoding="utf-8")
    choices = ["--lexicon", str(names), "--dialogue-voice", "anna", "--speed", "3"]
    made = cli(["voice", "new", "anna", "--seed", "7"], env)  # inspect, as run, knows the voices there are
    assert made.returncode == 0, made.stderr

    whole = json.loads(cli(["inspect", str(book), "--json", "--sentences", *choices], env).stdout)
    chosen = cli(["inspect", str(book), "--json", "--sentences", "--chapters", "carpet", "--chapters", "1",
                  *choices], env)

    assert chosen.returncode == 0, chosen.stderr
    report = json.loads(chosen.stdout)
    assert [(c["number"], c["title"]) for c in report["chapters"]] == [(1, "Loomings"), (2, "The Carpet-Bag")]
    first, second = (c["sentence_texts"] for c in report["chapters"])
    assert "Her my oh nee met Vol de mor in eighteen fifty one." in first  # the book's PLS, then yours
    assert second == ["The Carpet Bag", "Come,", "said the landlord,", "the harpoon eer is a dark complexioned chap.",
                      "I stuffed a shirt or two into my old carpet bag."]
    assert report["chapters"][1]["dialogue_sentences"] == [1, 3]
    assert report["lexicon"] == {"book": 4, "user": 2}
    assert report["chapters"][:2] == whole["chapters"][:2]
    plain = json.loads(cli(["inspect", str(book), "--json"], env).stdout)
    assert whole["chapters"][0]["estimated_seconds"] > plain["chapters"][0]["estimated_seconds"]  # speed 3
    shown = cli(["inspect", str(book), "--sentences", "--chapters", "2", *choices], env)
    assert shown.returncode == 0, shown.stderr
    assert "» Come," in shown.stdout and "  said the landlord," in shown.stdout and "2. The Carpet-Bag" in shown.stdout


def test_preview_and_a_voice_sample_are_playable_files_and_record_no_job(tmp_path: Path, env) -> None:  # type: ignore[no-untyped-def]
    book = write_epub(tmp_path / "moby.epub", "Moby-Dick", CHAPTERS)

    voice = cli(["voice", "new", "anna", "--seed", "7", "--sample", str(tmp_path / "anna.wav")], env)
    assert voice.returncode == 0, voice.stderr
    made = cli(["preview", str(book), "--chapter", "2", "--sentences", "2", "--speed", "4", "--dialogue-voice",
                "anna", "--lexicon", str(_lexicon(tmp_path)), "-o", str(tmp_path / "sample.mp3")], env)

    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == str(tmp_path / "sample.mp3")
    for sample, codec in ((tmp_path / "sample.mp3", "mp3"), (tmp_path / "anna.wav", "pcm_s16le")):
        assert _codec(sample) == codec and 0.5 < ffprobe_seconds(sample) < 60
    assert status_json(env) == []  # no job, nothing to resume
    assert not (Path(env["TTS_JOBS_DATA_DIR"]) / "jobs").exists()


def test_run_makes_the_audiobook_with_its_options_and_status_shows_them(tmp_path: Path, env) -> None:  # type: ignore[no-untyped-def]
    book = write_epub(tmp_path / "moby.epub", "Moby-Dick", CHAPTERS)

    result = cli(["run", str(book), "--out", str(tmp_path / "out"), "--chapters", "Spouter", "--chapters", "1",
                  "--speed", "3", "--narrator", "Nora Narrator", "--lexicon", str(_lexicon(tmp_path))], env)

    assert result.returncode == 0, result.stderr
    m4b = Path(result.stdout.strip().splitlines()[-1])
    assert [c["tags"]["title"] for c in ffprobe_chapters(m4b)] == ["Loomings", "The Spouter-Inn"]
    assert _tags(m4b)["composer"] == "Nora Narrator"
    [job] = status_json(env)
    assert job["options"]["chapters"] == ["Spouter", "1"] and job["options"]["speed"] == 3
    assert job["options"]["lexicon"]["entries"] == 1 and job["options"]["narrator"] == "Nora Narrator"
    detail = cli(["status", str(job["id"])], env).stdout
    assert "options\tchapters Spouter 1, speed 3, lexicon 1 entry (names.txt), narrator tag Nora Narrator" in detail


@pytest.mark.parametrize("command, choice, problem", [
    ("run", ["--speed", "12"], "error: --speed 12: give 1 (slowest) to 9 (fastest)"),
    ("preview", ["--oral", "10"], "error: --oral 10: give 0 to 9"),
    ("submit", ["--chapters", "3-1"], "error: --chapters 3-1: '3-1' names no chapter"),
    ("inspect", ["--chapters", "9"], "--chapters 9 goes past the last chapter: it has 3 (1-3)"),
    ("run", ["--lexicon", "nowhere.txt"], "error: --lexicon nowhere.txt: no such file"),
    ("preview", ["--dialogue-voice", "nobody"], "error: unknown voice 'nobody' (--dialogue-voice)"),
    ("bulk", ["--pause", "9"], "error: --pause 9: give 0 to 7"),
    ("run", ["--memory-gib", "0"], "error: --memory-gib 0: not a memory size; give GiB as a positive number"),
])
def test_a_bad_option_is_one_line_and_exit_2_before_the_model_loads(  # type: ignore[no-untyped-def]
        tmp_path: Path, settings_factory, command: str, choice: list[str], problem: str) -> None:
    env = env_for(settings_factory())
    book = write_epub(tmp_path / "moby.epub", "Moby-Dick", CHAPTERS)
    result = cli([command, str(tmp_path if command == "bulk" else book), *choice], env)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()  # not a word of loading a model
    assert problem in line and line.startswith("error:"), line
    assert status_json(env) == []


def _lexicon(folder: Path) -> Path:
    path = folder / "names.txt"
    path.write_text("harpooneer = harpoon-eer\n", encoding="utf-8")
    return path


def _codec(path: Path) -> str:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_name", "-of", "json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["streams"][0]["codec_name"]


def _tags(path: Path) -> dict[str, str]:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format_tags", "-of", "json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["format"]["tags"]
