"""The engine's measurement tools of ``python -m pipeline.bench`` in their CPU smoke modes (tiny
SYNTHETIC weights: noise, never speech; they measure nothing here): each runs end to end and
reports what it would measure on a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.bench", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600, check=False, env={**os.environ, **env})


def test_oom_reports_every_sentence_back_the_same() -> None:
    done = bench("oom", "--cpu-smoke")

    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout[done.stdout.index("{"):])
    assert report["cap_gib"] is None  # no cap on a CPU
    assert report["sentences_back"] == report["rows"] == 4
    assert report["same_lengths"] and report["identical"]


def test_graph_check_compares_each_way_with_the_eager_loop() -> None:
    done = bench("graph-check", "--cpu-smoke")

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if "rows identical to eager" in line]
    assert len(lines) == 4 and all(" 6/6 rows identical" in line for line in lines)


def test_step_profile_profiles_eager_steps_and_times_the_runner() -> None:
    done = bench("step-profile", "--cpu-smoke")

    assert done.returncode == 0, done.stderr[-3000:]
    assert "aten::" in done.stdout  # the profiler's table
    assert "eager step:" in done.stdout and "ms/step at 4 rows x 64 positions" in done.stdout


def test_prefill_profile_times_an_admission_on_the_engines_own_path_and_profiles_it() -> None:
    done = bench("prefill-profile", "--cpu-smoke")

    assert done.returncode == 0, done.stderr[-3000:]
    assert "admission of 4 rows x 24 positions (run at 4 x 24), eager:" in done.stdout
    assert "aten::" in done.stdout  # the profiler's table


def test_attention_check_compares_the_engine_kernels_and_the_candidate_with_float32() -> None:
    done = bench("attention", "--check", TRITON_INTERPRET="1")

    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    kernels = {line.split()[0] for line in done.stdout.splitlines() if "relative error" in line}
    assert kernels == {"engine", "split", "dot", "dot8"}


def test_formats_measures_each_narrower_format_against_fp32() -> None:
    done = bench("formats", "--cpu-smoke")

    assert done.returncode == 0, done.stderr[-3000:]
    rows = {cells[1].strip(): cells[2:] for line in done.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| format")
            for cells in [line.split("|")]}
    assert len(rows) == 9 and {"int8 weights", "int8 weights and inputs"} <= set(rows)
    error = {name: float(cells[1]) for name, cells in rows.items()}
    # fewer levels in the cache, more error: the narrower formats are really simulated
    cache = [error[kv] for kv in ("int8 KV (the GPU path's)", "KV int6", "KV int5", "KV int4")]
    assert cache == sorted(cache) and len(set(cache)) == 4
    assert cache[0] < error["FP8 weights"] < error["FP8 weights and inputs"]
    assert rows["KV int4"][2].strip() == "0.52"  # 4-bit codes and an fp16 scale per 64 against 8-bit


def test_a_slot_cache_keeps_keys_and_values_to_their_own_levels() -> None:
    import torch

    from pipeline.engine.kv_cache import SlotCache

    shape = (2, 1, 4, 8)
    cache = SlotCache(keys=[torch.zeros(shape, dtype=torch.int8)], values=[torch.zeros(shape, dtype=torch.int8)],
                      key_scales=[torch.zeros(shape[:3])], value_scales=[torch.zeros(shape[:3])],
                      dtype=torch.float32, levels=(7, 127))
    new = torch.randn(2, 1, 4, 8)
    cache.put(0, torch.tensor([0, 1]), new, new)

    assert cache.keys[0].abs().max() == 7 and cache.values[0].abs().max() == 127
    keys, values = cache.read(0, 2, 4)
    step = new.abs().amax(-1, keepdim=True)
    assert ((keys - new).abs() <= step / 14 + 1e-6).all() and ((values - new).abs() <= step / 254 + 1e-6).all()


def test_step_model_counts_what_steps_and_waveform_chunks_do_beyond_their_rows() -> None:
    import re

    done = bench("step-model")  # the engine bench's 1,024 sentences in 1,024 slots

    assert done.returncode == 0, done.stderr[-3000:]
    ended = float(re.search(r"ended: \+([\d.]+)%", done.stdout).group(1))
    powers, engine = map(float, re.search(r"powers of two ([\d.]+)x, the engine's buckets ([\d.]+)x",
                                          done.stdout).groups())
    before, whole = map(float, re.search(r"a chunk's worth ([\d.]+)x .*chunks' worth ([\d.]+)x", done.stdout).groups())
    assert ended > 20  # slots whose rows had ended did read their caches: a quarter more
    assert 1.0 <= engine < powers and 1.0 <= whole < before


def test_linears_times_each_linear_of_a_layer_and_a_step_in_each_format() -> None:
    done = bench("linears", "--cpu-smoke")

    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split("|")[2].strip() for line in done.stdout.splitlines() if line.startswith("| 32 |")]
    assert rows == ["qkv", "o", "gate_up", "down", "a step (2 layers)"]
    assert "| fp16 µs | int8 µs | int8 + scaling µs |" in done.stdout


def test_linears_without_a_gpu_says_so_in_one_line_and_exits_2() -> None:
    done = bench("linears", CUDA_VISIBLE_DEVICES="")

    assert done.returncode == 2
    assert done.stdout.strip().splitlines() == [
        "linears: no CUDA device here; run it on a GPU machine, or --cpu-smoke for the flow"]


def test_gated_down_gives_the_engines_mlp_output_from_one_kernel() -> None:
    done = bench("gated-down", "--cpu-smoke", TRITON_INTERPRET="1")

    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| 10 |")]
    assert [row[1].strip().split(",")[0] for row in rows] == ["engine: SiLU x up", "one kernel"]
    assert float(rows[1][4]) < 1e-3  # the same sums as SiLU x up and the GEMM adding the residual


def test_gated_down_without_a_gpu_says_so_in_one_line_and_exits_2() -> None:
    done = bench("gated-down", CUDA_VISIBLE_DEVICES="")

    assert done.returncode == 2
    assert done.stdout.strip().splitlines() == [
        "gated-down: no CUDA device here; run it on a GPU machine, or --cpu-smoke for the flow"]


def test_halves_times_one_pool_against_two_half_pools_on_two_streams() -> None:
    done = bench("halves", "--cpu-smoke", "--leave", "66", "--on-sms", "88")

    assert done.returncode == 0, done.stderr[-3000:]
    ways = [line.split("|")[1].strip() for line in done.stdout.splitlines()[3:]]
    assert ways == ["8 rows on one stream (the engine's way)", "its GEMMs alone (8 rows)",
                    "its attention alone (8 slots)", "two halves of 4, one after the other",
                    "two halves of 4 on two streams at once", "its GEMMs alone, leaving 66 SMs",
                    "two halves at once, their GEMMs leaving 66 SMs", "its attention alone, on 88 SMs",
                    "two halves at once, attention on 88 SMs, GEMMs on the rest"]
    assert [line.split("|")[3].strip() for line in done.stdout.splitlines()[3:4]] == ["1.00"]


def test_halves_without_a_gpu_says_so_in_one_line_and_exits_2() -> None:
    done = bench("halves", CUDA_VISIBLE_DEVICES="")

    assert done.returncode == 2
    assert done.stdout.strip().splitlines() == [
        "halves: no CUDA device here; run it on a GPU machine, or --cpu-smoke for the flow"]


ON_SMS_CHECK = """
import torch
from pipeline.bench.attention import inputs
from pipeline.bench.attention_on_sms import attention_on_sms, first_sms
from pipeline.engine.word_attention import word_decode_attention
tensors = inputs(5, 70, torch.device("cpu"), heads=3, dim=64)
want = word_decode_attention(*tensors)
counter = torch.full((1,), 99, dtype=torch.int32)  # left over from a run before: zeroed first
allowed = first_sms(1, torch.device("cpu"))  # the interpreter's programs all run on "SM 0"
for programs in (1, 4, 40):  # fewer programs than items, and more
    got = attention_on_sms(*tensors, allowed=allowed, counter=counter, programs=programs)
    assert torch.equal(got, want), programs
    assert counter.item() == 15 + programs  # every item taken once, then one look each past the end
