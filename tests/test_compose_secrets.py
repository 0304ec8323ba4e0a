"""Passwords from Compose secrets: the *_FILE settings read a file's password into the URLs and
Flower's credentials, and a secret that is missing or empty ends a command with one error line."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from jobs.settings import Settings
from tests.e2e_helpers import TTS_JOBS


def test_password_files_go_into_the_database_and_broker_urls(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("p@ss/w:rd\n")  # one line, as `openssl rand` or an editor leaves it
    settings = Settings.from_env({
        "TTS_JOBS_DATA_DIR": str(tmp_path),
        "TTS_JOBS_DATABASE_URL": "postgresql://tts@postgres:5432/tts_jobs",
        "TTS_JOBS_DATABASE_PASSWORD_FILE": str(secret),
        "TTS_JOBS_BROKER_URL": "redis://redis:6379/0",
        "TTS_JOBS_BROKER_PASSWORD_FILE": str(secret)})
    url = make_url(settings.database_url)
    assert (url.username, url.password, url.host, url.database) == ("tts", "p@ss/w:rd", "postgres", "tts_jobs")
    from kombu.utils.url import url_to_parts

    broker = url_to_parts(settings.broker_url)
    assert (broker.hostname, broker.password, broker.port) == ("redis", "p@ss/w:rd", 6379)


@pytest.mark.parametrize("problem", ["missing", "empty"])
@pytest.mark.parametrize(("command", "variable"), [
    (["status"], "TTS_JOBS_DATABASE_PASSWORD_FILE"),
    (["flower", "--port", "1"], "FLOWER_BASIC_AUTH_FILE"),
])
def test_a_secret_file_that_cannot_be_used_is_one_error_line(
        tmp_path: Path, command: list[str], variable: str, problem: str) -> None:
    secret = tmp_path / "secret"
    if problem == "empty":
        secret.write_text("\n")
    env = {**os.environ, "TTS_JOBS_DATA_DIR": str(tmp_path / "data"), variable: str(secret)}
    env.pop("FLOWER_BASIC_AUTH", None)
    result = subprocess.run([*TTS_JOBS, *command], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and f"{variable}={secret}" in line
    assert ("cannot read it" if problem == "missing" else "empty") in line
    assert not (tmp_path / "data").exists(), "nothing is made before the settings are usable"
