"""The benchmark: its workload follows the protocol, and a tiny CPU run produces a full report."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.bench.protocol import BenchOptions, forced_steps, make_workload
from pipeline.bench.report import BenchReport, BenchRow, format_table


def test_the_workload_is_a_mixed_book_in_book_order() -> None:
    texts = make_workload(1024, seed=0)
    assert len(texts) == 1024 and make_workload(1024, seed=0) == texts
    assert all(10 <= len(t) <= 60 for t in texts)
    chinese = sum(any("\u4e00" <= c <= "\u9fff" for c in t) for t in texts)
    english = sum(any(c.isascii() and c.isalpha() for c in t) for t in texts)
    assert chinese > 300 and english > 300
    lengths = [len(t) for t in texts]
    assert lengths != sorted(lengths)  # not pre-sorted
    assert forced_steps("字" * 10) == 47 and forced_steps("a" * 60) == 282


def test_the_report_has_the_fields_the_docs_and_the_lead_expect() -> None:
    rows = (BenchRow(system="tts-jobs", precision="fp16", batch=256, sentences=1024, audio_s=3574,
                     wall_s=7.1, x_realtime=503.8, peak_gib=6.39, top1_agreement=0.997,
                     snr_db=float("inf")),
            BenchRow(system="upstream", precision="fp32", batch=512, sentences=1024, audio_s=3574,
                     wall_s=26.0, x_realtime=137.7, peak_gib=29.6))
    report = BenchReport(rows=rows, device="cuda: H200", weights="synthetic full", date="d")
    data = json.loads(report.to_json())
    assert {"rows", "device", "weights", "date"} <= set(data)
    for key in ("system", "precision", "batch", "x_realtime", "peak_gib", "top1_agreement",
                "snr_db"):
        assert key in data["rows"][0]
    assert data["rows"][0]["snr_db"] is None  # inf is not JSON
    table = format_table(report)
    assert "| tts-jobs | fp16 | 256 |" in table and "503.8" in table


def test_a_tiny_cpu_run_measures_every_requested_row(tiny_model_dir: Path) -> None:
    pytest.importorskip("torch")
    from pipeline.bench.engine_bench import run_bench

    report = run_bench(BenchOptions(model_dir=tiny_model_dir, device="cpu",
                                    precisions=("fp32", "int8"), sentences=3, upstream=False,
                                    fidelity_sentences=2, batch=2, max_steps=12))
    assert [(r.system, r.precision) for r in report.rows] == [("tts-jobs", "fp32"),
                                                              ("tts-jobs", "int8")]
    for row in report.rows:
        assert row.x_realtime > 0 and row.sentences == 3 and row.batches == 2
        # where the time went: every phase measured, and together no more than the wall time
        assert row.gpt_s > 0 and row.prefill_s > 0 and row.waveform_s > 0
        assert row.gpt_s + row.prefill_s + row.waveform_s <= row.wall_s * 1.01
        assert row.steps >= 12 and row.bandwidth_tbs > 0
    table = format_table(report)
    assert "| fp32 | 2 | 2 |" in table and "ms/step" in table
    assert report.rows[0].top1_agreement == 1.0 and report.rows[1].top1_agreement > 0.9
    assert report.weights == str(tiny_model_dir)


def test_the_command_line_writes_json_and_prints_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.bench import engine_bench as bench

    seen: list[BenchOptions] = []

    def fake_run(opts: BenchOptions, progress: object = None) -> BenchReport:
        seen.append(opts)
        row = BenchRow(system="tts-jobs", precision="fp16", batch=opts.batch, sentences=8,
                       audio_s=10.0, wall_s=1.0, x_realtime=10.0, peak_gib=None)
        return BenchReport(rows=(row,), device="cpu", weights="synthetic tiny", date="today")

    monkeypatch.setattr(bench, "run_bench", fake_run)
    out = tmp_path / "bench.json"
    bench.main(["--synthetic", "tiny", "--device", "cpu", "--precision", "fp16,int8",
                "--sentences", "8", "--upstream-batch", "4", "--batch", "64",
                "--slots", "32", "--scaling-batch", "1024:512", "--scaling-batch", "512",
                "--json", str(out)])
    opts = seen[0]
    assert opts.slots == 32 and opts.scaling_batches == ((1024, 512), 512)
    assert opts.precisions == ("fp16", "int8") and opts.upstream_batches == (4,)
    assert opts.sentences == 8 and opts.batch == 64 and opts.synthetic == "tiny"
    assert json.loads(out.read_text())["rows"][0]["precision"] == "fp16"
    assert "| tts-jobs | fp16 | 64 |" in capsys.readouterr().out


def test_the_help_lists_the_other_measurement_tools(capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.bench.commands import TOOLS, main

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("Usage: python -m pipeline.bench") and "--synthetic" in out
    assert all(f"  {name} " in out for name in TOOLS)


def test_python_dash_m_runs_the_benchmark() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pipeline.bench", "engine", "--help"], capture_output=True,
                          text=True, cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert done.returncode == 0 and "Usage: python -m pipeline.bench [-h]" in done.stdout


def test_upstream_batches_that_run_out_of_memory_under_a_cap_are_not_the_comparison() -> None:
    """Under ``--memory-gib`` an upstream batch size that does not fit is a row of its own (0x,
    "out of memory"); the ratios compare with the best upstream batch that ran."""
    from pipeline.bench.report import ratios

    def row(system: str, batch: int, x: float, note: str = "") -> BenchRow:
        return BenchRow(system=system, precision="fp16" if system == "tts-jobs" else "fp32", batch=batch,
                        sentences=48, audio_s=x, wall_s=1.0, x_realtime=x, peak_gib=None, note=note)

    found = ratios([row("tts-jobs", 1024, 550.0), row("upstream", 16, 10.0),
                    row("upstream", 32, 0.0, "out of memory")])
    assert found == {"tts-jobs fp16 batch 1024 / best upstream (batch 16)": 55.0}
    assert ratios([row("tts-jobs", 1024, 550.0), row("upstream", 32, 0.0, "out of memory")]) == {}


def test_profile_writes_where_the_host_time_of_each_timed_run_went(tiny_model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from pipeline.bench.engine_bench import _parser as parser
    from pipeline.bench.engine_bench import options_from, run_bench

    args = parser("bench").parse_args(["--model-dir", str(tiny_model_dir), "--device", "cpu", "--precision",
                                       "fp32", "--sentences", "2", "--no-upstream", "--profile", str(tmp_path)])
    opts, _ = options_from(args)

    run_bench(replace(opts, fidelity_sentences=1, batch=2, max_steps=8))

    [profile] = tmp_path.glob("host-*.txt")
    assert "function calls" in profile.read_text()


def test_a_finished_rows_engine_is_given_back_though_the_loaded_engine_was_frozen(tiny_model_dir: Path) -> None:
    """A GPU run freezes what is alive once its engine is loaded (``spare_the_collector``); the
    bench's fp32 reference engine, dropped before the timed rows, must still be collected, or
    its memory stays under every capped row (a 4-GiB cap then planned ~20-row batches)."""
    import gc
    import weakref

    from pipeline.bench.harness import release_device_memory
    from pipeline.engine import EngineConfig
    from pipeline.engine.host_threads import spare_the_collector
    from pipeline.engine.loading import load_engine

    engine = load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))
    spare_the_collector()
    try:
        gone = weakref.ref(engine.parts.gpt)
        del engine
        release_device_memory()
        assert gone() is None
    finally:
        gc.unfreeze()


def test_the_steps_bandwidth_is_a_share_of_the_ceiling_of_the_card_it_ran_on() -> None:
    """An H100 lent for an H200 reads ~3 TB/s at best: its steps' share is of its own ceiling."""
    row = BenchRow(system="tts-jobs", precision="fp16", batch=2048, sentences=1024, audio_s=3586, wall_s=1.13,
                   x_realtime=3172.0, peak_gib=15.15, gpt_s=0.97, steps=343, step_ms=2.83, bandwidth_tbs=1.38,
                   slots=1024)
    on_h100 = BenchReport(rows=(row,), device="cuda: H100", weights="synthetic full", date="d", ceiling_tbs=3.0)

    assert "| 1.38 | 46 |" in format_table(on_h100) and "3.00 TB/s copy ceiling" in format_table(on_h100)
    assert json.loads(on_h100.to_json())["ceiling_tbs"] == 3.0
    assert "| 1.38 | 32 |" in format_table(replace(on_h100, ceiling_tbs=4.3))
