"""Helpers for end-to-end tests that drive the real `tts-jobs` command and read real outputs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TTS_JOBS = [sys.executable, "-m", "jobs.cli"]


# A shell that starts the suite in the background ignores SIGINT and SIGQUIT, and a child inherits
# ignored signals: a Ctrl-C the test sends would then do nothing. Each child starts with the defaults.
STOP_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM)


def default_stop_signals() -> None:
    """Give the calling process the default action for every stop signal (a ``preexec_fn``)."""
    for number in STOP_SIGNALS:
        signal.signal(number, signal.SIG_DFL)


def popen_stoppable(command: list[str], env: dict[str, str], **options: object) -> subprocess.Popen:  # type: ignore[type-arg]
    """Start ``command`` from the repository root so that the signals a test sends it act as a user's."""
    return subprocess.Popen(command, env=env, cwd=Path(__file__).resolve().parent.parent,  # type: ignore[call-overload]
                            preexec_fn=default_stop_signals, **options)  # noqa: PLW1509 - tests start no threads


def cli(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run `tts-jobs ARGS` as a user would, in a subprocess."""
    return subprocess.run(TTS_JOBS + args, env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=Path(__file__).resolve().parent.parent)


def status_json(env: dict[str, str], job: int | None = None) -> dict | list:  # type: ignore[type-arg]
    result = cli(["status", "--json"] + ([str(job)] if job is not None else []), env, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


FINAL_STATES = ("done", "failed", "cancelled")


def job_state(database_url: str, job: int) -> str | None:
    """A job's state read from its database in this process (None while it cannot be read yet).

    Waiting polls this, not `tts-jobs status`: each command costs a Python start and a second of
    CPU, which a poll every second took from the workers under test on a 2-core machine."""
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from storage.db import READ_ONLY, make_engine

    engine = make_engine(database_url).execution_options(**{READ_ONLY: True})
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT state FROM jobs WHERE id = :id"), {"id": job}).scalar()
    except OperationalError:  # the schema being made, a server restarting
        return None
    finally:
        engine.dispose()


def wait_for_final_state(env: dict[str, str], job: int, timeout: float = 240) -> dict:  # type: ignore[type-arg]
    """Wait until the job is done, failed or cancelled; its `tts-jobs status --json` then."""
    from jobs.settings import Settings

    database_url = Settings.from_env(env).database_url
    deadline = time.monotonic() + timeout
    while job_state(database_url, job) not in FINAL_STATES:
        if time.monotonic() > deadline:
            status = status_json(env, job)
            assert isinstance(status, dict)
            if status["state"] in FINAL_STATES:
                return status
            raise AssertionError(f"job {job} still {status['state']} after {timeout} s: {status}")
        time.sleep(0.5)
    status = status_json(env, job)
    assert isinstance(status, dict)
    return status


def ffprobe_seconds(path: Path) -> float:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "json",
                          str(path)], capture_output=True, text=True, check=True).stdout
    return float(json.loads(out)["format"]["duration"])


def ffprobe_chapters(path: Path) -> list[dict]:  # type: ignore[type-arg]
    out = subprocess.run(["ffprobe", "-v", "error", "-show_chapters", "-of", "json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["chapters"]


def sentence_audio_seconds(data_dir: Path, job: int) -> float:
    """Total duration of a job's stored sentence WAVs, read from the files themselves."""
    import wave

    total = 0.0
    for wav_path in sorted((data_dir / "jobs" / str(job) / "audio").rglob("*.wav")):
        with wave.open(str(wav_path)) as w:
            total += w.getnframes() / w.getframerate()
    return total


def assert_duration_matches_sentences_plus_pauses(output: Path, status: dict, data_dir: Path) -> None:  # type: ignore[type-arg]
    """The audiobook is as long as its sentence audio plus the pauses assembly added (±2 %)."""
    expected = sentence_audio_seconds(data_dir, status["id"]) + status["report"]["pause_seconds"]
    actual = ffprobe_seconds(output)
    assert abs(actual - expected) <= 0.02 * expected, (actual, expected)


def terminate(process: subprocess.Popen) -> str:  # type: ignore[type-arg]
    """Stop a process we started (warm shutdown first) and return its output."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    return process.stdout.read() if process.stdout else ""


def worker_command(loglevel: str = "INFO", *options: str) -> list[str]:
    return TTS_JOBS + ["worker", "--loglevel", loglevel, *options]


def popen_worker(env: dict[str, str], log_path: Path, loglevel: str = "INFO",
                 *options: str) -> subprocess.Popen:  # type: ignore[type-arg]
    """`tts-jobs worker` (every queue, unless ``options`` say otherwise) logging to ``log_path``."""
    log = open(log_path, "w")  # noqa: SIM115 - the process owns it until it exits
    return popen_stoppable(worker_command(loglevel, *options), env, stdout=log, stderr=subprocess.STDOUT,
                           start_new_session=True)


def read_log(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


__all__ = [
    "assert_duration_matches_sentences_plus_pauses",
    "cli",
    "default_stop_signals",
    "ffprobe_chapters",
    "ffprobe_seconds",
    "os",
    "popen_stoppable",
    "popen_worker",
    "read_log",
    "status_json",
    "terminate",
    "wait_for_final_state",
]


HALF_WRITE_THEN_HANG = """
import sys, time
from pathlib import Path
from pipeline.temp_files import temporary_sibling
partial = temporary_sibling(Path(sys.argv[1]), sys.argv[2])
partial.write_bytes(b"RIFF half a file")
print(partial, flush=True)
time.sleep(600)
"""


def killed_mid_write(final: Path, kind: str = "tmp") -> Path:
    """What a writer killed by SIGKILL mid-write leaves: its temporary sibling of ``final``."""
    final.parent.mkdir(parents=True, exist_ok=True)
    writer = subprocess.Popen([sys.executable, "-c", HALF_WRITE_THEN_HANG, str(final), kind], cwd=Path(__file__).resolve().parent.parent,
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    partial = Path(writer.stdout.readline().strip())
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    assert partial.is_file() and partial.parent == final.parent and partial.name.startswith(f".{final.name}")
    return partial
