"""A ConvNeXt block's depthwise convolution and LayerNorm in one Triton kernel (Decoder and Vocos).

Decoder+Vocos runs 20 ConvNeXt blocks over every decoded frame. In PyTorch each block's
depthwise convolution (no cuDNN in half precision: ``waveform.py`` says why) ran as the native
``conv_depthwise2d`` over a channels-first tensor, then copies to make the LayerNorm's channels
contiguous, the mask's multiply and the residual add on strided tensors: on an H100, of a 64-row
chunk's 22.6 ms, the depthwise convolutions took 4.1 ms and such strided elementwise kernels
~7 ms, the GEMMs 4.5 ms (``python -m pipeline.bench step-profile --waveform``). Here the frames
stay channels-last ([rows, frames, channels], what the GEMMs read) and one program per stretch of
``BLOCK_FRAMES`` frames of a row reads each tap's frames once, sums them in float32, normalises
across the channels and writes the LayerNorm's output once. The input is read as masked: frames
at or past a row's own length are zeros, exactly the zero padding a row decoded alone sees.

Only on CUDA in half precision (``waveform.py`` decides; ``FUSED`` is EngineTuning's switch);
elsewhere ``dwconv_layer_norm_ops`` runs the same in PyTorch. The tests run the kernel under
Triton's CPU interpreter against those ops.
"""

from __future__ import annotations

import torch
from torch import nn

try:  # pragma: no cover - exercised on the GPU machine (and under TRITON_INTERPRET=1)
    import triton
    import triton.language as tl
except ImportError:  # CPU builds of PyTorch
    triton = None
    tl = None

FUSED = True  # EngineTuning.fused_waveform (set by loading.apply_tuning)
BLOCK_FRAMES = 16  # frames per program: 16 x 512 float32 sums in registers at 4 warps
WARPS = 4


if triton is not None:  # pragma: no cover

    @triton.jit
    def _dwconv_norm_kernel(x_ptr, frames_ptr, conv_w_ptr, conv_b_ptr, norm_w_ptr, norm_b_ptr, out_ptr,
                            steps, channels, eps, TAPS: tl.constexpr, DILATION: tl.constexpr,
                            BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr):
        row = tl.program_id(0)
        times = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
        cols = tl.arange(0, BLOCK_C)
        inside = cols < channels
        valid = tl.load(frames_ptr + row)  # the row's own frames: the rest reads as zeros
        base = row.to(tl.int64) * steps * channels
        acc = tl.zeros([BLOCK_T, BLOCK_C], tl.float32)
        acc += tl.load(conv_b_ptr + cols, mask=inside, other=0.0).to(tl.float32)[None, :]
        for tap in tl.static_range(TAPS):
            source = times + (tap - TAPS // 2) * DILATION
            present = (source >= 0) & (source < valid)
            values = tl.load(x_ptr + base + source[:, None] * channels + cols[None, :],
                             mask=present[:, None] & inside[None, :], other=0.0).to(tl.float32)
            weight = tl.load(conv_w_ptr + cols * TAPS + tap, mask=inside, other=0.0).to(tl.float32)
            acc += values * weight[None, :]
        acc = tl.where(inside[None, :], acc, 0.0)
        mean = tl.sum(acc, axis=1) / channels
        centred = tl.where(inside[None, :], acc - mean[:, None], 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=1) / channels + eps)
        gain = tl.load(norm_w_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        shift = tl.load(norm_b_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        normed = centred * rstd[:, None] * gain[None, :] + shift[None, :]
        tl.store(out_ptr + base + times[:, None] * channels + cols[None, :], normed.to(out_ptr.dtype.element_ty),
                 mask=(times < steps)[:, None] & inside[None, :])


def available() -> bool:
    return triton is not None


def dwconv_layer_norm(x: torch.Tensor, frames: torch.Tensor, conv: nn.Conv1d, norm: nn.LayerNorm) -> torch.Tensor:
    """``norm(conv(x masked to each row's frames))`` for x [rows, steps, channels] channels-last
    (``frames`` [rows]: each row's own frames), as one kernel; a new [rows, steps, channels]."""
    rows, steps, channels = x.shape
    x = x.contiguous()
    out = torch.empty_like(x)
    (taps,), (dilation,) = conv.kernel_size, conv.dilation
    grid = (rows, triton.cdiv(steps, BLOCK_FRAMES))
    _dwconv_norm_kernel[grid](x, frames, conv.weight, conv.bias, norm.weight, norm.bias, out, steps, channels,
                              norm.eps, TAPS=taps, DILATION=dilation, BLOCK_T=BLOCK_FRAMES,
                              BLOCK_C=triton.next_power_of_2(channels), num_warps=WARPS)
    return out


def dwconv_layer_norm_ops(x: torch.Tensor, mask: torch.Tensor, conv: nn.Conv1d, norm: nn.LayerNorm) -> torch.Tensor:
    """The same in PyTorch ops (``mask`` [rows, steps, 1]: 1 on each row's own frames)."""
    return norm(conv((x * mask).transpose(1, 2)).transpose(1, 2))
