"""Where a decode step's GPU time goes: torch.profiler over eager steps at full slots, the
Triton attention against masked SDPA, graph replay time, and a sweep of the engine's attention
kernel (block, warps, pipelined loads, program order).

    python -m pipeline.bench step-profile --rows 512 --attend 320 --precision fp16 [--kv-cache int8]
    python -m pipeline.bench step-profile --rows 1024 --attend 320 --sweep-only  # the word kernel alone
    python -m pipeline.bench step-profile --cpu-smoke     # tiny weights on the CPU: the flow only

Full-size SYNTHETIC weights (noise, never speech). On a CPU (``--cpu-smoke``) only the profile of
eager steps and the runner's step time are taken: the Triton kernels and CUDA graphs need a GPU.
"""

from __future__ import annotations

import argparse
import functools
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from pipeline.bench.gpu_timing import seconds_per_run
from pipeline.engine import EngineConfig, fused_sampling, load_engine, step_counters
from pipeline.engine import decode_step as ds
from pipeline.engine import gpt as gpt_module
from pipeline.engine.decode_step import StepKind, decode_step
from pipeline.engine.sampling import sample
from pipeline.engine.slots import SlotShape
from pipeline.engine.weights import write_synthetic_weights


def compare_attention_paths(engine, state, kind: StepKind) -> None:
    """One decode position through the Triton kernels and through masked SDPA (over the same
    cache, dequantized when it is int8): same hidden states? (Writing the same keys/values at
    the same positions twice changes nothing.)"""
    gpt, space = engine.parts.gpt, engine.step_runner.space
    b = kind.rows
    tokens = torch.randint(0, space.vocab - 1, (b, space.codebooks), device=state.hidden.device)
    x = space.embed(tokens).unsqueeze(1).to(gpt.dtype)
    outputs = {}
    for path in ("sdpa", "triton"):
        gpt_module.DECODE_ATTENTION = path
        outputs[path] = gpt.forward_slots(x, state.rope_at[:b], state.cache, state.write_at[:b],
                                          kind.attend)[:, 0].float()
    gpt_module.DECODE_ATTENTION = "triton"
    diff = (outputs["triton"] - outputs["sdpa"]).norm() / outputs["sdpa"].norm()
    print(f"triton vs masked SDPA decode attention: relative difference {diff.item():.2e}")


def fill_cache(state) -> None:
    """Random keys and values (and scales) in every slot, like a cache after real prefills."""
    cache = state.cache
    for tensor in (*cache.keys, *cache.values):
        if tensor.dtype == torch.int8:
            tensor.copy_(torch.randint(-127, 128, tensor.shape, device=tensor.device))
        else:
            tensor.normal_()
    for scales in (*cache.key_scales, *cache.value_scales):
        scales.uniform_(0.005, 0.02)


