"""Building an Engine: locate and verify weights, read them into the engine's modules, set the precision.

ChatTTS is not imported here: ``load_upstream_chat`` (upstream's whole ``Chat``) serves the
benchmark's upstream rows and the tests that compare the engine with it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict
from typing import Any

import torch

import pipeline.engine.cuda_context as cuda_context  # noqa: PLR0402
import pipeline.engine.decode_attention as decode_attention  # noqa: PLR0402 (a package import is a circle)
import pipeline.engine.fused_sampling as fused_sampling  # noqa: PLR0402
import pipeline.engine.gpt as gpt  # noqa: PLR0402
import pipeline.engine.prefill as prefill  # noqa: PLR0402
import pipeline.engine.step_graphs as step_graphs  # noqa: PLR0402
import pipeline.engine.waveform as waveform  # noqa: PLR0402
import pipeline.engine.waveform_kernels as waveform_kernels  # noqa: PLR0402
import pipeline.engine.word_attention as word_attention  # noqa: PLR0402
from pipeline.engine.checksums import verify_real_weights
from pipeline.engine.config import PRECISIONS, EngineConfig, EngineTuning
from pipeline.engine.cuda_context import device_ordinal, open_primary_context
from pipeline.engine.engine import Engine
from pipeline.engine.gpt import KV_CACHE, KV_CACHE_CHOICES, FusedLlama
from pipeline.engine.host_threads import hand_over_promptly, spare_the_collector
from pipeline.engine.memory import cap_device_memory
from pipeline.engine.model_parts import ModelParts
from pipeline.engine.modules.audio_encoder import AudioEncoder
from pipeline.engine.modules.decoder import load_decoder
from pipeline.engine.modules.embed import load_embed
from pipeline.engine.modules.llama import load_llama
from pipeline.engine.modules.speaker import speaker_stats
from pipeline.engine.modules.tokenizer import TextTokenizer
from pipeline.engine.modules.vocos import load_vocos
from pipeline.engine.prompts import TokenEmbeddings
from pipeline.engine.waveform import WaveformDecoder
from pipeline.engine.weights import NOISE_WARNING, ModelFiles, build_config, locate_model
from pipeline.errors import ModelError

log = logging.getLogger(__name__)

INT8_SCHEMES = ("dynamic", "weight_only")
# "auto" on a CPU, by model size, as measured on the 2-core build machine (docs/engine.md): dynamic
# INT8 is 3.7x faster than fp32 at upstream's full widths (the GPT step is bound by reading its
# weights) and 5 % slower at the tiny test widths (quantisation overhead dominates).
CPU_AUTO_PRECISION = {"full": "int8", "tiny": "fp32"}
TORCHAO_FIX = ("precision int8 on CUDA needs torchao: `pip install torchao==0.18.0` (the release "
               "built for torch 2.11), or choose --precision fp16")


def load_engine(config: EngineConfig, int8_scheme: str = "weight_only") -> Engine:
    """Read the ChatTTS weights once onto ``config.device`` in ``config.precision``.

    ``int8_scheme`` (CUDA only): "weight_only" (default: int8 weights, fp16 activations; measured
    11x faster than "dynamic" on the H200, docs/engine.md) or "dynamic" (int8 activations too).

    Raises:
        ModelError: weights missing or corrupt, device unavailable, precision unsupported.
    """
    if config.tuning is not None:
        apply_tuning(config.tuning)
    files = locate_model(config.model_dir, config.hf_home)
    if files.synthetic:
        log.warning("%s Model: %s (%s size)", NOISE_WARNING, files.root, files.size)
    else:
        verify_real_weights(files)
    device = resolve_device(config.device)
    if device.type == "cuda":
        open_primary_context(device_ordinal(str(device)))  # before torch's first use: how it waits
        hash_triton_beside()
        hand_over_promptly()  # its threads queue the GPU's work op by op
        if config.memory_gib is not None:
            cap_device_memory(device, config.memory_gib)  # before anything is allocated on it
    precision = resolve_precision(config.precision, device, files.size)
    if int8_scheme not in INT8_SCHEMES:
        raise ModelError(f"unknown int8 scheme {int8_scheme!r}: use one of {INT8_SCHEMES}")
    kv_cache = config.kv_cache or KV_CACHE
    if kv_cache not in KV_CACHE_CHOICES:
        raise ModelError(f"unknown KV cache {kv_cache!r}: use one of {KV_CACHE_CHOICES} "
                         "(EngineConfig.kv_cache, TTS_JOBS_KV_CACHE)")
    began = time.perf_counter()
    parts = _build_parts(files, device, precision, int8_scheme)
    parts.gpt.kv_cache = kv_cache
    log.info("engine ready: %s, %s, %s weights from %s (%.1f s)", device, precision,
             "SYNTHETIC (noise)" if files.synthetic else "real", files.root,
             time.perf_counter() - began)
    engine = Engine(parts, device=str(device), precision=precision, synthetic=files.synthetic,
                    model_root=files.root)
    if device.type == "cuda":
        spare_the_collector()  # the captures' collections walk only what comes after the load
    return engine


def hash_triton_beside() -> threading.Thread:
    """Triton's own cache key (a hash of its compiler's files and its 700-MB library, kept for
    the process) computed on a thread of its own while the weights load: the first kernel launch
    computes it otherwise, 0.3-0.4 s on an H200 host, inside the warm-up on the way to the first
    sentence. Hashing gives the interpreter up, so the load goes on meanwhile."""
    from triton.runtime.cache import triton_key

    thread = threading.Thread(target=triton_key, name="triton-key", daemon=True)
    thread.start()
    return thread


def apply_tuning(tuning: EngineTuning) -> None:
    """The kernel choices for this whole process: kernels and CUDA graphs are built once per
    process and shared by its engines, so the choice is the modules' own."""
    if tuning.host_wait not in cuda_context.WAIT_FLAGS:
        raise ModelError(f"unknown CUDA wait {tuning.host_wait!r}: use {' or '.join(cuda_context.WAIT_FLAGS)} "
                         "(TTS_JOBS_CUDA_WAIT)")
    if tuning.attention_kernel not in decode_attention.KERNELS:
        raise ModelError(f"unknown attention kernel {tuning.attention_kernel!r}: use "
                         f"{', '.join(decode_attention.KERNELS)} (TTS_JOBS_ATTENTION_KERNEL)")
    gpt.DECODE_ATTENTION = tuning.decode_attention
    gpt.FUSED_LAYERS = tuning.fused_layers
    step_graphs.CUDA_GRAPHS = tuning.cuda_graphs
    prefill.PREFILL_GRAPHS = tuning.prefill_graphs
    waveform.DECODE_CUDNN = tuning.decode_cudnn
    decode_attention.BLOCK_POSITIONS = tuning.attention_block
    decode_attention.WARPS = tuning.attention_warps
    decode_attention.STAGES = word_attention.STAGES = tuning.attention_stages
    decode_attention.INT8_BITS = tuning.attention_int8_bits
    decode_attention.KERNEL = tuning.attention_kernel
    word_attention.ROPE_INSIDE = tuning.attention_rope
    word_attention.LONGEST_FIRST = tuning.attention_order
    step_graphs.URGENT_STEPS = tuning.step_priority
    cuda_context.WAIT = tuning.host_wait
    fused_sampling.ON = tuning.fused_sampling
    waveform_kernels.FUSED = tuning.fused_waveform


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ModelError(f"device {name!r} requested but CUDA is not available here; "
                             "use --device cpu or run on a GPU machine")
        device = torch.device(name)
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ModelError(f"device {name!r} does not exist: this machine has "
                             f"{torch.cuda.device_count()} GPU(s)")
        return device
    raise ModelError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N")


