"""What a listener's library sees of the books `tts-jobs` makes: each book named the way `inspect`
names it, one audiobook per folder, and a finished book never replaced behind its job's back."""

from __future__ import annotations

import json
from pathlib import Path

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
