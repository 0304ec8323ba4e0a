"""Measurement has one home: every tool is a command of ``python -m pipeline.bench``, no tool
reaches into ``tests/`` or edits ``sys.path``, and ``scripts/`` keeps only the shell tools."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from pipeline.bench.commands import DEFAULT, TOOLS, split_command

ROOT = Path(__file__).resolve().parents[1]
TOOL_FOLDERS = (ROOT / "pipeline" / "bench", ROOT / "jobs" / "bench")


def test_arguments_without_a_command_are_the_engine_benchmarks() -> None:
    assert split_command(["--synthetic", "full", "--device", "cuda"]) == (
        DEFAULT, ["--synthetic", "full", "--device", "cuda"])
    assert split_command(["assembly", "--hours", "1"]) == ("assembly", ["--hours", "1"])
    assert split_command([]) == (DEFAULT, [])


def test_every_listed_tool_has_a_main() -> None:
    for name, tool in TOOLS.items():
        assert callable(importlib.import_module(tool.module).main), name
        # pipeline/ never imports jobs/: a jobs tool is started as a child process
        assert tool.in_child == tool.module.startswith("jobs."), name


def _imports_and_calls(path: Path) -> tuple[set[str], set[str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    calls = {ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return imported, calls


def test_no_tool_imports_tests_or_edits_sys_path() -> None:
    wrong = []
    for folder in TOOL_FOLDERS:
        for path in sorted(folder.glob("*.py")):
            imported, calls = _imports_and_calls(path)
            wrong += [f"{path.name} imports {name}" for name in imported if name.split(".")[0] in ("tests", "books")]
            wrong += [f"{path.name} calls {call}" for call in calls if call.startswith("sys.path.")]
    assert not wrong


def test_scripts_holds_only_the_set_up_and_developer_shell_tools() -> None:
    python_files = sorted(path.name for path in (ROOT / "scripts").iterdir() if path.suffix == ".py")
    assert not python_files


def test_python_m_pipeline_bench_takes_the_kernel_choices_of_the_environment() -> None:
    """`python -m pipeline.bench` applies TTS_JOBS_* kernel choices as `tts-jobs bench` does (an
    A/B run through it once measured the same code twice); one it cannot take is said in a line."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TTS_JOBS_CUDA_WAIT": "snooze"}
    done = subprocess.run([sys.executable, "-m", "pipeline.bench", "--help"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == ("python -m pipeline.bench: unknown CUDA wait 'snooze': use block or spin "
                                   "(TTS_JOBS_CUDA_WAIT)")
