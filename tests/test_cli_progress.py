"""`tts-jobs run`'s progress as a person sees it: on a terminal (a real pseudo-terminal), piped,
quiet and verbose. The book is read by the real model code on tiny synthetic weights (noise)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import TTS_JOBS, cli

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR) ")
STAGES = ["loading the model", "reading", "speaking", "assembling", "encoding"]
CHAPTERS = [("The Beginning", [f"It was a bright cold day in April, and clock {i} struck."
                               for i in range(9)]),
            ("第二章 河岸", ["爱丽丝靠着姐姐坐在河岸边，很久没有事情可做。", "她偶尔看一眼姐姐的书。"])]


def run_in_terminal(command: list[str], env: dict[str, str], columns: int = 80,
                    timeout: float = 300) -> tuple[int, str]:
    """Run ``command`` with stdin, stdout and stderr on a pseudo-terminal ``columns`` wide; returns
    its exit code and everything the terminal received."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    process = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, cwd=ROOT,
                               env={**env, "COLUMNS": str(columns), "TERM": "xterm-256color"})
    os.close(follower)
    received, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([leader], [], [], 0.2)[0]:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: every writer has closed the terminal
                    break
                if not chunk:
                    break
                received += chunk
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
    return process.wait(timeout=30), received.decode("utf-8", errors="replace")


def terminal_lines(output: str) -> list[str]:
    """What each carriage return or newline starts, without colours or cursor moves."""
    return [ANSI.sub("", piece) for piece in re.split(r"[\r\n]", output)]


def _book_env(tmp_path: Path, settings_factory) -> tuple[Path, dict[str, str]]:  # type: ignore[no-untyped-def]
    # several batches: several updates; each recorded batch held a moment, so that the progress
    # between two batches is shown however fast this machine speaks the tiny book
    env = {**env_for(settings_factory()), "TTS_JOBS_MAX_BATCH": "4", "TTS_JOBS_FAULT_PAUSE": "recorded:0.6"}
    env.pop("TTS_JOBS_LOG_LEVEL", None)
    return write_epub(tmp_path / "book.epub", "A Small Book", CHAPTERS), env


def test_run_on_a_terminal_shows_each_stage_with_log_lines_above_the_bar_and_a_summary(  # type: ignore[no-untyped-def]
        tmp_path: Path, settings_factory) -> None:
    book, env = _book_env(tmp_path, settings_factory)

    code, output = run_in_terminal([*TTS_JOBS, "run", str(book), "--out", str(tmp_path / "out")], env)

    assert code == 0, output
    lines = terminal_lines(output)
    bars = [i for i, line in enumerate(lines) if "━" in line]
    logs = [i for i, line in enumerate(lines) if LOG_LINE.search(line)]
    assert bars and any(i > bars[0] for i in logs)  # log lines came while the bar was shown
    for i in logs:  # each log line starts its own line and holds no piece of a bar
        assert LOG_LINE.match(lines[i]) and "━" not in lines[i], lines[i]
    shown = [next((s for s in STAGES if line.startswith(s + " ")), None) for i, line in enumerate(lines)
             if i in bars]
    firsts = [s for s in STAGES if s in shown]
    assert firsts == STAGES and sorted(firsts, key=shown.index) == STAGES, shown
    assert any(re.search(r"\d+/\d+ sentences · ETA \d+:\d\d:\d\d", line) for line in lines)
    folder = tmp_path / "out" / "Test Author" / "A Small Book"
    tail = " ".join(line for line in lines[-10:] if "━" not in line)
    duration = r"\d+:\d\d:\d\d"
    assert re.search(rf"done A Small Book: {duration} of audio in {duration} \([\d.]+× real time\)", tail)
    assert f"files in {folder}" in tail and str(folder / "A Small Book.m4b") in tail


def test_run_piped_prints_a_line_per_stage_and_tenth_with_the_eta_and_verbose_adds_debug(  # type: ignore[no-untyped-def]
        tmp_path: Path, settings_factory) -> None:
    book, env = _book_env(tmp_path, settings_factory)

    result = cli(["run", str(book), "--out", str(tmp_path / "out"), "--verbose"], env)

    assert result.returncode == 0, result.stderr
    ours = [line.split("tts_jobs: book.epub: ", 1)[1] for line in result.stderr.splitlines()
            if "tts_jobs: book.epub: " in line]
    stages = [next(s for s in STAGES if line.startswith(s)) for line in ours]
    assert sorted(set(stages), key=stages.index) == STAGES and stages == sorted(stages, key=STAGES.index)
    speaking = [line for line in ours if line.startswith("speaking")]
    assert 2 <= len(speaking) <= 12  # the first, then one per tenth at most
    assert any(re.search(r"\d+/\d+ sentences \(\d+%\), .* ETA \d+:\d\d:\d\d$", line) for line in speaking)
    assert "\x1b[" not in result.stderr and "━" not in result.stderr
    assert " DEBUG " in result.stderr  # --verbose
    # where the speaking's device time went, once for the whole book (as a worker logs per stream)
    assert len(re.findall(r"job=\d+: device time: prefill [\d.]+ s, [1-9]\d* decode steps", result.stderr)) == 1
    output = Path(result.stdout.strip())
    assert output.is_file() and f"files in {output.parent}" in result.stderr
    status = cli(["status", "--json"], env, timeout=60)
    [job] = json.loads(status.stdout)
    assert job["x_realtime"] > 0 and job["elapsed_seconds"] > 0 and job["synthesis_seconds"] > 0
    assert job["length_seconds"] == job["report"]["total_seconds"] > job["audio_seconds"]


def test_run_quiet_prints_only_the_output_paths(tmp_path: Path, settings_factory) -> None:  # type: ignore[no-untyped-def]
    env = env_for(settings_factory())
    book = write_epub(tmp_path / "tiny.epub", "Tiny", [("Only", ["One short sentence."])])

    # --quiet before the command's name (--verbose after it is the other test's)
    result = cli(["--quiet", "run", str(book), "--out", str(tmp_path / "out"), "-f", "mp3"], env)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    [path] = result.stdout.splitlines()
    assert Path(path).is_file() and path.endswith(".mp3")


def test_the_model_libraries_draw_no_bars_of_their_own_once_silenced() -> None:
    probe = ("import sys; from jobs.cli.progress import silence_dependency_bars\n"
             "if sys.argv[1] == 'silenced': silence_dependency_bars()\n"
             "import tqdm, transformers.utils.logging as hf\n"
             "print(hf.is_progress_bar_enabled(), tqdm.tqdm(range(2)).disable)")
    env = {k: v for k, v in os.environ.items() if k not in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS")}

    def bars(mode: str) -> str:
        return subprocess.run([sys.executable, "-c", probe, mode], env=env, cwd=ROOT, capture_output=True,
                              text=True, check=True, timeout=120).stdout.split()

    assert bars("silenced") == ["False", "True"]
    assert bars("default") == ["True", "False"]  # what they do unless told
