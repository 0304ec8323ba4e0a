"""Where ChatTTS weights come from: a model directory, the Hugging Face cache, or synthetic ones.

The on-disk layout is upstream's (chattts 0.2.5)::

    DIR/asset/gpt/{config.json,model.safetensors}
    DIR/asset/{Embed,DVAE,Decoder,Vocos}.safetensors
    DIR/asset/tokenizer/{tokenizer.json,tokenizer_config.json,special_tokens_map.json}

Synthetic weights have the same architecture and layout with random values, plus a marker file
(``tts_jobs_synthetic.json``) that records their widths. They produce noise, never speech.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline.engine.modules.speaker import synthetic_speaker_stats
from pipeline.errors import ModelError

log = logging.getLogger(__name__)

HF_REPO_ID = "2Noise/ChatTTS"
SYNTHETIC_MARKER = "tts_jobs_synthetic.json"
NOISE_WARNING = "SYNTHETIC WEIGHTS: random values, this model produces NOISE, never speech."

# Upstream's file list, as named in ChatTTS/res/sha256_map.json (key -> relative path).
ASSET_FILES = {
    "sha256_asset_Decoder_safetensors": "asset/Decoder.safetensors",
    "sha256_asset_DVAE_safetensors": "asset/DVAE.safetensors",
    "sha256_asset_Embed_safetensors": "asset/Embed.safetensors",
    "sha256_asset_Vocos_safetensors": "asset/Vocos.safetensors",
    "sha256_asset_gpt_config_json": "asset/gpt/config.json",
    "sha256_asset_gpt_model_safetensors": "asset/gpt/model.safetensors",
    "sha256_asset_tokenizer_special_tokens_map_json": "asset/tokenizer/special_tokens_map.json",
    "sha256_asset_tokenizer_tokenizer_config_json": "asset/tokenizer/tokenizer_config.json",
    "sha256_asset_tokenizer_tokenizer_json": "asset/tokenizer/tokenizer.json",
}

# Widths of the synthetic sizes. "full" is upstream's architecture; "tiny" keeps every module
# but shrinks widths and depths so CPU tests run in seconds.
SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "gpt": {"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
                "num_hidden_layers": 20},
        "decoder": {"idim": 384, "odim": 384, "hidden": 512, "n_layer": 12, "bn_dim": 128},
        "dvae_encoder": {"idim": 512, "odim": 1024, "hidden": 256, "n_layer": 12, "bn_dim": 128},
        "dvae_decoder": {"idim": 512, "odim": 512, "hidden": 256, "n_layer": 12, "bn_dim": 128},
        "vq_dim": 1024,
        "vocos": {"dim": 512, "intermediate_dim": 1536, "num_layers": 8},
    },
    "tiny": {
        "gpt": {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                "num_hidden_layers": 2},
        "decoder": {"idim": 32, "odim": 32, "hidden": 32, "n_layer": 1, "bn_dim": 16},
        "dvae_encoder": {"idim": 32, "odim": 64, "hidden": 32, "n_layer": 1, "bn_dim": 16},
        "dvae_decoder": {"idim": 32, "odim": 32, "hidden": 32, "n_layer": 1, "bn_dim": 16},
        "vq_dim": 64,
        "vocos": {"dim": 32, "intermediate_dim": 64, "num_layers": 1},
    },
}
# How much the EOS token's output row of each audio head is scaled. Random weights choose EOS
# about once in 600 steps, so every sentence ran on toward its cap (2x its expected length); real
# speech ends near its expected length. Tiny weights end a sentence soon after its EOS floor,
# with some spread (CPU tests speak a third as much audio); full-size ones keep their noise as is.
EOS_GAIN: dict[str, float] = {"tiny": 1.5, "full": 1.0}


@dataclass(frozen=True)
class ModelFiles:
    """A located model directory and what kind of weights it holds."""

    root: Path  # the directory that contains asset/
    synthetic: bool
    size: str  # "full" for real weights; the synthetic size otherwise

    def asset(self, relative: str) -> Path:
        return self.root / relative


def build_config(size: str = "full") -> Any:
    """Upstream's ``ChatTTS.config.Config`` with the widths of ``size``.

    Upstream's config dataclasses share their default sub-objects between instances, so every
    sub-config is built anew here instead of being mutated.
    """
    from ChatTTS.config import config as c

    if size == "full":
        return c.Config()
    w = SIZES[size]
    hidden = w["gpt"]["hidden_size"]
    return c.Config(
        decoder=c.Decoder(**w["decoder"]),
        dvae=c.DVAE(
            encoder=c.Decoder(**w["dvae_encoder"]),
            decoder=c.Decoder(**w["dvae_decoder"]),
            vq=c.VQ(dim=w["vq_dim"]),
        ),
        gpt=c.GPT(**w["gpt"]),
        embed=c.Embed(hidden_size=hidden),
        vocos=c.Vocos(
            backbone=c.Backbone(init_args=c.BackboneInitArgs(**w["vocos"])),
            head=c.FourierHead(init_args=c.FourierHeadInitArgs(dim=w["vocos"]["dim"])),
        ),
        spk_stat=synthetic_speaker_stats(hidden),
    )


def write_synthetic_weights(target: Path, size: str = "tiny", seed: int = 0) -> ModelFiles:
    """Write ChatTTS weights with random values in the upstream layout under ``target``.

    The same ``seed`` and ``size`` always give the same files, so runs compare.
    """
    if size not in SIZES:
        raise ModelError(f"unknown synthetic size {size!r}: use one of {', '.join(SIZES)}")
    import torch

    torch.manual_seed(seed)
    config = build_config(size)
    asset = target / "asset"
    (asset / "gpt").mkdir(parents=True, exist_ok=True)
    _write_gpt(asset / "gpt", config)
    _write_modules(asset, config, EOS_GAIN[size])
    _write_tokenizer(asset / "tokenizer", config.gpt.num_text_tokens)
    marker = {"size": size, "seed": seed, "warning": NOISE_WARNING, "widths": SIZES[size]}
    (target / SYNTHETIC_MARKER).write_text(json.dumps(marker, indent=2))
    log.warning("%s Written to %s", NOISE_WARNING, target)
    return ModelFiles(root=target, synthetic=True, size=size)


def _write_gpt(folder: Path, config: Any) -> None:
    from transformers import LlamaConfig, LlamaModel

    g = config.gpt
    llama_config = LlamaConfig(
        hidden_size=g.hidden_size,
        intermediate_size=g.intermediate_size,
        num_attention_heads=g.num_attention_heads,
        num_key_value_heads=g.num_attention_heads,
        num_hidden_layers=g.num_hidden_layers,
        max_position_embeddings=g.max_position_embeddings,
        vocab_size=8,  # embed_tokens is deleted by upstream after loading
        use_cache=False,
    )
    model = LlamaModel(llama_config)
    model.save_pretrained(str(folder), safe_serialization=True)


def _write_modules(asset: Path, config: Any, eos_gain: float) -> None:
    from dataclasses import asdict as dc_asdict

    import torch
    from ChatTTS.model import DVAE, Embed
    from safetensors.torch import save_file
    from vocos import Vocos
    from vocos.pretrained import instantiate_class

    embed = Embed(config.embed.hidden_size, config.embed.num_audio_tokens,
                  config.embed.num_text_tokens, config.embed.num_vq)
    if eos_gain != 1.0:
        with torch.no_grad():  # the weight-normed heads: a row's gain is its logit's scale
            for head in embed.head_code:
                head.parametrizations.weight.original0[-1] *= eos_gain  # EOS: the vocabulary's last
    dvae = DVAE(decoder_config=dc_asdict(config.dvae.decoder),
                encoder_config=dc_asdict(config.dvae.encoder),
                vq_config=dc_asdict(config.dvae.vq), dim=config.dvae.decoder.idim)
    decoder = DVAE(decoder_config=dc_asdict(config.decoder), dim=config.decoder.idim)
    vocos = Vocos(
        feature_extractor=instantiate_class(args=(), init=dc_asdict(config.vocos.feature_extractor)),
        backbone=instantiate_class(args=(), init=dc_asdict(config.vocos.backbone)),
        head=instantiate_class(args=(), init=dc_asdict(config.vocos.head)),
    )
    for name, module in (("Embed", embed), ("DVAE", dvae), ("Decoder", decoder), ("Vocos", vocos)):
        state = {k: v.detach().contiguous().clone() for k, v in module.state_dict().items()}
        save_file(state, str(asset / f"{name}.safetensors"))


# Control tokens upstream's prompts and refine pass use. They sit at the end of the vocabulary
# because upstream drops every refined token with an id >= [break_0].
CONTROL_TOKENS = (
    ["[break_0]", "[break_1]", "[break_2]", "[break_3]", "[break_4]", "[break_5]", "[break_6]",
     "[break_7]", "[Sbreak]", "[Pbreak]", "[Ebreak]", "[Stts]", "[Ptts]", "[spk_emb]",
     "[empty_spk]", "[uv_break]", "[v_break]", "[lbreak]", "[laugh]", "[music]", "[pure]"]
    + [f"[speed_{i}]" for i in range(10)]
    + [f"[oral_{i}]" for i in range(10)]
    + [f"[laugh_{i}]" for i in range(3)]
)


def _write_tokenizer(folder: Path, vocab_size: int) -> None:
    """A BERT WordPiece tokenizer over single characters: ASCII, CJK and the control tokens."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece
    from transformers import BertTokenizerFast

    base = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = [chr(c) for c in range(0x21, 0x7F)]
    chars += [f"##{chr(c)}" for c in range(0x61, 0x7B)]  # word-internal letters
    room = vocab_size - len(base) - len(chars) - len(CONTROL_TOKENS)
    chars += [chr(0x4E00 + i) for i in range(room)]
    vocab = {tok: i for i, tok in enumerate(base + chars + CONTROL_TOKENS)}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, handle_chinese_chars=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    fast = BertTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                             cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    fast.add_special_tokens({"additional_special_tokens": CONTROL_TOKENS})
    folder.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(folder))
    special = folder / "special_tokens_map.json"
    if not special.is_file():  # transformers 5 does not write it; upstream's folder has it
        tokens = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                  "cls_token": "[CLS]", "mask_token": "[MASK]",
                  "additional_special_tokens": list(CONTROL_TOKENS)}
        special.write_text(json.dumps(tokens, ensure_ascii=False, indent=2))
    # Upstream's folder holds exactly these three files.
    for extra in ("vocab.txt", "added_tokens.json"):
        (folder / extra).unlink(missing_ok=True)


