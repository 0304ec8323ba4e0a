"""What an engine is built from. Plain data, no torch: ``import pipeline.engine`` stays light."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PRECISIONS = ("fp32", "fp16", "bf16", "int8")  # besides "auto"
DEVICES = ("auto", "cpu", "cuda")  # and "cuda:N"


def unknown_choice(device: str, precision: str) -> str:
    """What is wrong with a device or precision name, or '' for names an engine takes (whether
    this machine has that device is known only once torch is loaded)."""
    if device not in DEVICES and not (device.startswith("cuda:") and device[5:].isdigit()):
        return f"unknown device {device!r}: use auto, cpu, cuda or cuda:N"
    if precision != "auto" and precision not in PRECISIONS:
        return f"unknown precision {precision!r}: use auto, {', '.join(PRECISIONS)}"
    return ""


@dataclass(frozen=True)
class EngineTuning:
    """The GPU path's kernel choices, for measuring one against another (docs/engine.md has what
    each measures); the defaults are what runs in production. Kernels are compiled once per
    process, so these hold for every engine of the process (``loading.apply_tuning``).

    decode_attention: the decode step's attention on CUDA in half precision: "triton"
    (decode_attention.py) or "sdpa" (masked SDPA, also the CPU and fp32 path).
    fused_layers: SiLU x up (its input's RMSNorm inside) and the final residual + RMSNorm as Triton
    kernels (layer_kernels.py) on the Triton path.
    cuda_graphs: decode steps and Decoder+Vocos chunks replayed from CUDA graphs (step_graphs.py,
    waveform_graphs.py); False runs them eagerly.
    prefill_graphs: admissions' prefills replayed from CUDA graphs (prefill.py); False runs them eagerly.
    decode_cudnn: cuDNN for the Decoder and Vocos convolutions (it plans per shape: slower here).
    attention_block, attention_warps: positions per loop iteration and warps per program of the
    single Triton attention kernel; attention_stages: blocks in flight (2+: pipelined loads) of
    it and of the word kernel (swept by ``python -m pipeline.bench step-profile --sweep``).
    attention_int8_bits: that kernel makes an int8 cache's codes floats by their bits, not by the
    conversion instruction (decode_attention.INT8_BITS; swept too).
    attention_kernel: which Triton attention kernel a decode step runs (decode_attention.KERNELS):
    "words" (the int8 cache read as 32-bit words, word_attention.py; the default), "single" or
    "split".
    attention_rope: the word kernel also does a step's RoPE and cache write (one launch a layer
    instead of two; word_attention.ROPE_INSIDE).
    attention_order: the word kernel's programs started longest slot first
    (word_attention.LONGEST_FIRST).
    step_priority: decode steps replayed on the GPU's highest-priority stream, Decoder+Vocos's
    kernels taking what they leave (step_graphs.URGENT_STEPS).
    host_wait: how a host thread waits for the GPU: "block" (asleep) or "spin" (a core spun;
    cuda_context.WAIT).
    fused_sampling: a decode step's sampling as one Triton kernel (fused_sampling.py) on CUDA.
    fused_waveform: each Decoder and Vocos ConvNeXt block's depthwise convolution and LayerNorm
    as one Triton kernel (waveform_kernels.py) on CUDA in half precision.
    """

    decode_attention: str = "triton"
    fused_layers: bool = True
    cuda_graphs: bool = True
    prefill_graphs: bool = True
    decode_cudnn: bool = False
    attention_block: int = 32
    attention_warps: int = 1
    attention_stages: int = 2
    attention_int8_bits: bool = True
    attention_kernel: str = "words"
    attention_rope: bool = True
    attention_order: bool = False
    step_priority: bool = True
    host_wait: str = "block"
    fused_sampling: bool = True
    fused_waveform: bool = True


@dataclass(frozen=True)
class EngineConfig:
    """Where the weights are and how to run them.

    device: "auto" (CUDA when present), "cpu", "cuda" or "cuda:N".
    precision: "auto" (fp16 on CUDA; on CPU int8 for full-size weights and fp32 for tiny test
    weights, as measured in docs/engine.md), "fp32", "fp16", "bf16", "int8" (INT8 GPT linears:
    torchao weight-only on CUDA, torch.ao dynamic on CPU).
    kv_cache: the decode slots' keys and values: "auto" (int8 on the GPU's fp16/bf16 path, the
    model's dtype elsewhere; docs/engine.md has what it costs in fidelity), "int8", "model".
    None: "auto".
    memory_gib: on CUDA, the most GPU memory this process may use (a hard cap, as a smaller card
    would have): the planner's batches and the decode slots are sized from it. None: the card.
    hf_home: the Hugging Face home whose cache holds 2Noise/ChatTTS when model_dir is None.
    tuning: the GPU path's kernel choices (EngineTuning), set for the whole process on load;
    None leaves them as they are (the defaults, or what a benchmark set).
    """

    model_dir: Path | None = None  # None: the Hugging Face cache of 2Noise/ChatTTS
    device: str = "auto"
    precision: str = "auto"
    kv_cache: str | None = None
    memory_gib: float | None = None
    hf_home: Path | None = None  # None: ~/.cache/huggingface
    tuning: EngineTuning | None = None  # None: the process's kernel choices as they stand
