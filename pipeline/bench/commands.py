"""``python -m pipeline.bench COMMAND ...`` (also ``tts-jobs bench COMMAND ...``): every measurement
tool of the project behind one command line. Without a command it runs the engine benchmark, so
``python -m pipeline.bench --synthetic full --device cuda ...`` is the engine benchmark as before.

A tool is a module with ``main(argv, prog) -> int``. The tools that read the job table
(``jobs/bench/``) run as a child process: of ``jobs/`` the tools here take only the settings (the
one reader of the environment), and nothing of ``storage/``.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

PROGRAM = "python -m pipeline.bench"
DEFAULT = "engine"


@dataclass(frozen=True)
class Tool:
    module: str
    summary: str
    in_child: bool = False  # a jobs/ tool, started as `python -m MODULE`
    takes_prog: bool = True  # main(argv, prog=...): its help names the command it was run as


TOOLS = {
    "engine": Tool("pipeline.bench.engine_bench",
                   "synthesis throughput, tts-jobs against upstream ChatTTS (the default)"),
    "assembly": Tool("pipeline.bench.assembly", "synthetic sentence audio assembled into audiobooks"),
    "assembly-tail": Tool("pipeline.bench.assembly_tail",
                          "the tail after the last sentence, for a recording arriving at a given rate"),
    "completion-model": Tool("pipeline.bench.completion_model",
                             "a model of when a book's chapters are done in the slots, per wave count"),
    "step-model": Tool("pipeline.bench.step_model",
                        "a model of the work decode steps and Decoder+Vocos chunks do beyond their rows' own"),
    "ingest": Tool("pipeline.bench.ingest", "a generated novel read and split; --jobs: submit, ingest, plan"),
    "run-book": Tool("pipeline.bench.run_book", "`tts-jobs run` of a generated EPUB, start to audiobook"),
    "workers-scaling": Tool("jobs.bench.workers_scaling",
                            "books through Celery: one synthesis worker against two", in_child=True),
    "oom": Tool("pipeline.bench.oom", "a forced CUDA out-of-memory and its recovery by halving"),
    "graph-check": Tool("pipeline.bench.graph_check",
                        "CUDA-graph steps and slot refills against the eager loop, token for token"),
    "formats": Tool("pipeline.bench.formats",
                    "what a narrower KV cache or FP8 / int8 linears would cost in fidelity (simulated, any device)"),
    "linears": Tool("pipeline.bench.linears",
                    "the GPT's linears at a step's shapes in fp16, int8 and FP8: what each format's GEMMs take"),
    "gated-down": Tool("pipeline.bench.gated_down",
                       "the MLP's SiLU x up, down GEMM and residual add as one Triton GEMM against the engine's two kernels"),
    "halves": Tool("pipeline.bench.halves",
                   "a step's layers for all slots on one stream against two half-pools on two streams at once"),
    "step-profile": Tool("pipeline.bench.step_profile", "where one decode step's GPU time goes"),
    "prefill-profile": Tool("pipeline.bench.prefill_profile",
                            "where an admission's prefill goes: the engine's own path, timed and profiled"),
    "attention": Tool("pipeline.bench.attention",
                      "the engine's decode attention kernel against candidate rewrites"),
    "kernel-code": Tool("pipeline.bench.kernel_code",
                        "the attention kernels' loops as the H100/H200 runs them, counted (no GPU needed)"),
    "trace-gaps": Tool("pipeline.bench.trace_gaps", "the GPU's idle gaps in a bench trace"),
    "memory-peak": Tool("pipeline.bench.memory_peak", "what held the GPU's memory at its peak (--memory-history)"),
    "spy-summary": Tool("pipeline.bench.spy_summary", "a py-spy profile, per process and thread"),
    "gpu-checks": Tool("pipeline.bench.gpu_checks", "one H200 call: attention kernels, OOM under a cap, "
                       "the bench per kernel and per memory cap", takes_prog=False),
}


def listing(prog: str = PROGRAM) -> str:
    """The commands, one line each (the engine benchmark's help ends with it)."""
    width = max(map(len, TOOLS))
    lines = [f"  {name:<{width}}  {tool.summary}" for name, tool in TOOLS.items()]
    return "\n".join([f"commands ({prog} COMMAND --help for each):", *lines])


def split_command(argv: Sequence[str]) -> tuple[str, list[str]]:
    """(command, its arguments); arguments that name no command are the engine benchmark's."""
    if argv and argv[0] in TOOLS:
        return argv[0], list(argv[1:])
    return DEFAULT, list(argv)


def main(argv: Sequence[str] | None = None, prog: str = PROGRAM) -> int:
    name, rest = split_command(list(sys.argv[1:] if argv is None else argv))
    tool = TOOLS[name]
    if tool.in_child:  # its processes take the environment's choices themselves
        return subprocess.call([sys.executable, "-m", tool.module, "--prog", f"{prog} {name}", *rest])
    refused = apply_environment_tuning(prog)
    if refused:
        return refused
    runner = importlib.import_module(tool.module)
    if not tool.takes_prog:
        return runner.main(rest) or 0
    return runner.main(rest, prog=prog if name == DEFAULT else f"{prog} {name}") or 0


def apply_environment_tuning(prog: str) -> int:
    """The kernel choices set in the environment (TTS_JOBS_FUSED_LAYERS=0 and the like, for an A/B
    of the kernels) applied to this process, as `tts-jobs run` and a worker apply them: a tool
    run without them once timed the same code twice. Returns 0, or 2 after saying in a line what
    it cannot take."""
    from jobs.settings import Settings

    tuning = Settings.from_env().engine_tuning
    if tuning is None:
        return 0
    from pipeline.engine.loading import apply_tuning
    from pipeline.errors import ModelError

    try:
        apply_tuning(tuning)
    except ModelError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    return 0
