"""`tts-jobs run` on a GPU checks its book in a forked child while it imports the engine's modules
(``jobs/forked.py``, ``runtime.import_engine_ahead``): the answer is the book as read in-process,
and every kind of refusal is said as before, in one line, exit 2, nothing recorded.

The fork's own behaviour is tried in a fresh interpreter each time: a test process may hold
threads from earlier tests, and then no fork is taken (``can_fork``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.books import write_epub
from tests.conftest import env_for
from tests.e2e_helpers import cli, status_json

ROOT = Path(__file__).resolve().parent.parent

CALLS = {
    "answer": "lambda: {'pid': os.getpid(), 'words': ['a', 'b']}",
    "bad book": "lambda: (_ for _ in ()).throw(BookError('x.epub', 'not a book', 're-export it'))",
    "failure": "lambda: (_ for _ in ()).throw(TtsJobsError('the model is gone'))",
    "bug": "lambda: 1 / 0",
    "silent death": "lambda: os._exit(3)",
}


def forked(call: str, fork: bool = True) -> dict:
    """What ``ForkedCall(call).answer()`` gave in a fresh interpreter: its value or its error."""
    script = f"""
import json, os, sys
from jobs.forked import ForkedCall
from pipeline.errors import BookError, TtsJobsError
try:
    value = ForkedCall({call}, fork={fork}).answer()
    print(json.dumps({{"value": value, "parent": os.getpid()}}))
except BaseException as exc:
    print(json.dumps({{"error": type(exc).__name__, "words": str(exc), "parent": os.getpid()}}))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_answer_comes_from_another_process_unless_no_fork_is_asked_for() -> None:
    got = forked(CALLS["answer"])
    assert got["value"]["words"] == ["a", "b"] and got["value"]["pid"] != got["parent"]
    here = forked(CALLS["answer"], fork=False)
    assert here["value"]["pid"] == here["parent"]


@pytest.mark.parametrize(("call", "error", "words"), [
    ("bad book", "InputError", "x.epub: not a book (re-export it)"),
    ("failure", "TtsJobsError", "the model is gone"),
    ("bug", "RuntimeError", "ZeroDivisionError"),
    ("silent death", "RuntimeError", "ended without an answer"),
])
def test_each_kind_of_failure_comes_back_as_the_same_kind(call: str, error: str, words: str) -> None:
    got = forked(CALLS[call])
    assert got["error"] == error and words in got["words"], got


def test_the_forked_check_reads_the_book_as_the_run_would(settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The child's Validated is the same book, hash and all, and the database it made is the run's."""
    from jobs.cli.book_commands import _checked_run
    from jobs.cli.options import job_options
    from jobs.forked import ForkedCall
    from jobs.runtime import open_runtime

    settings = settings_factory()
    book = write_epub(tmp_path / "book.epub", "Forked", [("One", ["First sentence.", "Second one."]),
                                                         ("Two", ["A third sentence to read."])])
    options = job_options({}, settings.data_dir, ["m4b"])
    child = ForkedCall(lambda: _checked_run(settings, book, options)).answer()
    here = ForkedCall(lambda: _checked_run(settings, book, options), fork=False).answer()
    assert child.sha256 == here.sha256
    assert child.book == here.book
    assert [c.title for c in child.book.chapters] == ["One", "Two"]
    open_runtime(settings)  # the schema the child made is current: nothing to upgrade


@pytest.fixture()
def env(settings_factory) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return env_for(settings_factory())


@pytest.mark.parametrize("broken", [b"not a zip", b"PK\x03\x04 truncated"])
def test_a_refusal_on_a_gpu_is_one_line_while_torch_imports_beside(broken: bytes, env: dict[str, str],
                                                                   tmp_path: Path) -> None:
    """``--device cuda``: the checks fork and torch imports on a thread; a bad book still ends the run
    with one error line and exit 2 before any job is recorded (on this CPU machine the engine would
    fail to load; the refusal comes first)."""
    book = tmp_path / "broken.epub"
    book.write_bytes(broken)
    result = cli(["run", str(book), "--device", "cuda"], env, timeout=120)
    said = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, said
    assert len(said) == 1 and said[0].startswith(f"error: {book}:"), said
    assert "Traceback" not in result.stderr
    assert status_json(env) == []


def test_the_cuda_context_made_beside_is_the_device_torch_will_use() -> None:
    """``cuda:1`` is the driver's ordinal 1; ``cuda`` and ``auto`` torch's default, 0. Where no
    driver is (this machine) nothing is made and nothing is raised: torch says what is wrong."""
    from pipeline.engine.cuda_context import device_ordinal, open_primary_context

    assert [device_ordinal(d) for d in ("cuda:1", "cuda:0", "cuda", "auto")] == [1, 0, 0, 0]
    try:
        import ctypes

        ctypes.CDLL("libcuda.so.1")
    except OSError:
        assert open_primary_context(0) is False
