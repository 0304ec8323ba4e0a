"""Admissions prefilled as the GPU's graphs would run them: rows padded to a power of two, width to
a multiple of 32, through the shared input and key/value buffers. The capture itself needs CUDA
(``tests/gpu``); here each shape runs eagerly on the buffers, exactly what a graph replays, and
every sentence must keep the tokens it has with eager prefills, whatever its slot, refill and
batch-mates (tiny synthetic weights, fp32, on the CPU)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import pipeline.engine.prefill as prefill
from pipeline.engine import EngineConfig, load_engine
from pipeline.engine.engine import Engine
from tests.test_engine_decode import codes_with_slots, requests_for


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path) -> Engine:
    return load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))


@pytest.mark.parametrize("greedy", [True, False])
def test_padded_prefills_through_the_shared_buffers_keep_every_sentences_tokens(
        engine: Engine, monkeypatch: Any, greedy: bool) -> None:
    requests = requests_for(engine, greedy=greedy)
    # then shorter prompts: columns an earlier, wider admission filled must not show through
    short = [replace(r, text=r.text[:4]) for r in requests]
    ways = [(requests, 2), (requests, 3), (requests, None), (short, 2), (short, None)]
    eager = [codes_with_slots(engine, batch, slots) for batch, slots in ways]
    graphs = engine._runner.prefills
    shapes: list[tuple[int, int]] = []
    monkeypatch.setattr(prefill, "PREFILL_GRAPHS", True)
    monkeypatch.setattr(graphs, "allowed", lambda device: True)
    monkeypatch.setattr(graphs, "_capture", lambda rows, width: shapes.append((rows, width)))

    for (batch, slots), want in zip(ways, eager, strict=True):
        got = codes_with_slots(engine, batch, slots)
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True)), f"{slots} slots"

    assert shapes, "no admission went through the graphs' path"
    assert all(rows & (rows - 1) == 0 and width % prefill.WIDTH_BUCKET == 0 for rows, width in shapes)
    assert any(rows == 4 for rows, _ in shapes)  # 3 newcomers padded with a row that is not there


WIDE = ["一个很长很长的句子，里面有许多许多的字。", "Short.", "The quick brown fox jumps."]


def uncaptured(engine: Engine, monkeypatch: Any) -> tuple[Any, Any]:
    """The engine's GPT and its prefill graphs, each shape run eagerly on the shared buffers and
    never captured (a capture needs CUDA): what a graph would replay."""
    graphs = engine._runner.prefills
    monkeypatch.setattr(graphs, "_capture", lambda rows, width: None)
    return engine._parts.gpt, graphs


def flat(cache: Any, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An admission's keys and values as one tensor, and its last hidden states."""
    return torch.cat([t.reshape(-1) for t in cache.keys + cache.values]), hidden


