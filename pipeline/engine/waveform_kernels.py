"""Decoder+Vocos's elementwise work in Triton: a ConvNeXt block's depthwise convolution and
LayerNorm in one kernel, its residual add in another, and the inverse STFT's overlap-add with its
envelope in a third.

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

The inverse STFT (float32) multiplied every frame by the window and by its row's mask, folded the
frames (``F.fold``, a col2im kernel) and folded the squared window the same way for the envelope,
then cut and divided: ~1.5 ms of the chunk, the two folds 0.74 ms. ``overlap_add`` reads each
output sample's few frames (n_fft / hop of them) and the window once and writes the sample once.

Only on CUDA in half precision (``waveform.py`` decides; ``FUSED`` is EngineTuning's switch);
elsewhere the ``*_ops`` functions run the same in PyTorch. The tests run the kernels under
Triton's CPU interpreter against those ops.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.engine.triton_import import tl, triton

FUSED = True  # EngineTuning.fused_waveform (set by loading.apply_tuning)
# Frames per program and its warps: 4 x 512 channels over 4 warps is sixteen float32 sums a
# thread. Swept alone on an H100 (`step-profile --waveform`, 64 rows x 512 frames x 512 channels):
# 4 / 4 50.4 us, 4 / 8 51.6, 2 / 4 61.0, 8 / 8 62.6, 8 / 16 (before) 65.7, 16 / 16 75.6, 1 / 1
# 113.8. 16 frames over 4 warps, as first measured, took 255 registers and spilled (673 local
# loads and stores): the seven taps' loads are all kept in flight, ~8 registers per value held.
BLOCK_FRAMES = 4
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


    @triton.jit
    def _scaled_residual_kernel(x_ptr, y_ptr, scale_ptr, total, CHANNELS: tl.constexpr, BLOCK: tl.constexpr):
        # flat, with the channel count known: contiguous 16-byte loads (a mask over a runtime
        # column bound kept them to one half each)
        at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        inside = at < total
        scale = tl.load(scale_ptr + at % CHANNELS).to(tl.float32)
        x = tl.load(x_ptr + at, mask=inside, other=0.0).to(tl.float32)
        y = tl.load(y_ptr + at, mask=inside, other=0.0).to(tl.float32)
        tl.store(y_ptr + at, (x + y * scale).to(y_ptr.dtype.element_ty), mask=inside)

    @triton.jit
    def _overlap_add_kernel(frames_ptr, window_ptr, valid_ptr, out_ptr, count, samples,
                            N_FFT: tl.constexpr, HOP: tl.constexpr, OVERLAP: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        inside = n < samples
        at = n + N_FFT // 2  # centred frames: the signal starts half a frame into the first
        valid = tl.minimum(tl.load(valid_ptr + row), count)  # the row's own frames; the rest add nothing
        base = row.to(tl.int64) * count * N_FFT
        total = tl.zeros([BLOCK], tl.float32)
        envelope = tl.zeros([BLOCK], tl.float32)
        for k in tl.static_range(OVERLAP):
            frame = at // HOP - k
            offset = at - frame * HOP
            present = inside & (frame >= 0) & (frame < valid) & (offset < N_FFT)
            weight = tl.load(window_ptr + offset, mask=present, other=0.0)
            total += weight * tl.load(frames_ptr + base + frame * N_FFT + offset, mask=present, other=0.0)
            envelope += weight * weight
        audio = tl.where(envelope > 1e-11, total / envelope, total)
        tl.store(out_ptr + row.to(tl.int64) * samples + n, audio, mask=inside)


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


RESIDUAL_BLOCK = 2048  # values per program of the scaled residual add (16 a thread)


def scaled_residual(x: torch.Tensor, y: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``torch.addcmul(x, y, scale)`` (a ConvNeXt block's residual: x + layer scale x branch) for
    contiguous x, y [..., C] and scale [C], computed in float32 and written over y (a fresh GEMM
    output), as one vectorised pass: PyTorch's own kernel for the broadcast scale is not (in the
    bench's trace on an H100, 115 us a block of a chunk, 0.87 TB/s: 14 % of Decoder+Vocos's time)."""
    assert y.is_contiguous(), "the sum is written over y in place, row after row"
    x = x.contiguous()
    total = y.numel()
    if total:
        _scaled_residual_kernel[(triton.cdiv(total, RESIDUAL_BLOCK),)](
            x, y, scale, total, CHANNELS=y.shape[-1], BLOCK=RESIDUAL_BLOCK, num_warps=4)
    return y


OVERLAP_BLOCK = 1024  # output samples per program


def overlap_add(time_frames: torch.Tensor, window: torch.Tensor, frames: torch.Tensor, hop: int) -> torch.Tensor:
    """The inverse STFT's overlap-add (``center=True``) of time_frames [rows, F, n_fft] (each frame's
    irfft), windowed, each row's frames from ``frames`` [rows] on left out, divided by the envelope
    of the windows added: [rows, (F - 1) * hop] float32, as one kernel."""
    rows, count, n_fft = time_frames.shape
    time_frames = time_frames.contiguous()
    samples = (count - 1) * hop
    out = torch.empty(rows, samples, dtype=torch.float32, device=time_frames.device)
    if samples > 0 and rows > 0:
        grid = (rows, triton.cdiv(samples, OVERLAP_BLOCK))
        _overlap_add_kernel[grid](time_frames, window.float().contiguous(), frames, out, count, samples,
                                  N_FFT=n_fft, HOP=hop, OVERLAP=-(-n_fft // hop), BLOCK=OVERLAP_BLOCK, num_warps=4)
    return out


def overlap_add_ops(time_frames: torch.Tensor, window: torch.Tensor, mask: torch.Tensor, hop: int) -> torch.Tensor:
    """The same in PyTorch ops (``mask`` [rows, F]: 1 on each row's own frames): two folds."""
    _, count, n_fft = time_frames.shape
    windowed = (time_frames * window[None, None, :] * mask[:, :, None]).transpose(1, 2)  # [rows, n_fft, F]
    length = (count - 1) * hop + n_fft
    fold = {"output_size": (1, length), "kernel_size": (1, n_fft), "stride": (1, hop)}
    audio = F.fold(windowed, **fold)[:, 0, 0]
    weights = window.square()[None, :, None] * mask[:, None, :].float()
    envelope = F.fold(weights, **fold)[:, 0, 0]
    start = n_fft // 2
    audio = audio[:, start: start + (count - 1) * hop]
    envelope = envelope[:, start: start + (count - 1) * hop]
    return audio / torch.where(envelope > 1e-11, envelope, torch.ones_like(envelope))
