"""Stored artifact paths: a path read from the database never leads outside the data directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.artifacts import ArtifactStore


def test_a_book_of_stored_paths_resolves_under_the_data_directory_and_refuses_escapes(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "data")
    root = (tmp_path / "data").resolve()
    assert store.resolve_many(["jobs/1/audio/0000/00001.wav", "jobs//1/./a.wav"]) == [
        root / "jobs/1/audio/0000/00001.wav", root / "jobs/1/a.wav"]
    for hostile in ("/etc/passwd", "../outside.wav", "jobs/../../outside.wav"):
        with pytest.raises(ValueError, match="outside the data directory"):
            store.resolve_many(["jobs/1/a.wav", hostile])
        with pytest.raises(ValueError, match="outside the data directory"):
            store.resolve(hostile)
