"""A batch's prompts tokenized in threads (offset-free batch calls) give the ids the tokenizer gives
each text alone, in order."""

from __future__ import annotations

from typing import Any

from pipeline.bench.protocol import make_workload
from pipeline.engine.prompt_tokens import TOKENIZE_CHUNK, PromptTokens


def test_many_prompts_tokenized_in_threads_keep_the_tokenizers_ids_and_order(tiny_engine: Any) -> None:
    tokenizer = tiny_engine._parts.tokenizer
    one_by_one = tokenizer.backend_tokenizer
    texts = [f"[Stts][spk_emb][speed_5]{t}[Ptts]" for t in make_workload(3 * TOKENIZE_CHUNK + 5, seed=7)]
    texts += texts[:3]  # met twice in one call: remembered once, returned twice

    got = PromptTokens(tokenizer)(texts)

    assert got == [one_by_one.encode(t, add_special_tokens=False).ids for t in texts]
