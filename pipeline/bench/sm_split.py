"""A step's layers with the GPU's SMs split between its two kinds of work, for ``bench halves
--green N``: the GEMMs on a green context of N SMs (``torch.cuda.green_contexts``, CUDA 12.4+),
the word attention on the SMs that context does not hold (``attention_on_sms.py``'s persistent
programs, told which), and two half-pools interleaved so that one half's attention runs beside
the other half's GEMMs.

Why: at ~1,000 rows a step's GEMMs are compute-bound (0.85 of a 3.2-ms step's layers on an H100)
and its attention bandwidth-bound, and the attention reads nearly as fast from half the SMs (2.39
against 2.25 ms on 66 of an H100's 132). A step whose GEMMs ran on the SMs the attention can spare
could hide most of them. cuBLAS's SM carveout did not keep the GEMMs off the attention's SMs
(``halves --leave``: no change); a green context holds its kernels to its own SMs by construction.
Measuring only (eagerly, or as one CUDA graph with ``--green-graphed``: green streams capture).
The answer on an H100 (2026-12-07, graphed): no. Held to N SMs the GEMMs slow as 1/N (1.50 ms on
64 against 0.84 on all 132); the halves interleaved took 3.33 ms at 64 with the attention kept
off the green SMs by a table, and 3.30-4.09 with it on a green context of its own (``--disjoint``:
48, 64, 72 or 80 SMs to the GEMMs) against one stream's 3.29. So the engine's step stays one
stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pipeline.bench.attention_on_sms import layer_attention
from pipeline.bench.linears import layer_gemms
from pipeline.engine.triton_import import compiled, tl, triton

if triton is not None:  # pragma: no cover - Triton code
    from pipeline.bench.attention_on_sms import _this_sm

    @triton.jit
    def _record_sm(out_ptr, ASM: tl.constexpr):
        """The SM each program ran on, at its index."""
        tl.store(out_ptr + tl.program_id(0), _this_sm(ASM))


def green_stream(sms: int, device: torch.device) -> tuple[Any, torch.cuda.Stream, torch.Tensor]:
    """A green context of ``sms`` SMs (kept: its stream lives as long as it does; its SMs are
    whole groups, 8 on Hopper, which ones the probe says), a stream of it, and the SMs its
    kernels land on (int32 [SMs of the device], 1 where they do), found by launching 8 programs
    an SM on that stream and reading back where each ran."""
    from torch.cuda.green_contexts import GreenContext

    context = GreenContext.create(sms, device.index or 0)
    made = context.Stream()
    stream = torch.cuda.Stream(stream_id=made.stream_id, device_index=made.device_index,
                               device_type=made.device_type)
    count = torch.cuda.get_device_properties(device).multi_processor_count
    landed = torch.full((8 * count,), -1, dtype=torch.int32, device=device)
    try:
        with torch.cuda.stream(stream):
            _record_sm[(landed.numel(),)](landed, ASM=compiled())
        stream.synchronize()
    except RuntimeError:  # a driver-API launch may want the stream's own context current
        context.set_context()
        try:
            with torch.cuda.stream(stream):
                _record_sm[(landed.numel(),)](landed, ASM=compiled())
            stream.synchronize()
        finally:
            context.pop_context()
    held = torch.zeros(count, dtype=torch.int32, device=device)
    held[landed.long()] = 1
    return context, stream, held


def half_layer(rows: int, attend: int, weights: dict[str, torch.Tensor], heads: int, dim: int,
               device: torch.device, allowed: torch.Tensor | None) -> tuple[Callable[[], None], ...]:
    """One layer of a pool of ``rows`` slots as three steps that can go to different streams:
    its qkv GEMM, its attention (kept to the SMs ``allowed``; the engine's kernel where None: its
    stream's green context keeps it to its SMs), the o, gate_up and down GEMMs."""
    qkv, rest = layer_gemms(rows, weights, device)
    attend_once = layer_attention(rows, attend, heads, dim, device, allowed)
    attended: list[torch.Tensor | None] = [None]

    def attention() -> None:
        attended[0] = attend_once()

    return qkv, attention, lambda: rest(attended[0])


def interleaved(halves: list[tuple[Callable[[], None], ...]], layers: int, gemm_stream: torch.cuda.Stream,
                attention_stream: torch.cuda.Stream) -> Callable[[], None]:
    """The halves' layers with every GEMM on ``gemm_stream`` and every attention on
    ``attention_stream``, each step after the one before it in its own half: the GEMM stream
    queues a half's rest of layer l, then its qkv of layer l + 1, so one half's attention always
    has the other half's GEMMs beside it."""

    def after(stream: torch.cuda.Stream, step: Callable[[], None], *waits: torch.cuda.Event | None) -> torch.cuda.Event:
        for event in waits:
            if event is not None:
                stream.wait_event(event)
        with torch.cuda.stream(stream):
            step()
        done = torch.cuda.Event()
        done.record(stream)
        return done

    def run() -> None:
        current = torch.cuda.current_stream()
        gemm_stream.wait_stream(current)
        attention_stream.wait_stream(current)
        queued = [after(gemm_stream, qkv) for qkv, _, _ in halves]
        for layer in range(layers):
            attended = [after(attention_stream, attention, queued[h]) for h, (_, attention, _) in enumerate(halves)]
            for h, (qkv, _, rest) in enumerate(halves):
                after(gemm_stream, rest, attended[h])
                if layer + 1 < layers:
                    queued[h] = after(gemm_stream, qkv)
        current.wait_stream(gemm_stream)
        current.wait_stream(attention_stream)

    return run


def on_stream(stream: torch.cuda.Stream, step: Callable[[], Any], layers: int, kept: Any) -> Callable[[], None]:
    """``step`` run ``layers`` times on ``stream`` (a green context's), after the current stream's
    work and before its next; ``kept``, the green contexts, live as long as the way does."""

    def run(_kept: Any = kept) -> None:
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(layers):
                step()
        torch.cuda.current_stream().wait_stream(stream)

    return run


def green_ways(sms: int, rows: int, attend: int, weights: dict[str, torch.Tensor], layers: int, heads: int,
               dim: int, device: torch.device) -> list[tuple[str, Callable[[], None]]]:
    """The ways with the GEMMs on a green context of ``sms`` SMs: its GEMMs alone there, and the
    two halves interleaved with their attention on the SMs the context does not hold."""
    context, stream, held = green_stream(sms, device)
    free = 1 - held
    halves = [half_layer(rows // 2, attend, weights, heads, dim, device, free) for _ in range(2)]
    qkv, rest = layer_gemms(rows, weights, device)

    both = interleaved(halves, layers, stream, torch.cuda.Stream())
    gemms_alone = on_stream(stream, lambda: (qkv(), rest(None)), layers, context)

    def halves_at_once(_kept: Any = context) -> None:  # the context lives as long as its ways
        both()

    spare = int(free.sum())
    return [(f"its GEMMs alone, on a green context of {sms} SMs", gemms_alone),
            (f"two halves interleaved, GEMMs on {sms} SMs (green), attention on the other {spare}", halves_at_once)]


def disjoint_streams(sms: int, device: torch.device) -> tuple[Any, torch.cuda.ExternalStream, torch.cuda.ExternalStream, int, int]:
    """Two green contexts that share no SM, made by the driver's own split (``cuda.bindings``):
    ``sms`` SMs (rounded up to the card's group) and the rest; a stream of each, their SM counts,
    and what must stay alive while they are used. ``green_stream``'s one context leaves its
    complement to the primary context, whose kernels may still land on the green SMs: a kernel
    kept off them by a table still has programs waiting for a place there."""
    from cuda.bindings import driver as cu

    def ok(result: tuple) -> Any:
        error, *out = result
        if error != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"the driver's green-context split failed: {error}")
        return out[0] if len(out) == 1 else out

    torch.cuda.init()
    ok(cu.cuInit(0))
    card = ok(cu.cuDeviceGet(device.index or 0))
    whole = ok(cu.cuDeviceGetDevResource(card, cu.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM))
    groups, _, remaining = ok(cu.cuDevSmResourceSplitByCount(1, whole, 0, sms))
    kept, streams = [], []
    for part in (groups[0], remaining):
        desc = ok(cu.cuDevResourceGenerateDesc([part], 1))
        context = ok(cu.cuGreenCtxCreate(desc, card, cu.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM))
        made = ok(cu.cuGreenCtxStreamCreate(context, cu.CUstream_flags.CU_STREAM_NON_BLOCKING, 0))
        kept += [context, made]
        streams.append(torch.cuda.ExternalStream(int(made), device=device))
    return kept, streams[0], streams[1], groups[0].sm.smCount, remaining.sm.smCount


def disjoint_ways(sms: int, rows: int, attend: int, weights: dict[str, torch.Tensor], layers: int, heads: int,
                  dim: int, device: torch.device) -> list[tuple[str, Callable[[], None]]]:
    """The ways with the GEMMs on a green context of ``sms`` SMs and the attention (the engine's
    kernel) on a green context of all the others: each alone there, and the two halves interleaved."""
    kept, gemm_stream, attention_stream, gemm_sms, attention_sms = disjoint_streams(sms, device)
    halves = [half_layer(rows // 2, attend, weights, heads, dim, device, None) for _ in range(2)]
    qkv, rest = layer_gemms(rows, weights, device)
    whole = layer_attention(rows, attend, heads, dim, device)

    both = interleaved(halves, layers, gemm_stream, attention_stream)
    return [(f"its GEMMs alone, on a green context of {gemm_sms} SMs",
             on_stream(gemm_stream, lambda: (qkv(), rest(None)), layers, kept)),
            (f"its attention alone, on a green context of the other {attention_sms}",
             on_stream(attention_stream, whole, layers, kept)),
            (f"two halves interleaved, GEMMs on {gemm_sms} SMs, attention on the other {attention_sms} (both green)",
             lambda _kept=kept: both())]
