"""Memory models for the planner: analytic (CPU, or before calibration) and measured (CUDA).

The planner's model is ``fixed + per_row_position * rows * positions`` where positions is the longest
row's prompt plus new tokens. On CUDA, ``calibrate_memory_model`` measures the peak of a few batches
and fits those two numbers, with a margin.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import torch

from pipeline.batching import MemoryModel
from pipeline.errors import OutOfDeviceMemory
from pipeline.types import SynthesisRequest, SynthesisResult

if TYPE_CHECKING:
    from pipeline.engine.gpt import FusedLlama
    from pipeline.engine.waveform import WaveformDecoder

log = logging.getLogger(__name__)

# The bytes each CUDA device may use in this process, where a cap was set (cap_device_memory).
_caps: dict[int, int] = {}

MARGIN = 1.25  # on the per-position slope: allocator rounding, fragmentation
SLACK_BYTES = 256 * 2**20
CALIBRATION_SHAPES = ((4, 32), (16, 96), (48, 48), (32, 160))  # (rows, new tokens)


class CalibrationTarget(Protocol):
    """What calibration runs and reads on the engine (``Engine``)."""

    @property
    def calibrated_memory_model(self) -> MemoryModel | None: ...

    def memory_model(self) -> MemoryModel: ...

    def prompt_tokens(self, text: str) -> int: ...

    def release_slots(self) -> None: ...

    def synthesize(self, requests: Sequence[SynthesisRequest]) -> list[SynthesisResult]: ...


def analytic_memory_model(gpt: FusedLlama, waveform: WaveformDecoder) -> MemoryModel:
    """KV cache + kept hidden states + scores per row-position; weights + decode chunk fixed."""
    item = torch.finfo(gpt.dtype).bits // 8
    per_position = (gpt.kv_bytes_per_position()  # K and V
                    + gpt.hidden * item  # hidden state kept for the decoder
                    + gpt.heads * 4 + 4 * 8 + item)  # attention scores, tokens, mask
    decode_chunk = waveform.row_steps_per_chunk * decode_bytes_per_step(waveform)
    weights = _parameter_bytes(gpt, waveform.decoder, waveform.vocos)
    return MemoryModel(fixed_bytes=int(weights + decode_chunk + SLACK_BYTES),
                       bytes_per_row_position=int(per_position * MARGIN))


def model_with_widest_slots(calibrated: MemoryModel, analytic: MemoryModel) -> MemoryModel:
    """The planner's model for a worker whose decode slots already hold its widest batch.

    Calibration fits its slope at small batches (<= 48 rows), where the Decoder + Vocos chunk and
    other per-row transients still grow with the rows: on an H200 it gives 141 kB per
    row-position where the int8 cache and the kept hidden states take ~34 kB. Planned with that
    slope, the longest sentences would be cut into batches of ~430-690 rows plus a remainder of
    a few dozen that runs at ~300x real time. Once the widest slots are allocated (and their
    graphs captured) the cache of every batch the planner may send is known to fit, so the
    cache's own bytes per position (the analytic slope, with its margin) are the right slope;
    the fixed part keeps the larger of the two measurements.
    """
    return MemoryModel(fixed_bytes=max(calibrated.fixed_bytes, analytic.fixed_bytes),
                       bytes_per_row_position=min(calibrated.bytes_per_row_position,
                                                  analytic.bytes_per_row_position))


def cap_device_memory(device: torch.device, gib: float) -> int:
    """Hold this process to ``gib`` GiB of ``device``, as a card of that size would (torch's
    per-process memory fraction: an allocation past it raises out of memory); returns the cap in
    bytes. The planner, the decode slots and the benchmark then size everything from it
    (:func:`device_budget_bytes`)."""
    if gib <= 0:
        raise ValueError(f"a memory cap must be positive, not {gib} GiB")
    index = _index(device)
    total = int(torch.cuda.get_device_properties(index).total_memory)
    cap = min(int(gib * 2**30), total)
    if cap < int(gib * 2**30):
        log.warning("memory cap %.1f GiB is more than cuda:%d has (%.1f GiB): the whole card is used",
                    gib, index, total / 2**30)
    torch.cuda.set_per_process_memory_fraction(cap / total, index)
    _caps[index] = cap
    return cap


def device_budget_bytes(device: torch.device) -> int | None:
    """The device memory this process may use: its cap where one was set, else the whole card;
    None on CPU (memory is not what limits a batch there)."""
    if device.type != "cuda":
        return None
    index = _index(device)
    return _caps.get(index) or int(torch.cuda.get_device_properties(index).total_memory)


def device_capped(device: torch.device) -> bool:
    """Whether this process runs ``device`` under a memory cap (:func:`cap_device_memory`)."""
    return device.type == "cuda" and _index(device) in _caps


def release_cached_memory(device: torch.device) -> None:
    """Give back what PyTorch keeps on ``device`` between batches: the caching allocator's free
    blocks, and cuBLAS's workspaces (one per stream that ran a GEMM, allocated blocks that
    ``empty_cache`` cannot free and that pin their segments). Call it with no CUDA graph alive:
    a captured GEMM holds its workspace's address."""
    gc.collect()  # tracebacks of the failed batch hold its tensors in reference cycles
    if device.type != "cuda" or not torch.cuda.is_initialized():
        return
    torch.cuda.synchronize(device)
    clear_workspaces = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear_workspaces is not None:
        clear_workspaces()
    torch.cuda.empty_cache()


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def decode_bytes_per_step(waveform: WaveformDecoder) -> int:
    """Peak transient bytes of Decoder + Vocos + ISTFT per GPT step (two mel frames) of one row."""
    item = torch.finfo(waveform.dtype).bits // 8
    block = waveform.decoder.decoder.decoder_block[0]
    decoder = (block.pwconv1.in_features * 3 + block.pwconv1.out_features * 2) * item
    vocos_block = waveform.vocos.backbone.convnext[0]
    vocos = (vocos_block.pwconv1.in_features * 3 + vocos_block.pwconv1.out_features * 2) * item
    istft = (waveform.n_fft + 2) * 4 * 4  # spectrum, complex spectrum, frames, folded output
    return 2 * max(decoder, vocos, istft) + 2 * (waveform.n_fft + 2) * 4


