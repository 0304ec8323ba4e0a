"""Upstream's text-refinement pass (it adds [uv_break], [laugh], ... tags to a text), batched: the
GPT samples text tokens from a text prompt, each text with a seed of its own."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from pipeline.engine.device_errors import device_errors
from pipeline.engine.generation import RowLimits, TokenSpace, generate
from pipeline.engine.prompts import embed_prompts, refine_prompt_text, text_prompt_row
from pipeline.engine.sampling import RowSampling

if TYPE_CHECKING:
    from pipeline.engine.model_parts import ModelParts


@dataclass(frozen=True)
class RefineParams:
    """Upstream's ``RefineTextParams`` defaults."""

    prompt: str = ""
    temperature: float = 0.7
    top_p: float = 0.7
    top_k: int = 20
    repetition_penalty: float = 1.0
    max_new_tokens: int = 384


@torch.inference_mode()
def refine_texts(parts: ModelParts, tokens: Callable[[list[str]], list[list[int]]], texts: Sequence[str],
                 params: RefineParams, seed: int) -> list[str]:
    """``texts`` refined; each sampled with a seed derived from ``seed`` and the text itself, so a
    text is refined the same way in any batch."""
    if not texts:
        return []
    emb, tok = parts.embeddings, parts.tokenizer
    device = emb.code_table.device
    rows = [text_prompt_row(ids) for ids in tokens([refine_prompt_text(t, params.prompt) for t in texts])]
    prompts = embed_prompts(rows, emb, int(tok.spk_emb_ids), device)
    space = TokenSpace(codebooks=1, vocab=emb.text_vocab, eos=int(tok.eos_token),
                       embed=lambda t: emb.text_embed(t[:, 0]), logits=emb.text_logits)
    n = len(texts)
    sampling = RowSampling.build(
        [params.temperature] * n, [params.top_p] * n, [params.top_k] * n,
        [params.repetition_penalty] * n,
        [seed ^ zlib.crc32(t.encode()) for t in texts], device)
    limits = RowLimits(min_new=[0] * n, max_new=[params.max_new_tokens] * n)
    with device_errors(n):
        out = generate(parts.gpt, space, prompts, limits, sampling, keep_hiddens=False)
    break_0 = int(tok.break_0_ids)
    kept = [[int(i) for i in ids[:, 0] if int(i) < break_0] for ids in out.tokens]
    return tok.decode(kept)
