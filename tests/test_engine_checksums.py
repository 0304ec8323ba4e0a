"""Real weights are hashed against the release's list at the first start, and again only when a
file on disk changes. The tiny synthetic files stand in for a release here: without their marker
they load as real weights, checked against their own digests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.engine import checksums
from pipeline.engine.weights import ASSET_FILES, SYNTHETIC_MARKER, ModelFiles, locate_model
from pipeline.errors import ModelError
from pipeline.files import file_sha256


@pytest.fixture()
def release(tiny_model_dir: Path, tmp_path: Path) -> tuple[ModelFiles, dict[str, str]]:
    root = Path(shutil.copytree(tiny_model_dir, tmp_path / "model"))
    (root / SYNTHETIC_MARKER).unlink()
    files = locate_model(root)
    assert not files.synthetic
    return files, {key: file_sha256(files.asset(rel)) for key, rel in ASSET_FILES.items()}


@pytest.fixture()
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    paths: list[Path] = []

    def counting(path: Path) -> str:
        paths.append(path)
        return file_sha256(path)

    monkeypatch.setattr(checksums, "file_sha256", counting)
    return paths


def test_a_second_start_does_not_hash_the_weights_again(release, hashed) -> None:  # type: ignore[no-untyped-def]
    files, expected = release
    checksums.verify_real_weights(files, expected)
    assert len(hashed) == len(ASSET_FILES)

    checksums.verify_real_weights(files, expected)
    assert len(hashed) == len(ASSET_FILES)  # nothing hashed the second time


def test_a_file_changed_after_it_was_verified_is_hashed_and_refused_by_name(release, hashed) -> None:  # type: ignore[no-untyped-def]
    files, expected = release
    checksums.verify_real_weights(files, expected)
    damaged = files.asset("asset/Vocos.safetensors")
    with damaged.open("ab") as f:
        f.write(b"\0")

    with pytest.raises(ModelError) as caught:
        checksums.verify_real_weights(files, expected)
    assert str(damaged) in str(caught.value) and "download it again" in str(caught.value)
    assert hashed[-1] == damaged


def test_weights_that_are_not_the_release_are_refused_before_anything_loads(release) -> None:  # type: ignore[no-untyped-def]
    files, _ = release
    with pytest.raises(ModelError, match="sha256 does not match"):
        checksums.verify_real_weights(files)  # the release's own list
    assert not (files.root / checksums.VERIFIED_RECORD).exists()