def _parameter_bytes(*modules: torch.nn.Module) -> int:
    total = 0
    for module in modules:
        tensors = list(module.parameters()) + list(module.buffers())
        total += sum(t.numel() * t.element_size() for t in tensors)
    return total + 200 * 2**20  # embeddings, heads, DVAE encoder: a generous allowance


def calibrate_memory_model(engine: CalibrationTarget, voice: str) -> MemoryModel:
    """Measure peak CUDA memory of a few batch shapes and fit fixed + slope * rows * positions."""
    points = _measured_peaks(engine, voice, CALIBRATION_SHAPES)
    slope, intercept = _fit_line(points)
    analytic = engine.memory_model() if engine.calibrated_memory_model is None else None
    floor = analytic.bytes_per_row_position / MARGIN if analytic else 0
    model = MemoryModel(fixed_bytes=int(intercept + SLACK_BYTES),
                        bytes_per_row_position=int(max(slope, floor) * MARGIN))
    log.info("calibration points %s -> %s", points, model)
    return model


def calibrate_capped_memory_model(engine: CalibrationTarget, voice: str, planner_bytes: int) -> MemoryModel:
    """The planner's model for a device under a cap, measured where the planner will plan.

    The small shapes of ``calibrate_memory_model`` (<= 5,120 row-steps) all lie below one
    Decoder + Vocos chunk (16,384 row-steps), so their slope carries the chunk's transients per
    row (~141 kB per row-position on an H200 against ~34 kB of int8 cache): planned with it, a
    24 GiB cap peaked at 5.3 GiB. Here two batches sized to 30 % and 55 % of what the planner
    may fill (by the analytic model) are measured, and the line through
    them is the model: at a large cap their chunk is full, so the slope is the marginal cost of
    a row-position; at a small cap it is not, and neither are the planner's batches there.
    An admission's prefill is a fixed cost, not one per row: it runs in pieces of at most
    ``prefill.POSITIONS`` prompt positions (``prefill.rows_per_piece``), each layer's keys and
    values going straight into the slots, so the points' line carries it in its fixed part.
    The slope's floor is the slots' own bytes (the analytic slope without its margin)."""
    analytic = engine.memory_model()
    prompt = engine.prompt_tokens(CALIBRATION_TEXT)
    shapes = capped_calibration_shapes(analytic, planner_bytes, prompt, CAPPED_SHARES + FALLBACK_SHARES)
    points = two_points(shapes, lambda shape: _measured_peak(engine, voice, shape))
    if len(points) < 2:
        log.warning("capped calibration measured %d of %d shapes; planning with the small shapes",
                    len(points), len(shapes))
        return calibrate_memory_model(engine, voice)
    model = model_through(points, analytic.bytes_per_row_position / MARGIN)
    log.info("capped calibration points %s -> %s", points, model)
    return model


