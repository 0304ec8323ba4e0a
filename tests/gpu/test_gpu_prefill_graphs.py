"""On a GPU, admissions prefilled from CUDA graphs (the default; ``TTS_JOBS_PREFILL_GRAPHS=0``:
eager) fill each row's cache and last hidden state as the eager prefill does (fp16: within
rounding of the different shapes), a replay as the shape's first (eager) run and as an eager prefill
at the padded shape (what a card without graphs runs), and nothing is captured once the engine gave
its memory back for an out-of-memory retry (full-size synthetic weights)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import pipeline.engine.prefill as prefill
from pipeline.bench.graph_check import synthetic_engine
from pipeline.engine.prompts import PromptBatch
from tests.test_prefill_graphs import flat, padded_eagerly, prompts_of

pytestmark = pytest.mark.gpu

TEXTS = ["一个很长很长的句子，里面有许多许多的字。", "Short.", "The quick brown fox jumps over it.",
         "今天天气很好", "A little longer line, with a comma.", "好"]


@torch.inference_mode()
def test_graphed_prefills_fill_the_eager_cache_and_hidden_states(tmp_path: Path, monkeypatch: Any) -> None:
    engine = synthetic_engine(tmp_path, "full", "cuda", "fp16")
    gpt, graphs = engine._parts.gpt, engine._runner.prefills
    monkeypatch.setattr(prefill, "PREFILL_GRAPHS", True)
    assert graphs.wanted(torch.device("cuda"))
    prompts = prompts_of(engine, TEXTS)
    for rows in ([0, 2, 4], [1, 3], [5], [0, 2, 4]):
        index = torch.tensor(rows, device="cuda")
        lengths = prompts.lengths[index]
        width = int(lengths.max())
        batch = PromptBatch(embeds=prompts.embeds[index, -width:], valid=prompts.valid[index, -width:],
                            positions=prompts.positions[index, -width:], lengths=lengths)
        cache = gpt.new_cache(len(rows), width)
        want = prefill.run_positions(gpt, batch, cache)[:, -1].float()

        first_cache, first = (c.clone() for c in flat(*graphs.prefill(prompts, index, width)))
        again_cache, again = flat(*graphs.prefill(prompts, index, width))  # replayed

        shape = prefill.padded_shape(len(rows), width)
        padded_cache, padded = flat(*padded_eagerly(gpt, prompts, index, shape))  # no graphs

        torch.testing.assert_close(again, first, atol=1e-3, rtol=1e-3)  # the same kernels, replayed
        torch.testing.assert_close(again_cache, first_cache, atol=1e-3, rtol=1e-3)
        torch.testing.assert_close(first.float(), want, atol=3e-2, rtol=3e-2)
        # a card without graphs (capped, retried) pads as they do: the same values, bit for bit
        assert torch.equal(padded, again) and torch.equal(padded_cache, again_cache)
    assert graphs.captured >= 3

    engine.release_device_memory()
    assert not graphs.wanted(torch.device("cuda"))
