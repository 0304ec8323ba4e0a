"""Sampling cases drawn by the fused kernel (pipeline/engine/fused_sampling.py) and by the
PyTorch ops of ``sampling.sample`` (what ``decode_step.sample_tokens`` runs) alike, for the interpreter test and tests/gpu."""

from __future__ import annotations

import torch

from pipeline.engine import fused_sampling
from pipeline.engine.sampling import RowSampling, noise_cells, sample


def disagreements(device: str, vocab: int, rows: int = 6, codebooks: int = 2) -> tuple[int, int]:
    """(tokens the two ways drew differently, tokens drawn) over greedy, sampled and penalised
    pools whose rows each have their own temperature, top-p, top-k, penalty, seed and step, with
    EOS the likeliest token and masked for some rows, the best tokens in the window, and three
    near-equal leaders (where top-p keeps one, the rule of at least three keeps them all); half
    the pools hand the kernel half-precision logits (the engine's), the ops their float32 values."""
    generator = torch.Generator().manual_seed(3)
    eos, cells = vocab - 1, noise_cells(codebooks, vocab, torch.device(device))
    differing = total = 0
    pools = [([1, 2, 3, 5, 20, 64], [1.05, 1.0, 1.3, 1.05, 2.0, 1.1]),  # sampled, penalised
             ([20, 3, 64, 7, 20, 2], [1.0] * rows),  # sampled
             ([1] * rows, [1.2] * rows),  # greedy, penalised
             ([100, 20, 200, 3, 1, 150], [1.1] * rows)]  # a top-k past the buckets: the whole vocabulary ranked
    for number, (top_k, penalty) in enumerate(pools):
        for scale, leaders in ((1.0, False), (4.0, False), (1.0, True)):
            logits = torch.randn(rows, codebooks, vocab, generator=generator) * scale
            logits[:, :, eos] = logits.max() + 1.0
            if leaders:  # three near-equal best tokens: the first alone passes a small top-p
                logits[:, :, 5:8] = logits.max() + torch.tensor([1.5, 1.45, 1.4])
            window = torch.randint(0, vocab + 1, (rows, codebooks, 16), generator=generator)
            window[:, :, :3] = logits.argsort(-1, descending=True)[:, :, 1:4]
            sampling = RowSampling.build([0.3, 0.7, 1.0, 0.5, 0.3, 1.2][:rows],
                                         [0.7, 0.9, 1.0, 0.5, 0.3, 0.8][:rows], top_k[:rows],
                                         penalty[:rows], [11 * i + number for i in range(rows)],
                                         torch.device(device))
            step = torch.randint(0, 500, (rows,), generator=generator).to(device)
            allow = torch.tensor([i % 2 == 0 for i in range(rows)], device=device)
            logits, window = logits.to(device), window.to(device)
            half = number % 2 == 1  # the engine's: the heads' half-precision logits, read as float32
            logits = logits.half().float() if half else logits
            want = sample(logits.clone(), sampling, window, allow, eos, step, cells)
            got = fused_sampling.sample_fused(logits.half() if half else logits.clone(), sampling, window,
                                              allow, eos, step, cells)
            differing += int((want != got).sum())
            total += want.numel()
    return differing, total
