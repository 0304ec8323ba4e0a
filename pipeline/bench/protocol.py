"""The benchmark's protocol (shared/PERFORMANCE.md): what to run, and the sentences every system reads.

Workload: N mixed-length sentences (10-60 characters, Chinese and English) in book order, each
forced to L = round(chars * 4.7) GPT steps (min = max = L). Useful audio = sum(L) / 46.875 s.
Random weights never choose EOS sensibly, so forcing the length is what makes systems comparable.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.types import SynthesisRequest

STEPS_PER_CHAR = 4.7
_HANZI = ("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能"
          "下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量"
          "都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重"
          "新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已"
          "通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将")
_WORDS = (
    "the", "of", "and", "to", "in", "is", "was", "he", "that", "it", "his", "her", "you", "as",
    "had", "with", "for", "she", "not", "at", "but", "be", "my", "on", "have", "him", "which", "by",
    "this", "all", "they", "so", "were", "from", "one", "said", "me", "when", "there", "what", "we",
    "no", "if", "would", "an", "could", "been", "more", "out", "them", "some", "then", "into",
    "time", "very", "about", "like", "man", "little", "only", "other", "over", "before", "two",
    "now", "down", "upon", "old", "such", "house", "great", "night", "never", "long", "made",
    "know", "first", "good", "way", "came", "eyes", "own", "hand", "say", "much", "life", "went",
    "must", "might", "again", "well", "way", "door", "looked", "room"
)


@dataclass(frozen=True)
class BenchOptions:
    """What to benchmark. Exactly one of ``model_dir`` / ``synthetic``."""

    model_dir: Path | None = None
    synthetic: str | None = None  # "tiny" | "full": written to a temp dir, seed ``seed``
    device: str = "auto"
    precisions: tuple[str, ...] = ()  # () = fp32,fp16,bf16,int8 on CUDA; fp32,int8 on CPU
    sentences: int | None = None  # None = 1024 on CUDA, 48 on CPU
    seed: int = 0
    batch: int = 256  # tts-jobs: most rows in one planned batch (the pool the slots draw from)
    slots: int | None = None  # tts-jobs: rows decoded at once; None = the whole batch
    scaling_batches: tuple[int | tuple[int, int], ...] | None = None  # more tts-jobs rows at
    # these batch sizes (or (batch, slots) pairs: a pool bigger than the slots), in
    # the first reduced precision; None = 512 on CUDA, none on CPU
    upstream_batches: tuple[int, ...] | None = None  # None = 4,64,256,512 on CUDA; 4,16 on CPU
    upstream: bool = True
    fidelity_sentences: int = 16
    memory_fraction: float = 0.5  # planner cap as a share of the device's memory
    repeat: int = 1  # timed runs of each tts-jobs row on one loaded engine (a row each)
    memory_gib: float | None = None  # a hard cap on the process's GPU memory, for both systems (a
    # smaller card); the planner then plans for 0.85 of it, as a worker does
    upstream_seconds: float = 75.0  # stop an upstream row after the batch that passes this
    max_steps: int | None = None  # cap on L, for quick smoke runs only (not the protocol)
    profile_dir: Path | None = None  # cProfile of each timed region here (where the host time goes)
    trace_dir: Path | None = None  # a torch.profiler trace of each timed region here instead


CAPPED_PLANNER_SHARE = 0.85  # a worker's default TTS_JOBS_MEMORY_FRACTION


def planner_share(opts: BenchOptions) -> float:
    """The share of the device's memory budget the planner plans batches for."""
    return CAPPED_PLANNER_SHARE if opts.memory_gib else opts.memory_fraction


def make_workload(count: int, seed: int) -> list[str]:
    """``count`` sentences of 10-60 characters in book order: Chinese, English and mixed."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        target = rng.randint(10, 60)
        kind = rng.random()
        if kind < 0.5:
            texts.append(_chinese(rng, target))
        elif kind < 0.9:
            texts.append(_english(rng, target))
        else:
            half = target // 2
            texts.append(_chinese(rng, half) + " " + _english(rng, target - half - 1))
    return texts


def _chinese(rng: random.Random, length: int) -> str:
    chars = [rng.choice(_HANZI) for _ in range(length - 1)]
    return "".join(chars) + "。"


def _english(rng: random.Random, length: int) -> str:
    words: list[str] = []
    while len(" ".join(words)) < length:
        words.append(rng.choice(_WORDS))
    text = " ".join(words)[: length - 1]
    if text.endswith(" "):
        text = text[:-1] + "s"  # keep the exact length
    return text[0].upper() + text[1:] + "."


def forced_steps(text: str) -> int:
    return max(1, round(len(text) * STEPS_PER_CHAR))


def forced_requests(texts: Sequence[str], steps: Sequence[int], voice: str,
                    seed: int) -> list[SynthesisRequest]:
    """One request per text, forced to exactly its ``steps`` GPT steps, seeds ``seed``, ``seed + 1``, ..."""
    return [SynthesisRequest(text=t, voice=voice, seed=seed + i, max_new_tokens=n, min_new_tokens=n)
            for i, (t, n) in enumerate(zip(texts, steps))]


def spread(total: int, count: int) -> list[int]:
    """``count`` indices spread evenly over ``range(total)``, first and last included."""
    count = min(count, total)
    return sorted({round(i * (total - 1) / max(count - 1, 1)) for i in range(count)})