def hf_cache_snapshot(hf_home: Path | None = None) -> Path | None:
    """The newest snapshot of 2Noise/ChatTTS in the Hugging Face cache (under ``hf_home``, by
    default ~/.cache/huggingface), if there is one."""
    home = hf_home if hf_home is not None else Path.home() / ".cache" / "huggingface"
    snapshots = home / "hub" / "models--2Noise--ChatTTS" / "snapshots"
    if not snapshots.is_dir():
        return None
    candidates = [p for p in snapshots.iterdir() if (p / "asset").is_dir()]
    return max(candidates, key=lambda p: p.stat().st_mtime) if candidates else None


def locate_model(model_dir: Path | None, hf_home: Path | None = None) -> ModelFiles:
    """Find the weights: ``model_dir`` if given, else the Hugging Face cache (under ``hf_home``).

    Raises:
        ModelError: nothing usable there, with the commands that fix it.
    """
    root = model_dir if model_dir is not None else hf_cache_snapshot(hf_home)
    fix = ("write test weights with `tts-jobs model synthetic DIR` or fetch the real ones with "
           "`tts-jobs model download`, then pass --model-dir DIR or set TTS_JOBS_MODEL_DIR")
    if root is None:
        raise ModelError(f"no ChatTTS weights found in the Hugging Face cache: {fix}")
    root = Path(root)
    missing = [rel for rel in ASSET_FILES.values() if not (root / rel).is_file()]
    if missing:
        raise ModelError(f"{root}: not a ChatTTS model directory, missing {missing[0]}: {fix}")
    marker = root / SYNTHETIC_MARKER
    if marker.is_file():
        size = json.loads(marker.read_text()).get("size", "tiny")
        if size not in SIZES:
            raise ModelError(f"{marker}: unknown synthetic size {size!r}; rewrite the weights")
        return ModelFiles(root=root, synthetic=True, size=size)
    return ModelFiles(root=root, synthetic=False, size="full")


def download_weights(cache_dir: Path | None = None) -> Path:
    """Fetch the real 2Noise/ChatTTS weights from Hugging Face (needs internet).

    Returns the snapshot directory. Raises ModelError with a clear message when offline.
    """
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(repo_id=HF_REPO_ID,
                                 allow_patterns=["*.yaml", "*.json", "*.safetensors"],
                                 cache_dir=str(cache_dir) if cache_dir else None)
    except Exception as exc:  # the hub raises many types: offline, DNS, HTTP, auth
        raise ModelError(
            f"could not download {HF_REPO_ID} from Hugging Face ({type(exc).__name__}: {exc}); "
            "check the internet connection or copy the weights by hand and pass --model-dir"
        ) from exc
    return Path(path)


def describe(files: ModelFiles) -> dict[str, Any]:
    return {**asdict(files), "root": str(files.root)}