attention_on_sms(*tensors, allowed=first_sms(0, torch.device("cpu")), counter=counter, programs=4)
assert counter.item() == 0  # on an SM not allowed, no program takes an item
print(0.0)
"""


def test_the_attention_kept_to_a_few_sms_gives_the_word_kernels_output_and_compiles_for_hopper(tmp_path) -> None:
    from tests.test_engine_kernels import compiled_for_hopper, worst_error_under_the_interpreter

    assert worst_error_under_the_interpreter(ON_SMS_CHECK) == 0.0
    codes = compiled_for_hopper(tmp_path, "--kernel", "words", "--kernel", "words-on-sms", "--stages", "2")
    # the engine's loop inside the persistent one: the same instructions (give or take the few its
    # layouts and scheduling place otherwise), no spills
    assert abs(codes["words-on-sms"]["loop_instructions"] / codes["words"]["loop_instructions"] - 1) < 0.05
    assert codes["words-on-sms"]["spills"] == 0 and codes["words-on-sms"]["copies"] > 0


class _Recorded:
    """A stream that logs what is queued on it, in order (the schedule's shape, no GPU)."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def wait_event(self, event: object) -> None:
        self.log.append(f"{self.name} waits {event}")

    def wait_stream(self, other: object) -> None:
        pass


def test_green_halves_queue_one_halfs_gemms_beside_the_others_attention(monkeypatch) -> None:
    import contextlib

    import torch

    from pipeline.bench import sm_split

    log: list[str] = []
    gemm, attention = _Recorded("G", log), _Recorded("A", log)
    on: list[_Recorded] = []

    class Event:
        made = 0

        def __init__(self) -> None:
            Event.made += 1
            self.name = f"e{Event.made}"

        def record(self, stream: _Recorded) -> None:
            self.after = log[-1]

        def __str__(self) -> str:
            return self.after

    @contextlib.contextmanager
    def stream(chosen: _Recorded):
        on.append(chosen)
        yield
        on.pop()

    monkeypatch.setattr(torch.cuda, "stream", stream)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: _Recorded("main", log))

    def step(name: str):
        return lambda: log.append(f"{on[-1].name} {name}")

    halves = [(step(f"qkv{h}"), step(f"attention{h}"), step(f"rest{h}")) for h in (0, 1)]
    sm_split.interleaved(halves, 2, gemm, attention)()
    queued = {name: [line.split(" ", 1)[1] for line in log if line.startswith(name + " ")] for name in ("G", "A")}
    # the GEMM stream: a half's rest of layer 0, then its qkv of layer 1, so the other half's
    # attention has GEMMs beside it; every attention after its half's qkv, every rest after its attention
    assert [s for s in queued["G"] if not s.startswith("waits")] == [
        "qkv0", "qkv1", "rest0", "qkv0", "rest1", "qkv1", "rest0", "rest1"]
    assert [s for s in queued["A"] if not s.startswith("waits")] == ["attention0", "attention1"] * 2
    assert queued["A"][:2] == ["waits G qkv0", "attention0"]
    assert queued["G"][queued["G"].index("rest1") - 1] == "waits A attention1"
