"""The engine reads ChatTTS's files into its own modules; upstream's ``Chat``, loaded from the same
tiny synthetic weights (noise, not speech), is the reference for every part it takes."""

from __future__ import annotations

import json
import shutil
import wave
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from pipeline.engine.gpt import FusedLlama
from pipeline.engine.layer_ops import additive_mask
from pipeline.engine.loading import load_upstream_chat
from pipeline.engine.modules.decoder import load_decoder
from pipeline.engine.modules.embed import load_embed
from pipeline.engine.modules.llama import load_llama
from pipeline.engine.modules.release import DECODER_DILATION, RELEASE_SHA256, SPEAKER_STATS, VOCOS_HOP
from pipeline.engine.modules.speaker import speaker_stats
from pipeline.engine.modules.tokenizer import TextTokenizer
from pipeline.engine.modules.vocos import load_vocos
from pipeline.engine.prompts import TokenEmbeddings
from pipeline.engine.waveform import WaveformDecoder
from pipeline.engine.weights import locate_model
from pipeline.errors import ModelError

CPU = torch.device("cpu")
TEXTS = ["[Stts][spk_emb][speed_5]今天天气很好[uv_break]我们去公园。[Ptts]", "The Quick, brown FOX!",
         "café naïve résumé", "混合 mixed 文本 with 42 digits", "  spaces\tand\nlines  ", "emoji 🙂 ☃",
         "[break_3][laugh_0][Ebreak]", "don't it's we're", ""]


@pytest.fixture(scope="module")
def upstream(tiny_model_dir: Path) -> Any:
    return load_upstream_chat(locate_model(tiny_model_dir), CPU)


def asset(root: Path, name: str) -> Path:
    return root / "asset" / name


def same_tensors(ours: torch.nn.Module, theirs: dict[str, torch.Tensor]) -> None:
    mine = ours.state_dict()
    assert set(mine) == set(theirs)
    for key, value in theirs.items():
        assert torch.equal(mine[key], value), key


# ------------------------------------------------------------------------------ the GPT
def test_the_gpt_holds_upstreams_tensors_and_computes_its_hidden_states(tiny_model_dir: Path,
                                                                        upstream: Any) -> None:
    hf = upstream.gpt.gpt
    llama = load_llama(asset(tiny_model_dir, "gpt"), CPU)
    same_tensors(llama, hf.state_dict())  # upstream deleted embed_tokens; so does the engine
    ours, theirs = FusedLlama(llama), FusedLlama(hf)
    for key, value in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[key], value), key
    assert torch.equal(ours.rope_cos, theirs.rope_cos) and torch.equal(ours.rope_sin, theirs.rope_sin)

    x = torch.randn(2, 7, ours.hidden, generator=torch.Generator().manual_seed(0))
    causal = torch.ones(7, 7, dtype=torch.bool).tril().expand(2, 1, 7, 7)
    with torch.no_grad():
        rope = ours.rope(torch.arange(7).expand(2, 7))
        hidden = ours(x, rope, additive_mask(causal, x.dtype), ours.new_cache(2, 7))
        expected = hf(inputs_embeds=x, use_cache=False).last_hidden_state
    torch.testing.assert_close(hidden, expected, rtol=1e-5, atol=1e-5)