def sweep_attention_kernel(rows: int, attend: int, heads: int = 12, dim: int = 64) -> None:
    """The engine's attention kernel (the int8 cache read as words, ``word_attention.py``) alone,
    one layer, over slots of ``attend // 4 .. attend`` positions in a random order and longest
    first by slot (as the bench admits them), by block, blocks in flight (pipelined loads) and
    program order: µs, and TB/s over the bytes each slot's prefix holds against this card's
    copy ceiling."""
    from pipeline.bench.gpu_timing import copy_ceiling_tbs
    from pipeline.engine import kv_int8
    from pipeline.engine import word_attention as wa

    device = torch.device("cuda")
    shape = (rows, heads, attend, dim)
    query = torch.randn(rows, heads, dim, device=device, dtype=torch.float16)
    cache = (torch.randint(-127, 128, shape, device=device, dtype=torch.int8),
             torch.randint(-127, 128, shape, device=device, dtype=torch.int8),
             (torch.rand(shape[:3], device=device) / 64).to(kv_int8.SCALE_DTYPE),
             (torch.rand(shape[:3], device=device) / 64).to(kv_int8.SCALE_DTYPE))
    random = torch.randint(attend // 4, attend + 1, (rows,), device=device, dtype=torch.int32)
    layouts = {"random": random, "longest at slot 0": random.sort(descending=True).values}
    read = int(random.sum()) * heads * (2 * dim + 2 * cache[2].element_size())
    ceiling = copy_ceiling_tbs(device)
    print(f"word attention kernel sweep: {rows} slots, lengths {attend // 4}..{attend}, one layer, "
          f"{read / 1e6:.0f} MB; copy ceiling {ceiling:.2f} TB/s")
    print("| lengths | block | warps | stages | order | µs | TB/s | % of ceiling |")
    print("|---|---|---|---|---|---|---|---|")
    saved = wa.BLOCK_POSITIONS, wa.WARPS, wa.STAGES
    configs = [(b, 1, s, o) for b in (16, 32, 64) for s in (1, 2, 3) for o in (False, True)] + [(32, 2, 1, False)]
    for name, used in layouts.items():
        best = None
        for block, warps, stages, ordered in configs:
            wa.BLOCK_POSITIONS, wa.WARPS, wa.STAGES = block, warps, stages
            order = wa.longest_first(used) if ordered else None
            seconds = seconds_per_run(lambda u=used, o=order: wa.word_decode_attention(query, cache[0], cache[1], u,
                                                                                       cache[2], cache[3], order=o))
            tbs = read / seconds / 1e12
            print(f"| {name} | {block} | {warps} | {stages} | {'longest first' if ordered else 'by slot'} | "
                  f"{seconds * 1e6:.1f} | {tbs:.2f} | {tbs / ceiling * 100:.0f} |")
            best = min(best or (seconds, block, warps, stages, ordered), (seconds, block, warps, stages, ordered))
        print(f"BEST {name}: block {best[1]} warps {best[2]} stages {best[3]} longest first {best[4]}: "
              f"{best[0] * 1e6:.1f} µs")
    wa.BLOCK_POSITIONS, wa.WARPS, wa.STAGES = saved


def profile_waveform_chunk(engine, rows: int = 64, steps: int = 256) -> None:
    """Decoder + Vocos of one decode chunk (random hidden states): where its GPU time goes, with
    each ConvNeXt block's depthwise conv and LayerNorm as PyTorch ops and as one kernel."""
    import pipeline.engine.waveform_kernels as waveform_kernels

    waveform = engine.parts.waveform
    hiddens = [torch.randn(steps, engine.parts.gpt.hidden, device="cuda") for _ in range(rows)]
    saved = waveform_kernels.FUSED, waveform.graphs.enabled
    waveform.graphs.enabled = False  # eager: a graph captured one way would replay it the other way too
    for fused in (False, True):
        waveform_kernels.FUSED = fused
        for _ in range(2):
            waveform.decode_on_device(hiddens)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                waveform.decode_on_device(hiddens)
            torch.cuda.synchronize()
        averages = prof.key_averages()
        total = sum(a.self_device_time_total for a in averages) / 3 / 1e3
        print(f"Decoder+Vocos, {rows} rows x {steps} steps ({rows * steps / 46.875:.0f} s of audio), "
              f"{'one kernel' if fused else 'PyTorch ops'} for dwconv + LayerNorm: {total:.2f} ms of "
              "GPU time a chunk")
        print(averages.table(sort_by="cuda_time_total", row_limit=15, max_name_column_width=60))
    waveform_kernels.FUSED, waveform.graphs.enabled = saved


def sweep_waveform_kernel(engine, rows: int = 64, steps: int = 256) -> None:
    """A ConvNeXt block's depthwise conv + LayerNorm kernel (``waveform_kernels``) alone on a
    chunk of ``rows`` x ``steps`` GPT steps (two frames each), by frames per program and warps:
    µs and the bandwidth over its input read and output written once."""
    import pipeline.engine.waveform_kernels as wk

    block = engine.parts.waveform.vocos.backbone.convnext[0]
    x = torch.randn(rows, 2 * steps, block.dwconv.in_channels, device="cuda", dtype=torch.float16)
    frames = torch.full((rows,), 2 * steps, device="cuda", dtype=torch.int64)
    moved = 2 * x.numel() * x.element_size()
    saved = wk.BLOCK_FRAMES, wk.WARPS
    print(f"dwconv + LayerNorm kernel, {rows} rows x {2 * steps} frames x {x.shape[2]} channels:")
    print("| frames a program | warps | µs | TB/s |")
    print("|---|---|---|---|")
    for frames_each, warps in ((8, 16), (8, 8), (4, 4), (2, 2), (1, 1), (4, 8), (16, 16), (1, 4), (2, 4)):
        wk.BLOCK_FRAMES, wk.WARPS = frames_each, warps
        seconds = seconds_per_run(lambda: wk.dwconv_layer_norm(x, frames, block.dwconv, block.norm))
        print(f"| {frames_each} | {warps} | {seconds * 1e6:.1f} | {moved / seconds / 1e12:.2f} |")
    wk.BLOCK_FRAMES, wk.WARPS = saved


def time_step_parts(engine, state, kind: StepKind) -> None:
    """GPU time of each part of one decode step, every part captured alone as a CUDA graph (eager
    timing would measure launches): which part is worth making faster."""
    gpt, space, b = engine.parts.gpt, engine.step_runner.space, kind.rows
    step = state.row_step[:b]
    alive = ~state.done[:b]
    tokens = ds.sample_tokens(space, state, kind, step)
    sampling = state.sampling.first(b, kind.greedy, kind.penalised, kind.candidates)
    logits = space.logits(state.hidden[:b])
    after_logits = (state.window[:b], state.min_new[:b] <= step, space.eos, step, state.cells)
    parts = {
        "sampling: head logits": lambda: space.logits(state.hidden[:b]),
        "sampling after the logits, PyTorch ops": lambda: sample(logits, sampling, *after_logits),
        **{f"sampling after the logits, fused kernel, {warps} warps":
           functools.partial(fused_sampling.sample_fused, logits, sampling, *after_logits, warps=warps)
           for warps in (1, 2, 4, 8)},
        "sampling, whole": lambda: ds.sample_tokens(space, state, kind, step),
        "record + counters, PyTorch ops": lambda: (ds.record_tokens(state, b, step, tokens),
                                                   ds.advance_counters(state, b, step, alive, tokens, space.eos)),
        "record + counters, one kernel": lambda: step_counters.record_and_advance(state, b, tokens, space.eos),
        "GPT one position": lambda: ds.run_gpt_step(gpt, space, state, kind, tokens, alive),
        "whole step": lambda: ds.decode_step(gpt, space, state, kind),
    }
    print(f"decode step parts, each replayed alone from a CUDA graph ({b} rows x {kind.attend} "
          "positions):")
    print("| part | µs |")
    print("|---|---|")
    for name, run in parts.items():
        run()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        print(f"| {name} | {seconds_per_run(graph.replay) * 1e6:.1f} |")


def slots_with_a_full_cache(engine, rows: int, attend: int):
    """The engine's decode slots for ``rows`` rows at ``attend`` positions, every one filled."""
    emb = engine.parts.embeddings
    state = engine.step_runner.slots_for(SlotShape(rows, attend, 64, emb.codebooks, emb.vocab, True))
    state.write_at.fill_(attend - 2)
    fill_cache(state)
    return state


def profile_eager_steps(engine, state, kind: StepKind, steps: int, on_gpu: bool) -> None:
    """torch.profiler's kernel table of ``steps`` eager decode steps."""
    gpt, space = engine.parts.gpt, engine.step_runner.space
    for _ in range(3):
        decode_step(gpt, space, state, kind)
    synchronize(on_gpu)
    activity = ProfilerActivity.CUDA if on_gpu else ProfilerActivity.CPU
    with profile(activities=[activity]) as prof:
        for _ in range(steps):
            decode_step(gpt, space, state, kind)
        synchronize(on_gpu)
    sort = "cuda_time_total" if on_gpu else "cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=40, max_name_column_width=70))


def time_runner_steps(engine, kind: StepKind, rows: int, attend: int, precision: str,
                      on_gpu: bool) -> None:
    """The engine runner's step as a worker runs it (a replayed graph on a GPU), and the KV cache
    bandwidth it reaches."""
    runner = engine.step_runner
    runner.step(kind)  # capture
    runner.step(kind)
    synchronize(on_gpu)
    started = time.perf_counter()
    for _ in range(50):
        runner.step(kind)
    synchronize(on_gpu)
    per_step = (time.perf_counter() - started) / 50
    kv = rows * attend * engine.parts.gpt.kv_bytes_per_position()
    print(f"{'graph replay' if runner.use_graphs else 'eager step'}: {per_step * 1e3:.3f} ms/step at "
          f"{rows} rows x {attend} positions, KV cache {'int8' if engine.quantized_kv() else precision}; "
          f"KV read {kv / 1e9:.2f} GB -> {kv / per_step / 1e12:.2f} TB/s")


def synchronize(on_gpu: bool) -> None:
    if on_gpu:
        torch.cuda.synchronize()


def parse_args(argv: list[str] | None, prog: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--attend", type=int, default=320)
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--kv-cache", default=None, help="auto, int8 or model")
    parser.add_argument("--candidates", type=int, default=32,
                        help="tokens ranked per (row, codebook) when sampling (0: a full sort)")
    parser.add_argument("--sweep", action="store_true", help="also sweep the word attention kernel")
    parser.add_argument("--sweep-only", action="store_true",
                        help="only that sweep (no engine is loaded: the kernel alone on random tensors)")
    parser.add_argument("--waveform", action="store_true", help="also profile Decoder+Vocos")
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="tiny weights on the CPU, a few rows: the flow, no measure")
    args = parser.parse_args(argv)
    if args.cpu_smoke:
        args.rows, args.attend, args.steps, args.precision = 4, 64, 2, "fp32"
    return args


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench step-profile") -> int:
    args = parse_args(argv, prog)
    on_gpu = not args.cpu_smoke
    if args.sweep_only and on_gpu:
        sweep_attention_kernel(args.rows, args.attend)
        return 0
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        write_synthetic_weights(Path(tmp), "tiny" if args.cpu_smoke else "full", 0)
        engine = load_engine(EngineConfig(model_dir=Path(tmp), device="cuda" if on_gpu else "cpu",
                                          precision=args.precision, kv_cache=args.kv_cache))
        state = slots_with_a_full_cache(engine, args.rows, args.attend)
        kind = StepKind(rows=args.rows, attend=args.attend, greedy=False, penalised=True,
                        candidates=args.candidates)
        profile_eager_steps(engine, state, kind, args.steps, on_gpu)
        if on_gpu:
            compare_attention_paths(engine, state, kind)
            time_step_parts(engine, state, kind)
        time_runner_steps(engine, kind, args.rows, args.attend, args.precision, on_gpu)
        if args.sweep and on_gpu:
            sweep_attention_kernel(args.rows, args.attend)
        if args.waveform and on_gpu:
            sweep_waveform_kernel(engine)
            profile_waveform_chunk(engine)
    return 0
