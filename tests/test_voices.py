"""Named voices as a user manages them: from a seed, from a recording, and used by a job."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import cli, status_json


def _write_recording(path: Path, seconds: float = 2.0) -> Path:
    t = np.arange(int(24_000 * seconds)) / 24_000
    samples = (0.3 * np.sin(2 * np.pi * 220 * t) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(24_000)
        w.writeframes(samples.tobytes())
    return path


def test_voices_from_a_seed_and_a_recording_are_listed_and_read_books(tmp_path: Path, settings_factory,  # type: ignore[no-untyped-def]
                                                                       redis_url: str) -> None:
    env = env_for(settings_factory())

    assert cli(["voice", "new", "narrator", "--seed", "7"], env).returncode == 0
    recorded = cli(["voice", "new", "sample", "--from-audio", str(_write_recording(tmp_path / "me.wav"))], env)
    assert recorded.returncode == 0, recorded.stderr
    listing = cli(["voice", "list"], env).stdout.splitlines()
    assert [line.split("\t")[0] for line in listing] == ["default", "narrator", "sample"]
    assert "seed 7" in listing[1] and "me.wav" in listing[2]

    book = write_epub(tmp_path / "book.epub", "Voiced", [("One", ["Hello there."])])
    submitted = cli(["submit", str(book), "--voice", "narrator"], env)
    assert submitted.returncode == 0, submitted.stderr
    assert status_json(env)[0]["voice"] == "narrator"


def test_unknown_voices_and_unreadable_recordings_are_clear_errors(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    book = write_epub(tmp_path / "book.epub", "Voiced", [("One", ["Hello there."])])

    unknown = cli(["submit", str(book), "--voice", "nobody"], env)
    assert unknown.returncode != 0 and "unknown voice 'nobody'" in unknown.stderr
    assert "Traceback" not in unknown.stderr

    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"RIFF not really a recording")
    bad = cli(["voice", "new", "broken", "--from-audio", str(junk)], env)
    assert bad.returncode != 0 and "junk.wav" in bad.stderr and "Traceback" not in bad.stderr
    assert cli(["voice", "new", "narrator", "--seed", "1"], env).returncode == 0
    again = cli(["voice", "new", "narrator", "--seed", "2"], env)
    assert again.returncode == 2 and "exists already" in again.stderr
