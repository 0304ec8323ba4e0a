"""Prompts: upstream's prompt strings, tokenised per row, embedded and left-padded into a batch.

Upstream builds ``[Stts][spk_emb]{prompt}{text}[Ptts]`` (or ``[empty_spk]`` with an audio prompt,
whose DVAE codes follow the text), embeds text tokens with ``emb_text`` and audio codes with the sum
of the four ``emb_code`` tables, and overwrites the ``[spk_emb]`` position with the normalised
speaker vector. This module does the same, but per row: each row brings its own voice.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import pipeline.engine.layer_kernels as layer_kernels
from pipeline.engine.host_lists import pinned_to_device, to_device
from pipeline.engine.voices import AudioPrompt, SpeakerEmbedding, Voice


class TokenEmbeddings(nn.Module):
    """Upstream's ``Embed`` in the layout a batched loop wants.

    The four code embedding tables become one [Q*V, C] table (one gather per step instead of four),
    and the weight-normalised heads are materialised once (upstream re-derives them under
    ``parametrize.cached()`` every step).
    """

    def __init__(self, embed: nn.Module) -> None:
        super().__init__()
        self.codebooks = int(embed.num_vq)
        self.vocab = int(embed.num_audio_tokens)
        with torch.no_grad():
            self.code_table = nn.Parameter(
                torch.cat([e.weight.detach() for e in embed.emb_code], 0).clone())
            self.code_head = nn.Parameter(
                torch.cat([h.weight.detach() for h in embed.head_code], 0).clone())
            self.text_table = nn.Parameter(embed.emb_text.weight.detach().clone())
            self.text_head = nn.Parameter(embed.head_text.weight.detach().clone())
        offsets = torch.arange(self.codebooks, dtype=torch.int64) * self.vocab
        self.register_buffer("offsets", offsets.to(self.code_table.device), persistent=False)

    @property
    def text_vocab(self) -> int:
        return self.text_table.shape[0]

    def code_embed(self, codes: torch.Tensor) -> torch.Tensor:
        """[..., Q] audio codes -> [..., C]: the sum of the Q codebook embeddings. On the GPU in
        half precision one kernel (``layer_kernels.code_embed``: a decode step's 5 ops were ~23 us
        of an H100's step at 1,024 rows)."""
        if codes.is_cuda and self.code_table.dtype in (torch.float16, torch.bfloat16) and layer_kernels.available():
            return layer_kernels.code_embed(codes, self.code_table, self.vocab)
        summed = F.embedding(codes + self.offsets, self.code_table).float().sum(-2)
        return summed.to(self.code_table.dtype)  # summed in float32, as upstream does

    def text_embed(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.text_table)

    def code_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[B, C] -> float32 [B, Q, V]."""
        return self.code_head_logits(hidden).float()

    def code_head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[B, C] -> [B, Q, V] in the heads' dtype."""
        return F.linear(hidden, self.code_head).view(-1, self.codebooks, self.vocab)

    def text_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[B, C] -> float32 [B, 1, V_text]."""
        return F.linear(hidden, self.text_head).float().unsqueeze(1)


@dataclass(frozen=True)
class PromptRow:
    """One row's prompt: its text token ids, then (audio-prompt voices) the sample's DVAE codes,
    embedded as audio; and the float16 speaker vector whose normalised form replaces
    ``[spk_emb]`` (None for ``[empty_spk]`` prompts). Kept as plain host data: a batch of 1024
    rows is laid out in a few numpy passes, not 1024 small tensors (the GPU waits meanwhile)."""

    text_ids: list[int]
    codes: np.ndarray | None  # int64 [T, Q]
    speaker: np.ndarray | None  # float16 [C], as the voice stores it

    def __len__(self) -> int:
        return len(self.text_ids) + (0 if self.codes is None else self.codes.shape[0])


@dataclass(frozen=True)
class PromptBatch:
    """Rows left-padded to a common length P, embedded."""

    embeds: torch.Tensor  # [B, P, C] compute dtype
    valid: torch.Tensor  # bool [B, P]: False on left padding
    positions: torch.Tensor  # int64 [B, P]: RoPE positions, 0 at each row's first real token
    lengths: torch.Tensor  # int64 [B]: real prompt tokens per row

    @property
    def rows(self) -> int:
        return self.embeds.shape[0]

    @property
    def width(self) -> int:
        return self.embeds.shape[1]


def code_prompt_text(text: str, prompt: str, voice: Voice) -> str:
    """Upstream's ``Speaker.decorate_code_prompts`` for one sentence (no transcript of the sample)."""
    for tag in ("[Stts]", "[spk_emb]", "[empty_spk]"):
        text = text.replace(tag, "")
    speaker_tag = "[spk_emb]" if isinstance(voice, SpeakerEmbedding) else "[empty_spk]"
    return f"[Stts]{speaker_tag}{prompt}{text.strip()}[Ptts]"


def refine_prompt_text(text: str, prompt: str = "") -> str:
    """Upstream's ``Speaker.decorate_text_prompts``."""
    return f"[Sbreak]{text}[Pbreak]{prompt}"


def code_prompt_row(token_ids: list[int], voice: Voice) -> PromptRow:
    if isinstance(voice, AudioPrompt):
        return PromptRow(text_ids=token_ids, codes=voice.codes.astype(np.int64).T, speaker=None)
    return PromptRow(text_ids=token_ids, codes=None, speaker=voice.vector)


def text_prompt_row(token_ids: list[int]) -> PromptRow:
    return PromptRow(text_ids=token_ids, codes=None, speaker=None)


def embed_prompts(rows: list[PromptRow], embeddings: TokenEmbeddings, spk_emb_id: int,
                  device: torch.device) -> PromptBatch:
    """Left-pad ``rows`` to one width and embed them."""
    lengths = np.array([len(row) for row in rows])
    text_lengths = np.array([len(row.text_ids) for row in rows])
    width = int(lengths.max())
    first = width - lengths  # each row's first real position
    column = np.arange(width)
    valid = column >= first[:, None]
    is_text = valid & (column < (first + text_lengths)[:, None])
    text_ids = np.zeros((len(rows), width), dtype=np.int64)
    text_ids[is_text] = np.fromiter(itertools.chain.from_iterable(row.text_ids for row in rows),
                                    dtype=np.int64, count=int(text_lengths.sum()))
    text_ids, valid, is_text = (pinned_to_device(torch.from_numpy(a), device)
                                for a in (text_ids, valid, is_text))
    embeds = embeddings.text_embed(text_ids)
    if any(row.codes is not None for row in rows):
        codes = embeddings.code_embed(pinned_to_device(_code_ids(rows, first, width), device))
        embeds = torch.where(is_text.unsqueeze(-1), embeds, codes)
    embeds = _apply_speakers(embeds, rows, is_text & (text_ids == spk_emb_id), device)
    positions = valid.long().cumsum(-1) - 1
    positions = positions.masked_fill(~valid, 1)  # as upstream; padding is never attended to
    return PromptBatch(embeds=embeds, valid=valid, positions=positions,
                       lengths=to_device(lengths.tolist(), device))


def _code_ids(rows: list[PromptRow], first: np.ndarray, width: int) -> torch.Tensor:
    """Audio-prompt codes [B, width, Q] where they follow each row's text (0 elsewhere)."""
    codebooks = next(row.codes.shape[1] for row in rows if row.codes is not None)
    ids = torch.zeros(len(rows), width, codebooks, dtype=torch.int64)
    for i, row in enumerate(rows):
        if row.codes is not None:
            ids[i, int(first[i]) + len(row.text_ids):] = torch.from_numpy(row.codes)
    return ids


def _apply_speakers(embeds: torch.Tensor, rows: list[PromptRow], at_tag: torch.Tensor,
                    device: torch.device) -> torch.Tensor:
    """The normalised speaker vector at each row's ``[spk_emb]``; a batch holds a voice or two,
    so each distinct vector is normalised once."""
    distinct: dict[int, int] = {}  # id(vector) -> index into ``vectors``
    vectors: list[np.ndarray] = []
    which = []
    for row in rows:
        if row.speaker is None:
            which.append(-1)
            continue
        if id(row.speaker) not in distinct:
            distinct[id(row.speaker)] = len(vectors)
            vectors.append(row.speaker)
        which.append(distinct[id(row.speaker)])
    if not vectors:
        return embeds
    # Upstream normalises the float16 vector in float16, then promotes it.
    table = torch.stack([F.normalize(torch.from_numpy(v.copy()), p=2.0, dim=0, eps=1e-12).float()
                         for v in vectors])
    index = to_device([max(w, 0) for w in which], device)
    has = to_device([w >= 0 for w in which], device, torch.bool).view(-1, 1)
    speaker = pinned_to_device(table.to(embeds.dtype), device)[index].unsqueeze(1)
    return torch.where((at_tag & has).unsqueeze(-1), speaker, embeds)
