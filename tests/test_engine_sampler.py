"""The decode loop's sampler on fixed logits: it must draw from the right distribution, checked
against transformers' top-p/top-k warpers and upstream ChatTTS's repetition penalty."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pipeline.engine.sampling import (
    RowSampling,
    apply_penalty,
    choose,
    noise_cells,
)

VOCAB = 12


def fixed_logits() -> torch.Tensor:
    return torch.tensor([2.0, 1.6, 1.5, 1.1, 0.9, 0.3, 0.0, -0.4, -0.8, -1.5, -2.0, -3.0])


def draw(logits: torch.Tensor, temperature: float, top_p: float, top_k: int, penalty: float,
         window: torch.Tensor, draws: int, candidates: int = 0) -> np.ndarray:
    """``draws`` samples of one (row, codebook) with these logits: one row per seed, as the loop
    draws them (temperature, penalty, then top-p/top-k and the hashed Gumbel noise), ranking
    the best ``candidates`` tokens only, or all of them (0)."""
    rows = draws
    sampling = RowSampling.build([temperature] * rows, [top_p] * rows, [top_k] * rows,
                                 [penalty] * rows, list(range(rows)), torch.device("cpu"))
    sampling = dataclasses.replace(sampling, candidates=candidates)
    scaled = logits.expand(rows, 1, VOCAB) / sampling.temperature
    scaled = apply_penalty(scaled, window.expand(rows, 1, -1).contiguous(), sampling.penalty)
    step = torch.full((rows,), 7, dtype=torch.int64)
    tokens = choose(scaled, sampling, step, noise_cells(1, VOCAB, torch.device("cpu")))[:, 0]
    return np.bincount(tokens.numpy(), minlength=VOCAB)


def reference_probabilities(logits: torch.Tensor, temperature: float, top_p: float, top_k: int,
                            penalty: float, window: torch.Tensor) -> np.ndarray:
    """The same distribution from the reference implementations: upstream ChatTTS's repetition
    penalty processor, then transformers' TopPLogitsWarper and TopKLogitsWarper."""
    from ChatTTS.model.processors import CustomRepetitionPenaltyLogitsProcessorRepeat
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    scores = (logits / temperature).unsqueeze(0)
    processor = CustomRepetitionPenaltyLogitsProcessorRepeat(penalty, VOCAB, 16)
    scores = processor(window.unsqueeze(0), scores.clone())
    scores = TopPLogitsWarper(top_p, min_tokens_to_keep=min(3, top_k))(None, scores)
    scores = TopKLogitsWarper(top_k)(None, scores)
    return torch.softmax(scores, -1)[0].double().numpy()


@pytest.mark.parametrize("temperature,top_p,top_k,penalty,candidates", [
    (1.0, 1.0, VOCAB, 1.0, 0),  # plain softmax
    (0.7, 0.7, 20, 1.0, 0),  # upstream's defaults: the nucleus decides
    (0.3, 0.9, 4, 1.0, 0),  # top-k decides
    (1.0, 0.95, 8, 1.3, 0),  # repetition penalty on a window of recent tokens
    # the same with only the best few tokens ranked (the GPU loop's default): the nucleus still
    # weighs them against the whole vocabulary
    (0.7, 0.7, 6, 1.0, 6),
    (0.3, 0.9, 4, 1.0, 5),
    (1.0, 0.95, 8, 1.3, 8),
])
def test_the_sampler_draws_from_the_reference_distribution(temperature: float, top_p: float,
                                                           top_k: int, penalty: float,
                                                           candidates: int) -> None:
    logits = fixed_logits()
    window = torch.tensor([0, 0, 0, 1, 3, 3] + [VOCAB] * 10)  # token 0 three times, 1 once, 3 twice
    draws = 40_000
    counts = draw(logits, temperature, top_p, top_k, penalty, window, draws, candidates)
    expected = reference_probabilities(logits, temperature, top_p, top_k, penalty,
                                       window[window < VOCAB])
    assert counts[expected == 0].sum() == 0, "a token outside the nucleus/top-k was drawn"
    kept = expected > 0
    # Pearson's chi-square over the kept tokens; 99.99th percentile for <= 11 degrees of freedom
    # is below 40, while a wrong temperature or a missing penalty gives thousands.
    chi2 = float((((counts[kept] - draws * expected[kept]) ** 2) / (draws * expected[kept])).sum())
    assert chi2 < 40.0, (chi2, counts, np.round(expected * draws))


def test_the_penalty_touches_only_window_tokens_by_penalty_to_the_count() -> None:
    """Bit for bit the dense rule (every token's logit times or over penalty**count), with
    repeated tokens, empty window entries and token 0 both in and out of the window."""
    generator = torch.Generator().manual_seed(1)
    rows, vocab = 64, 50
    logits = torch.randn(rows, 4, vocab, generator=generator) * 2
    window = torch.randint(0, 6, (rows, 4, 16), generator=generator)  # many repeats
    window[: rows // 2, :, 10:] = vocab  # empty entries
    window[rows // 4:, 0] = torch.where(window[rows // 4:, 0] == 0, 1, window[rows // 4:, 0])
    penalty = torch.rand(rows, 1, 1, generator=generator) + 0.8
    counts = torch.zeros(rows, 4, vocab + 1).scatter_add_(2, window, torch.ones(rows, 4, 16))
    alpha = torch.pow(penalty, counts[:, :, :vocab])
    dense = torch.where(logits < 0, logits * alpha, logits / alpha)
    assert torch.equal(apply_penalty(logits.clone(), window, penalty), dense)
    assert not torch.equal(dense, logits)


def test_ranking_the_best_candidates_draws_the_tokens_a_full_sort_draws() -> None:
    """The loop ranks only a bucket of best tokens (``candidate_count``): on ChatTTS-sized logits
    (4 codebooks x 626 tokens, a mix of settings per row) every draw equals the full sort's."""
    generator = torch.Generator().manual_seed(0)
    rows, vocab = 512, 626
    logits = torch.randn(rows, 4, vocab, generator=generator) * 3
    top_k = [int(k) for k in torch.randint(1, 33, (rows,), generator=generator)]
    top_p = [float(p) for p in torch.rand(rows, generator=generator) * 0.9 + 0.1]
    sampling = RowSampling.build([1.0] * rows, top_p, top_k, [1.0] * rows, list(range(rows)),
                                 torch.device("cpu"))
    assert sampling.candidates == 32
    step = torch.arange(rows)
    cells = noise_cells(4, vocab, torch.device("cpu"))
    ranked = choose(logits.clone(), sampling, step, cells)
    everything = choose(logits.clone(), dataclasses.replace(sampling, candidates=0), step, cells)
    assert torch.equal(ranked, everything)
    assert len(set(ranked.flatten().tolist())) > 100  # draws spread, not one argmax


def test_the_sampler_test_can_tell_a_wrong_distribution() -> None:
    """The same statistic rejects a sampler that ignores the temperature."""
    logits, window = fixed_logits(), torch.tensor([VOCAB] * 16)
    counts = draw(logits, 1.0, 1.0, VOCAB, 1.0, window, 40_000)
    wrong = reference_probabilities(logits, 0.7, 1.0, VOCAB, 1.0, torch.tensor([], dtype=torch.int64))
    chi2 = float((((counts - 40_000 * wrong) ** 2) / (40_000 * wrong)).sum())
    assert chi2 > 400.0