def resolve_precision(name: str, device: torch.device, size: str = "full") -> str:
    """``name``, or for "auto": fp16 on CUDA; on CPU, whatever measured fastest for ``size``."""
    if name == "auto":
        return "fp16" if device.type == "cuda" else CPU_AUTO_PRECISION.get(size, "fp32")
    if name not in PRECISIONS:
        raise ModelError(f"unknown precision {name!r}: use auto, {', '.join(PRECISIONS)}")
    if name in ("fp16", "bf16") and device.type == "cpu":
        log.warning("%s on CPU is emulated and slow; it is meant for fidelity checks", name)
    return name


def load_upstream_chat(files: ModelFiles, device: torch.device) -> Any:
    """Upstream's ``ChatTTS.Chat`` with every module loaded from ``files``: the benchmark's
    upstream rows, and the reference the tests hold the engine's own modules to."""
    import ChatTTS

    chat = ChatTTS.Chat(logging.getLogger("ChatTTS"))
    chat.config = build_config(files.size)
    paths = {k: str(files.root / v) for k, v in asdict(chat.config.path).items()}
    try:
        # _load, not load: upstream's load() re-checks sha256 against its own list, which
        # synthetic weights fail; real weights are checked by verify_real_weights first.
        loaded = chat._load(device=device, **paths)
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        raise ModelError(f"{files.root}: ChatTTS weights could not be loaded ({exc}); the files "
                         "may be truncated or from another release: download them again") from exc
    if not loaded:
        raise ModelError(f"{files.root}: ChatTTS reported a partial load; download the weights again")
    return chat


