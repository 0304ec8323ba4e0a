"""Prompts: upstream's prompt strings, tokenised per row, embedded and left-padded into a batch.

Upstream builds ``[Stts][spk_emb]{prompt}{text}[Ptts]`` (or ``[empty_spk]`` with an audio prompt,
whose DVAE codes follow the text), embeds text tokens with ``emb_text`` and audio codes with the sum
of the four ``emb_code`` tables, and overwrites the ``[spk_emb]`` position with the normalised
speaker vector. This module does the same, but per row: each row brings its own voice.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

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
        """[..., Q] audio codes -> [..., C]: the sum of the Q codebook embeddings."""
        summed = F.embedding(codes + self.offsets, self.code_table).float().sum(-2)
        return summed.to(self.code_table.dtype)  # summed in float32, as upstream does

    def text_embed(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.text_table)

    def code_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[B, C] -> float32 [B, Q, V]."""
        return F.linear(hidden, self.code_head).float().view(-1, self.codebooks, self.vocab)

    def text_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[B, C] -> float32 [B, 1, V_text]."""
        return F.linear(hidden, self.text_head).float().unsqueeze(1)


@dataclass(frozen=True)
class PromptRow:
    """One row's prompt: token ids [n, Q] (text tokens repeated over Q), which are text, and the
    speaker vector that replaces ``[spk_emb]`` (None for [empty_spk] prompts)."""

    ids: torch.Tensor  # int64 [n, Q]
    is_text: torch.Tensor  # bool [n]
    speaker: torch.Tensor | None  # float32 [C], L2-normalised


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


def code_prompt_row(token_ids: list[int], voice: Voice, codebooks: int) -> PromptRow:
    ids = torch.tensor(token_ids, dtype=torch.int64).unsqueeze(1).expand(-1, codebooks)
    is_text = torch.ones(len(token_ids), dtype=torch.bool)
    speaker = None
    if isinstance(voice, AudioPrompt):
        codes = torch.from_numpy(voice.codes.astype("int64")).t()  # [T, Q]
        ids = torch.cat([ids, codes], 0)
        is_text = torch.cat([is_text, torch.zeros(codes.shape[0], dtype=torch.bool)])
    else:
        # Upstream normalises the float16 vector in float16, then promotes it.
        vector = torch.from_numpy(voice.vector.copy())
        speaker = F.normalize(vector, p=2.0, dim=0, eps=1e-12).float()
    return PromptRow(ids=ids.contiguous(), is_text=is_text, speaker=speaker)


def text_prompt_row(token_ids: list[int], codebooks: int) -> PromptRow:
    ids = torch.tensor(token_ids, dtype=torch.int64).unsqueeze(1).expand(-1, codebooks)
    return PromptRow(ids=ids.contiguous(), is_text=torch.ones(len(token_ids), dtype=torch.bool),
                     speaker=None)


def embed_prompts(rows: list[PromptRow], embeddings: TokenEmbeddings, spk_emb_id: int,
                  device: torch.device) -> PromptBatch:
    """Left-pad ``rows`` to one width and embed them."""
    width = max(row.ids.shape[0] for row in rows)
    codebooks = rows[0].ids.shape[1]
    ids = torch.zeros(len(rows), width, codebooks, dtype=torch.int64)
    is_text = torch.zeros(len(rows), width, dtype=torch.bool)
    valid = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, row in enumerate(rows):
        n = row.ids.shape[0]
        ids[i, width - n:] = row.ids
        is_text[i, width - n:] = row.is_text
        valid[i, width - n:] = True
    ids, is_text, valid = (pinned_to_device(t, device) for t in (ids, is_text, valid))
    text = embeddings.text_embed(torch.where(is_text, ids[..., 0], 0))
    codes = embeddings.code_embed(torch.where(is_text.unsqueeze(-1), 0, ids))
    embeds = torch.where(is_text.unsqueeze(-1), text, codes)
    embeds = _apply_speakers(embeds, rows, ids[..., 0] == spk_emb_id, device)
    positions = valid.long().cumsum(-1) - 1
    positions = positions.masked_fill(~valid, 1)  # as upstream; padding is never attended to
    lengths = to_device([row.ids.shape[0] for row in rows], device)
    return PromptBatch(embeds=embeds, valid=valid, positions=positions, lengths=lengths)


def _apply_speakers(embeds: torch.Tensor, rows: list[PromptRow], at_tag: torch.Tensor,
                    device: torch.device) -> torch.Tensor:
    speakers = [row.speaker for row in rows]
    if all(s is None for s in speakers):
        return embeds
    width = embeds.shape[-1]
    stacked = torch.stack([s if s is not None else torch.zeros(width) for s in speakers])
    has = to_device([s is not None for s in speakers], device, torch.bool).view(-1, 1)
    replace = (at_tag & has).unsqueeze(-1)
    speaker = pinned_to_device(stacked.to(embeds.dtype), device).unsqueeze(1)
    return torch.where(replace, speaker, embeds)