def two_points(shapes: Sequence[tuple[int, int]],
               measure: Callable[[tuple[int, int]], tuple[float, float] | None]) -> list[tuple[float, float]]:
    """The first two shapes in ``shapes`` that ``measure`` could run (None: out of memory). The
    analytic model leaves out what the device holds beyond weights and slots, so on a small
    card a planned share may not fit; a smaller one is then measured in its place."""
    points: list[tuple[float, float]] = []
    for shape in shapes:
        point = measure(shape)
        if point is not None:
            points.append(point)
        if len(points) == 2:
            break
    return points


CALIBRATION_TEXT = "校准" * 10
# Shares of what the planner may fill beyond the fixed part, by the analytic model; the fallback
# shares are measured in turn where one of them ran out of memory
CAPPED_SHARES = (0.3, 0.55)
FALLBACK_SHARES = (0.15, 0.08)
PLANNER_SHARE = 0.85  # of a capped device's memory the planner fills (TTS_JOBS_MEMORY_FRACTION)
CAPPED_STEPS = 64  # steps of each capped calibration row: its prompt is ~30 % of its positions
CAPPED_MARGIN = 1.05  # on the measured slope: the points are where the planner plans


def capped_calibration_shapes(analytic: MemoryModel, planner_bytes: int, prompt: int,
                              shares: Sequence[float] = CAPPED_SHARES,
                              steps: int = CAPPED_STEPS) -> list[tuple[int, int]]:
    """(rows, steps) of the batches a capped device is calibrated with: each at one of
    ``shares`` of ``planner_bytes`` beyond ``analytic``'s fixed part, by that model."""
    free = max(planner_bytes - analytic.fixed_bytes, 0)
    per_row = analytic.bytes_per_row_position * (prompt + steps)
    return [(max(8, int(share * free / per_row)), steps) for share in shares]


def model_through(points: list[tuple[float, float]], floor: float) -> MemoryModel:
    """A line above every measured (row-positions, peak bytes) point: the fitted slope (never
    below ``floor`` bytes per row-position) with ``CAPPED_MARGIN``, through the highest point
    above it, plus ``SLACK_BYTES``."""
    slope, _ = _fit_line(points)
    slope = max(slope, floor) * CAPPED_MARGIN
    fixed = max(peak - slope * x for x, peak in points)
    return MemoryModel(fixed_bytes=int(fixed + SLACK_BYTES), bytes_per_row_position=int(slope))


def _measured_peaks(engine: CalibrationTarget, voice: str,
                    shapes: Sequence[tuple[int, int]]) -> list[tuple[float, float]]:
    """(rows * (prompt + steps), peak allocated bytes) of one batch per (rows, steps) shape."""
    points = [_measured_peak(engine, voice, shape, skip_out_of_memory=False) for shape in shapes]
    return [point for point in points if point is not None]


def _measured_peak(engine: CalibrationTarget, voice: str, shape: tuple[int, int],
                   skip_out_of_memory: bool = True) -> tuple[float, float] | None:
    """(rows * (prompt + steps), peak allocated bytes) of one batch of ``shape`` (rows, steps);
    None where it ran out of memory and ``skip_out_of_memory``."""
    rows, steps = shape
    prompt = engine.prompt_tokens(CALIBRATION_TEXT)
    requests = [SynthesisRequest(text=CALIBRATION_TEXT, voice=voice, seed=i, max_new_tokens=steps,
                                 min_new_tokens=steps) for i in range(rows)]
    engine.release_slots()  # each point measures slots of its own shape
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    try:
        engine.synthesize(requests)
    except OutOfDeviceMemory:
        if not skip_out_of_memory:
            raise
        log.warning("calibration batch of %d rows x %d steps ran out of memory; left out", rows, steps)
        engine.release_slots()
        release_cached_memory(torch.device("cuda", torch.cuda.current_device()))
        return None
    torch.cuda.synchronize()
    return rows * (prompt + steps), float(torch.cuda.max_memory_allocated())


def _fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return slope, my - slope * mx
