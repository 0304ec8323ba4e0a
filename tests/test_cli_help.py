"""Help a person can use: every command's help without value labels on flags, with readable
types, its defaults and an example; `--version`; `bench` in the same style as the rest."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.e2e_helpers import TTS_JOBS

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ["run", "submit", "bulk", "inspect", "preview", "status", "cancel", "retry", "worker", "flower", "bench",
            "db upgrade", "model synthetic", "model download", "voice new", "voice list"]
TYPER_LABEL = re.compile(r"<(bool|str|int|float|path|list\[[^\]]*\])>")


def tts_jobs(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "120", "TERM": "dumb"}
    return subprocess.run([*TTS_JOBS, *args], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_each_help_has_readable_types_no_label_on_flags_and_an_example(command: str) -> None:
    result = tts_jobs(*command.split(), "--help")

    assert result.returncode == 0, result.stderr
    assert not TYPER_LABEL.search(result.stdout), TYPER_LABEL.findall(result.stdout)
    assert f"Usage: tts-jobs {command}".rstrip() in result.stdout
    assert re.search(r"Example: tts-jobs \S", result.stdout)
    assert "BOOL" not in result.stdout  # a flag takes no value, so it shows none


def test_run_help_shows_its_defaults() -> None:
    out = " ".join(tts_jobs("run", "--help").stdout.split())
    assert re.search(r"--format -f FMT .*\[default: m4b\]", out)
    assert re.search(r"--device DEVICE .*default: \(TTS_JOBS_DEVICE, else auto\)", out)
    assert re.search(r"--precision PRECISION .*default: \(TTS_JOBS_PRECISION, else auto\)", out)
    assert "--voice NAME" in out and "[default: default]" in out


@pytest.mark.parametrize("command", ["run", "submit", "bulk"])
def test_each_book_option_is_shown_with_an_example(command: str) -> None:
    out = " ".join(tts_jobs(command, "--help").stdout.replace("│", " ").split())
    for example in ("--chapters 1-3,7,12-", "--chapters Loomings", "--speed 4", "--lexicon names.txt",
                    "--dialogue-voice anna", "--narrator \"Read by ChatTTS\"", "--oral 2", "--laugh 0",
                    "--pause 4"):
        assert example in out, example
    assert out.count("e.g. --") >= 8
    assert "default: the text as written" in out  # --refine, and the style options that imply it


def test_the_main_help_shows_an_example_of_each_book_option_and_the_preview() -> None:
    out = " ".join(tts_jobs("--help").stdout.replace("│", " ").split())
    for example in ("--chapters 1-3,7,12-", "--speed 4", "--lexicon names.txt", "--dialogue-voice anna",
                    "--oral 2 --pause 4", "--narrator", "tts-jobs preview book.epub"):
        assert f"{example}" in out, example


def test_version_comes_from_the_package() -> None:
    result = tts_jobs("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"tts-jobs {metadata.version('tts-jobs')}"


def test_bench_help_is_the_measurement_tools_own_and_python_dash_m_gives_the_same() -> None:
    help_text = tts_jobs("bench", "--help").stdout

    assert "Usage: tts-jobs bench" in help_text
    assert re.search(r"--synthetic \{tiny,full\}", help_text)
    assert re.search(r"--scaling-batch N\[:S\]", help_text)
    assert re.search(r"^  assembly +", help_text, re.MULTILINE)  # the other tools, listed
    refused = tts_jobs("bench", "--device", "cpu")
    assert refused.returncode == 2 and "--model-dir --synthetic is required" in refused.stderr
    module = subprocess.run([*TTS_JOBS[:1], "-m", "pipeline.bench", "--help"], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert module.returncode == 0
    assert module.stdout.replace("python -m pipeline.bench", "tts-jobs bench").split() == help_text.split()


def test_bench_options_reach_the_benchmark(tmp_path: Path) -> None:
    report = tmp_path / "bench.json"
    result = tts_jobs("bench", "--synthetic", "tiny", "--device", "cpu", "--sentences", "1", "--precision",
                      "fp32", "--batch", "3", "--no-upstream", "--scaling-batch", "0", "--json", str(report))

    assert result.returncode == 0, result.stderr
    [row] = json.loads(report.read_text())["rows"]
    assert (row["system"], row["precision"], row["batch"], row["sentences"]) == ("tts-jobs", "fp32", 3, 1)
    assert "| tts-jobs | fp32 | 3 |" in result.stdout


def test_a_finished_command_leaves_at_once_with_its_output_and_log_lines_and_its_code() -> None:
    """The command line ends without unwinding the interpreter once a command has returned (a
    finished run spent 0.6-0.8 s there): what it printed and logged still arrives, whole, and
    the command's own exit status is the process's; threads it left running do not hold it."""
    code = ("import logging, sys, threading, time; from jobs.cli.main import leave; "
            "threading.Thread(target=time.sleep, args=(60,)).start(); "
            "sys.stdout.write('x' * 100000); logging.basicConfig(); logging.getLogger('t').warning('logged'); "
            "leave(3)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 3
    assert done.stdout == "x" * 100000 and "WARNING:t:logged" in done.stderr
