"""Upstream rows of the benchmark: ChatTTS 0.2.5 as its README runs a batch.

``Chat.infer(batch, split_text=False, skip_refine_text=True)`` in fp32 with one voice, batches in
book order, each forced to its largest L and credited only sum(L). A row stops after the batch that
passes its time budget: x real time is a rate, and the row says how many sentences it used. Under
a memory cap (``--memory-gib``) a batch size that runs out of memory is a row of its own ("out of
memory", 0x): the comparison is with the largest batch that fits.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.bench.harness import peak_gib, release_device_memory, sync_device
from pipeline.bench.report import BenchRow
from pipeline.types import GPT_STEPS_PER_SECOND


def run_upstream_row(model_dir: Path, device: Any, texts: list[str], steps: list[int], batch: int,
                     voice: str, max_seconds: float) -> BenchRow:
    """Upstream at ``batch`` sentences per ``infer`` call, for about ``max_seconds``."""
    import torch

    from pipeline.engine.loading import load_upstream_chat
    from pipeline.engine.weights import locate_model

    started = time.perf_counter()
    chat = load_upstream_chat(locate_model(model_dir), device)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    _upstream_batch(chat, voice, texts[:2], steps[:2])
    warmup_s = time.perf_counter() - started
    sync_device(device, reset_peak=True)
    started = time.perf_counter()
    count, out_of_memory = 0, False
    try:
        while count < len(texts) and time.perf_counter() - started < max_seconds:
            end = min(count + batch, len(texts))
            _upstream_batch(chat, voice, texts[count:end], steps[count:end])
            count = end
        sync_device(device)
    except torch.cuda.OutOfMemoryError:  # under a memory cap: this batch size does not fit
        out_of_memory = True
    wall = time.perf_counter() - started
    peak = None if out_of_memory else peak_gib(device)
    del chat
    release_device_memory()
    if out_of_memory:
        return BenchRow(system="upstream", precision="fp32", batch=batch, sentences=count, audio_s=0.0,
                        wall_s=wall, x_realtime=0.0, peak_gib=None, load_s=load_s, warmup_s=warmup_s,
                        note="out of memory")
    audio = sum(steps[:count]) / GPT_STEPS_PER_SECOND
    return BenchRow(system="upstream", precision="fp32", batch=batch, sentences=count,
                    audio_s=audio, wall_s=wall, x_realtime=audio / wall, peak_gib=peak,
                    load_s=load_s, warmup_s=warmup_s, batches=math.ceil(count / batch),
                    note="" if count == len(texts) else f"first {count} sentences (time cap)")


def _upstream_batch(chat: Any, speaker: str, texts: Sequence[str], steps: Sequence[int]) -> None:
    import ChatTTS

    longest = max(steps)
    params = ChatTTS.Chat.InferCodeParams(spk_emb=speaker, max_new_token=longest,
                                          min_new_token=longest, show_tqdm=False)
    wavs = chat.infer(list(texts), split_text=False, skip_refine_text=True,
                      params_infer_code=params)
    if len(wavs) != len(texts):
        raise RuntimeError(f"upstream returned {len(wavs)} waveforms for {len(texts)} texts")
