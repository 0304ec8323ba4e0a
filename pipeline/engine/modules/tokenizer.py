"""Upstream's text tokenizer (``asset/tokenizer/``) through the ``tokenizers`` library alone.

Upstream wraps the same Rust tokenizer in transformers' ``BertTokenizerFast``; the ids are the
file's, and decoding does what that wrapper does: WordPiece joins (``##`` pieces), then the
wrapper's own spacing clean-up where the tokenizer's config asks for it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.engine.modules.state import REDOWNLOAD
from pipeline.errors import ModelError

# transformers' ``clean_up_tokenization``, in its order.
_SPACING = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
            (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


class TextTokenizer:
    """Token ids of prompt texts, and the control tokens the engine needs by id."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer, decoders

        path = folder / "tokenizer.json"
        try:
            self.backend_tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust library raises its own exception type for any problem
            raise ModelError(f"{path}: not a readable tokenizer ({exc}); {REDOWNLOAD}") from exc
        if self.backend_tokenizer.decoder is None:  # BertTokenizerFast always decodes WordPiece
            self.backend_tokenizer.decoder = decoders.WordPiece(prefix="##")
        config = _config(folder)
        _normalize_as_configured(self.backend_tokenizer, config)
        self.clean_up_spacing = bool(config.get("clean_up_tokenization_spaces", False))
        self.spk_emb_ids = self._id_of("[spk_emb]", path)
        self.break_0_ids = self._id_of("[break_0]", path)
        self.eos_token = self._id_of("[Ebreak]", path)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.backend_tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, sequences: Sequence[Sequence[int]]) -> list[str]:
        texts = self.backend_tokenizer.decode_batch([list(s) for s in sequences], skip_special_tokens=False)
        return [_clean_up(t) for t in texts] if self.clean_up_spacing else texts

    def _id_of(self, token: str, path: Path) -> int:
        found = self.backend_tokenizer.token_to_id(token)
        if found is None:
            raise ModelError(f"{path}: has no {token} token, so it is not ChatTTS's tokenizer; "
                             f"{REDOWNLOAD}")
        return int(found)


def _config(folder: Path) -> dict:
    path = folder / "tokenizer_config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}: not readable ({exc}); {REDOWNLOAD}") from exc


def _normalize_as_configured(backend: Any, config: dict) -> None:
    """Lowercasing, accent stripping and CJK splitting as ``tokenizer_config.json`` says, over
    what ``tokenizer.json`` says: transformers' ``BertTokenizerFast`` (4.x and 5.x) does so."""
    from tokenizers import normalizers

    state = json.loads(backend.normalizer.__getstate__()) if backend.normalizer else {}
    if state.get("type") != "BertNormalizer":
        return
    backend.normalizer = normalizers.BertNormalizer(
        clean_text=state.get("clean_text", True),
        handle_chinese_chars=config.get("tokenize_chinese_chars", True),
        strip_accents=config.get("strip_accents"), lowercase=config.get("do_lower_case", True))


def _clean_up(text: str) -> str:
    for before, after in _SPACING:
        text = text.replace(before, after)
    return text