def _build_parts(files: ModelFiles, device: torch.device, precision: str,
                 int8_scheme: str) -> ModelParts:
    """The engine's modules, read from the files straight onto ``device``, in ``precision``."""
    compute = _compute_dtype(precision, device)
    llama = load_llama(files.asset("asset/gpt"), device)
    max_positions = llama.config.max_position_embeddings
    with torch.no_grad():
        gpt = FusedLlama(llama).eval()
        embeddings = TokenEmbeddings(load_embed(files.asset("asset/Embed.safetensors"), device)).eval()
    del llama  # the fused copy replaces it
    gpt = gpt.to(compute)
    embeddings = embeddings.to(compute)
    if precision == "int8":
        _quantize_int8(gpt, device.type == "cuda", int8_scheme)
    waveform = WaveformDecoder(load_decoder(files.asset("asset/Decoder.safetensors"), device),
                               load_vocos(files.asset("asset/Vocos.safetensors"), device), compute,
                               graphs_allowed=step_graphs.mid_book_graphs_allowed)
    std, mean = speaker_stats(files.synthetic, gpt.hidden, device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return ModelParts(gpt=gpt, embeddings=embeddings, waveform=waveform,
                      tokenizer=TextTokenizer(files.asset("asset/tokenizer")),
                      dvae=AudioEncoder(files, device), speaker_std=std, speaker_mean=mean,
                      max_positions=max_positions)


def _compute_dtype(precision: str, device: torch.device) -> torch.dtype:
    half = {"fp16": torch.float16, "bf16": torch.bfloat16}
    if precision in half:
        return half[precision]
    if precision == "int8" and device.type == "cuda":
        return torch.float16  # int8 weights, fp16 activations
    return torch.float32


def _quantize_int8(gpt: FusedLlama, on_gpu: bool, scheme: str) -> None:
    """Dynamic INT8 on the GPT's linear layers; norms, embeddings and heads keep their dtype."""
    if not on_gpu:
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        # Per-output-channel weight scales: per-tensor ones cost ~7 % top-1 agreement on full-size
        # weights (docs/engine.md).
        quantize_dynamic(gpt.layers, {torch.nn.Linear: per_channel_dynamic_qconfig},
                         dtype=torch.qint8, inplace=True)
        return
    try:
        from torchao.quantization import (
            Int8DynamicActivationInt8WeightConfig,
            Int8WeightOnlyConfig,
            quantize_,
        )
    except ImportError as exc:
        raise ModelError(TORCHAO_FIX) from exc
    config = (Int8DynamicActivationInt8WeightConfig() if scheme == "dynamic"
              else Int8WeightOnlyConfig())
    quantize_(gpt.layers, config)