def padded_eagerly(gpt: Any, prompts: Any, index: torch.Tensor, shape: tuple[int, int]) -> tuple[Any, Any]:
    """``prefill.prefill_padded``'s keys and values, as its sink takes them layer by layer, kept
    in a cache (copies: the slots would take them), and its last hidden states."""
    from pipeline.engine.kv_cache import KVCache

    kept = KVCache(keys=[], values=[])

    def keep(layer: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        assert layer == len(kept.keys), "layers come in order, each once"
        kept.keys.append(keys.clone())
        kept.values.append(values.clone())

    hidden = prefill.prefill_padded(gpt, prompts, index, shape, keep)
    return kept, hidden


def prompts_of(engine: Engine, texts: list[str]) -> Any:
    from pipeline.engine.prompts import code_prompt_row, code_prompt_text, embed_prompts
    from pipeline.engine.voices import parse_voice

    parts = engine._parts
    voice = parse_voice(engine.sample_voice(0), parts.gpt.hidden, parts.embeddings.codebooks)
    ids = engine._tokenize([code_prompt_text(t, "[speed_5]", voice) for t in texts])
    return embed_prompts([code_prompt_row(i, voice) for i in ids], parts.embeddings, engine._spk_emb_id,
                         torch.device(engine.device))


@torch.inference_mode()
def test_a_padded_prefill_fills_each_rows_cache_and_hidden_state_as_the_eager_one(engine: Engine,
                                                                                  monkeypatch: Any) -> None:
    from pipeline.engine.prompts import PromptBatch

    gpt, graphs = uncaptured(engine, monkeypatch)
    wide = prompts_of(engine, WIDE)
    narrow = prompts_of(engine, ["好", "Hi.", "今天"])
    for prompts, rows in ((wide, [0, 2]), (wide, [0, 1, 2]), (narrow, [2, 0]), (narrow, [1])):
        index = torch.tensor(rows)
        lengths = prompts.lengths[index]
        width = int(lengths.max())
        batch = PromptBatch(embeds=prompts.embeds[index, -width:], valid=prompts.valid[index, -width:],
                            positions=prompts.positions[index, -width:], lengths=lengths)
        cache = gpt.new_cache(len(rows), width)
        want = prefill.run_positions(gpt, batch, cache)[:, -1]

        got_cache, got = graphs.prefill(prompts, index, width)

        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        for i, n in enumerate(lengths.tolist()):  # each row's real positions: the right end
            for ours, theirs in zip(got_cache.keys + got_cache.values, cache.keys + cache.values):
                torch.testing.assert_close(ours[i, :, -n:], theirs[i, :, -n:], atol=1e-5, rtol=1e-5)


def test_admissions_too_big_for_a_graph_run_in_pieces_a_graph_holds() -> None:
    assert prefill.padded_shape(3, 40) == (4, 64)
    assert prefill.padded_shape(128, 128) == (128, 128)
    assert prefill.padded_shape(129, 100) is None  # 256 x 128 positions: past POSITIONS
    assert prefill.padded_shape(1024, 60) is None  # a batch's first admission...
    assert prefill.rows_per_piece(1024, 60) == 256  # ...runs in 4 pieces of 256 x 64 positions
    assert prefill.padded_shape(256, 60) == (256, 64)
    assert prefill.rows_per_piece(3, 40) == 3 and prefill.rows_per_piece(129, 100) == 128
    assert prefill.rows_per_piece(5, 200) == 5 and prefill.rows_per_piece(500, 200) == 64  # 64 x 224
    assert prefill.rows_per_piece(2, prefill.POSITIONS + 1) == 2  # no graph holds one: one pass


@pytest.mark.parametrize("greedy", [True, False])
def test_an_admission_cut_into_pieces_keeps_every_sentences_tokens(engine: Engine, monkeypatch: Any,
                                                                   greedy: bool) -> None:
    import pipeline.engine.loop_runner as loop_runner

    requests = requests_for(engine, greedy=greedy)
    whole = codes_with_slots(engine, requests, None)
    pieces: list[int] = []
    real_piece = loop_runner.LoopRunner._prefill_piece

    def piece(runner: Any, prompts: Any, indices: list[int], *rest: Any) -> None:
        pieces.append(len(indices))
        real_piece(runner, prompts, indices, *rest)

    monkeypatch.setattr(loop_runner.LoopRunner, "_prefill_piece", piece)
    monkeypatch.setattr(prefill, "POSITIONS", 2 * prefill.WIDTH_BUCKET)  # two rows of <= 32 positions

    got = codes_with_slots(engine, requests, None)

    assert all(torch.equal(a, b) for a, b in zip(got, whole, strict=True))
    assert max(pieces) == 2 and sum(pieces) == len(requests)  # 7 sentences in 4 pieces


def test_graphs_given_back_for_an_out_of_memory_retry_stay_off(engine: Engine, monkeypatch: Any) -> None:
    graphs = engine._runner.prefills
    monkeypatch.setattr(prefill, "PREFILL_GRAPHS", True)
    monkeypatch.setattr(graphs, "allowed", lambda device: True)
    monkeypatch.setattr(graphs, "enabled", True)

    assert graphs.wanted(torch.device("cpu"))
    engine.release_device_memory()
    assert not graphs.wanted(torch.device("cpu"))


@torch.inference_mode()
def test_without_graphs_an_admission_padded_eagerly_gives_the_graphs_values_exactly(engine: Engine,
                                                                                   monkeypatch: Any) -> None:
    # a capped card, or one after an out-of-memory retry, must speak what the card with graphs does
    gpt, graphs = uncaptured(engine, monkeypatch)
    prompts = prompts_of(engine, WIDE)
    for rows in ([0, 2], [0, 1, 2], [1]):
        index = torch.tensor(rows)
        width = int(prompts.lengths[index].max())
        shape = prefill.padded_shape(len(rows), width)
        assert shape is not None

        graphed_cache, graphed = (c.clone() for c in flat(*graphs.prefill(prompts, index, width)))
        eager_cache, eager = flat(*padded_eagerly(gpt, prompts, index, shape))

        assert torch.equal(eager, graphed) and torch.equal(eager_cache, graphed_cache)


@pytest.mark.parametrize("greedy", [True, False])
def test_where_admissions_are_padded_without_graphs_every_sentence_keeps_its_tokens(
        engine: Engine, monkeypatch: Any, greedy: bool) -> None:
    import pipeline.engine.loop_runner as loop_runner

    requests = requests_for(engine, greedy=greedy)
    ways = [(requests, 2), (requests, 3), (requests, None)]
    eager = [codes_with_slots(engine, batch, slots) for batch, slots in ways]
    padded: list[tuple[int, int]] = []
    monkeypatch.setattr(loop_runner, "pads_admissions", lambda device: True)  # as on a GPU
    monkeypatch.setattr(engine._runner.prefills, "allowed", lambda device: False)  # as under a cap

    def recorded(gpt: Any, prompts: Any, index: Any, shape: tuple[int, int], sink: Any) -> Any:
        padded.append(shape)
        return prefill.prefill_padded(gpt, prompts, index, shape, sink)

    monkeypatch.setattr(loop_runner, "prefill_padded", recorded)
    for (batch, slots), want in zip(ways, eager, strict=True):
        got = codes_with_slots(engine, batch, slots)
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True)), f"{slots} slots"

    assert any(rows == 4 for rows, _ in padded)  # 3 newcomers padded with a row that is not there
    assert engine._runner.prefills.captured == 0
