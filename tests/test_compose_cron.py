"""The nightly bulk run as an operator sets it up from `tts-jobs bulk --help`: the crontab lines it
shows are whole, valid crontab entries that run the command, with compose or without."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import yaml

from tests.e2e_helpers import TTS_JOBS

ROOT = Path(__file__).resolve().parent.parent
CRON_TIME = r"(\S+ ){5}"  # minute hour day month weekday


def test_bulk_help_shows_the_crontab_lines() -> None:
    env = {**os.environ, "COLUMNS": "200", "TERM": "dumb"}
    result = subprocess.run([*TTS_JOBS, "bulk", "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = [line.strip(" │") for line in result.stdout.splitlines()]
    [plain] = [line for line in lines if re.match(CRON_TIME + "tts-jobs bulk ", line)]
    assert " --wait " in plain and plain.endswith("2>&1")
    [composed] = [m.group(0) for line in lines if (m := re.search(CRON_TIME + "cd .*", line))]
    match = re.search(r"docker compose run --rm (\S+)", composed)
    assert match and composed.endswith("2>&1")
    service = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"][match.group(1)]
    assert service["command"][:2] == ["tts-jobs", "bulk"] and "--wait" in service["command"]