def test_the_embeddings_and_heads_are_upstreams(tiny_model_dir: Path, upstream: Any) -> None:
    embed = load_embed(asset(tiny_model_dir, "Embed.safetensors"), CPU)
    same_tensors(embed, upstream.embed.state_dict())
    with torch.no_grad():
        ours, theirs = TokenEmbeddings(embed), TokenEmbeddings(upstream.embed)
        for key, value in theirs.state_dict().items():  # the weight-normalised heads to the bit
            assert torch.equal(ours.state_dict()[key], value), key
        hidden = torch.randn(3, embed.emb_text.weight.shape[1], generator=torch.Generator().manual_seed(2))
        expected = torch.stack([head(hidden) for head in upstream.embed.head_code], 1)  # upstream's logits
        torch.testing.assert_close(ours.code_logits(hidden), expected.float(), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(ours.text_logits(hidden)[:, 0], upstream.embed.head_text(hidden))


# ------------------------------------------------------------------------------ the waveform
def test_decoder_and_vocos_hold_upstreams_tensors_and_give_its_waveform(tiny_model_dir: Path,
                                                                         upstream: Any) -> None:
    decoder = load_decoder(asset(tiny_model_dir, "Decoder.safetensors"), CPU)
    vocos = load_vocos(asset(tiny_model_dir, "Vocos.safetensors"), CPU)
    same_tensors(decoder, upstream.decoder.state_dict())
    same_tensors(vocos, {k: v for k, v in upstream.vocos.state_dict().items()
                         if not k.startswith("feature_extractor.")})
    assert vocos.head.istft.hop_length == upstream.vocos.head.istft.hop_length == VOCOS_HOP
    assert upstream.decoder.decoder.decoder_block[0].dwconv.dilation == (DECODER_DILATION,)

    hidden = torch.randn(40, upstream.config.gpt.hidden_size, generator=torch.Generator().manual_seed(1))
    wave = WaveformDecoder(decoder, vocos, torch.float32).decode([hidden])[0]
    expected = upstream._decode_to_wavs([hidden.clone()], True)[0]
    assert wave.shape == expected.shape
    assert abs(wave - expected).max() <= 1e-5 * max(1.0, abs(expected).max())


# ------------------------------------------------------------------------------ text and voices
def test_token_ids_and_decoded_text_are_upstreams(tiny_model_dir: Path, upstream: Any) -> None:
    ours, theirs = TextTokenizer(asset(tiny_model_dir, "tokenizer")), upstream.tokenizer
    wrapper = theirs._tokenizer  # transformers' BertTokenizerFast
    assert ours.encode(TEXTS) == [wrapper(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    assert (ours.spk_emb_ids, ours.break_0_ids, ours.eos_token) == (
        theirs.spk_emb_ids, theirs.break_0_ids, theirs.eos_token)
    ids = ours.encode(TEXTS[:4]) + [list(range(0, wrapper.vocab_size, 97)), [ours.eos_token, 5, 6]]
    assert ours.decode(ids) == theirs.decode(ids)


def test_the_tokenizer_config_decides_case_and_accents_as_transformers_does(tiny_model_dir: Path,
                                                                           tmp_path: Path) -> None:
    from transformers import BertTokenizerFast

    folder = Path(shutil.copytree(asset(tiny_model_dir, "tokenizer"), tmp_path / "tokenizer"))
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.update(do_lower_case=False, strip_accents=True)  # tokenizer.json still lowercases
    config_path.write_text(json.dumps(config))
    wrapper = BertTokenizerFast.from_pretrained(str(folder))

    ids = TextTokenizer(folder).encode(TEXTS)

    assert ids == [wrapper(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    assert ids != TextTokenizer(asset(tiny_model_dir, "tokenizer")).encode(TEXTS)  # it did change


def test_upstreams_dvae_is_read_only_for_a_voice_from_a_recording_and_encodes_as_upstream(
        tiny_model_dir: Path, upstream: Any, tmp_path: Path) -> None:
    import numpy as np

    from pipeline.engine import EngineConfig, load_engine
    from pipeline.engine.audio_io import read_reference_audio
    from pipeline.engine.voices import parse_voice

    engine = load_engine(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="fp32"))
    assert not engine.parts.dvae.loaded  # a start that makes no voice from audio never reads it
    t = np.arange(2 * 16_000) / 16_000
    clip = tmp_path / "reader.wav"
    with wave.open(str(clip), "wb") as f:  # 2 s of a wavering tone, mono 16-bit 16 kHz
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(16_000)
        f.writeframes((0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(3 * t) * 32767).astype("<i2").tobytes())

    voice = engine.voice_from_audio(clip)

    assert engine.parts.dvae.loaded
    expected = upstream.dvae.sample_audio(torch.from_numpy(read_reference_audio(clip)))
    codes = parse_voice(voice, upstream.config.gpt.hidden_size, 4).codes
    assert np.array_equal(codes, expected.cpu().numpy())


def test_speaker_statistics_are_upstreams(upstream: Any) -> None:
    from ChatTTS.config.config import Config

    std, mean = speaker_stats(True, upstream.config.gpt.hidden_size, CPU)
    assert torch.equal(std, upstream.speaker.std) and torch.equal(mean, upstream.speaker.mean)
    assert SPEAKER_STATS == Config().spk_stat  # the real model's, copied from the release


def test_the_release_checksums_are_the_packages() -> None:
    import ChatTTS

    shipped = Path(ChatTTS.__file__).parent / "res" / "sha256_map.json"
    assert RELEASE_SHA256 == json.loads(shipped.read_text())


# ------------------------------------------------------------------------------ wrong files
def copy_of(tiny_model_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_model_dir, tmp_path / "model"))


def test_a_file_from_another_layout_is_named_with_its_missing_tensor(tiny_model_dir: Path,
                                                                     tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    root = copy_of(tiny_model_dir, tmp_path)
    path = asset(root, "Decoder.safetensors")
    state = load_file(str(path))
    del state["out_conv.weight"]
    save_file(state, str(path))
    with pytest.raises(ModelError) as caught:
        load_decoder(path, CPU)
    message = str(caught.value)
    assert str(path) in message and "out_conv.weight" in message and "\n" not in message


def test_a_gpt_config_that_is_not_upstreams_is_refused_with_its_name(tiny_model_dir: Path,
                                                                     tmp_path: Path) -> None:
    root = copy_of(tiny_model_dir, tmp_path)
    config = asset(root, "gpt") / "config.json"
    raw = json.loads(config.read_text())
    raw["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0}
    config.write_text(json.dumps(raw))
    with pytest.raises(ModelError, match="yarn") as caught:
        load_llama(config.parent, CPU)
    assert str(config) in str(caught.value)
    raw["num_hidden_layers"] += 1  # the file then lacks a layer
    raw.pop("rope_parameters")
    config.write_text(json.dumps(raw))
    with pytest.raises(ModelError, match="lacks layers"):
        load_llama(config.parent, CPU)
