"""Decoder+Vocos's Triton kernels (pipeline/engine/waveform_kernels.py), under Triton's CPU
interpreter, against the PyTorch ops the CPU runs. A ConvNeXt block's depthwise convolution and
LayerNorm: channels-last frames, each row read only up to its own length, taps that reach past both
ends, a dilation, a stretch of frames that ends inside a program, channels not a power of 2. The
inverse STFT's overlap-add: rows of every length down to none, frames past a row's length ignored
(even when not finite), the envelope's edges, Vocos's n_fft and hop and a small odd pair."""

from __future__ import annotations

from tests.test_engine_kernels import compiled_for_hopper, worst_error_under_the_interpreter

DWCONV_NORM_CHECK = r"""
import torch
from torch import nn
from pipeline.engine import waveform_kernels as wk

torch.manual_seed(4)
worst = 0.0
for channels, taps, dilation, steps, dtype in ((512, 7, 2, 37, torch.float32), (100, 7, 1, 20, torch.float32),
                                                (512, 7, 1, 33, torch.float16)):
    conv = nn.Conv1d(channels, channels, taps, padding=dilation * (taps // 2), dilation=dilation, groups=channels)
    norm = nn.LayerNorm(channels, eps=1e-6)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    conv, norm = conv.to(dtype), norm.to(dtype)
    x = torch.randn(3, steps, channels).to(dtype)
    frames = torch.tensor([steps, 5, 0])  # a full row, a short one, a padding row
    mask = (torch.arange(steps) < frames[:, None]).unsqueeze(2).to(dtype)
    garbage = x.clone()
    garbage[1, 5:] = float("nan")  # past a row's length nothing is read
    with torch.no_grad():
        got = wk.dwconv_layer_norm(garbage, frames, conv, norm)
        want = wk.dwconv_layer_norm_ops(x.float(), mask.float(), conv.float(), norm.float())
    assert got.shape == x.shape and got.dtype == dtype and not torch.isnan(got).any()
    worst = max(worst, (got.float() - want).abs().max().item())
print(worst)
"""


def test_the_fused_depthwise_convolution_and_layer_norm_match_the_pytorch_ops() -> None:
    """Within half precision's rounding of float32 PyTorch (outputs are LayerNorm'd: ~unit scale)."""
    assert worst_error_under_the_interpreter(DWCONV_NORM_CHECK) < 1e-2


OVERLAP_ADD_CHECK = r"""
import torch
from pipeline.engine import waveform_kernels as wk

torch.manual_seed(5)
worst = 0.0
for n_fft, hop, count in ((1024, 256, 20), (16, 4, 9), (12, 5, 7)):
    window = torch.hann_window(n_fft)
    time_frames = torch.randn(4, count, n_fft)
    frames = torch.tensor([count, 5, 0, 1])
    mask = (torch.arange(count) < frames[:, None]).float()
    garbage = time_frames.clone()
    garbage[1, 5:] = float("nan")  # past a row's length nothing is read
    got = wk.overlap_add(garbage, window, frames, hop)
    want = wk.overlap_add_ops(time_frames, window, mask, hop)
    assert got.shape == want.shape == (4, (count - 1) * hop) and not torch.isnan(got).any()
    worst = max(worst, ((got - want).abs() / want.abs().clamp(min=1)).max().item())
print(worst)
"""


def test_the_fused_overlap_add_matches_the_folds() -> None:
    """Within float32 rounding (the same sums in another order)."""
    assert worst_error_under_the_interpreter(OVERLAP_ADD_CHECK) < 1e-5


SCALED_RESIDUAL_CHECK = r"""
import torch
from pipeline.engine import waveform_kernels as wk

torch.manual_seed(6)
worst = 0.0
for rows, frames, channels, dtype in ((3, 37, 512, torch.float16), (2, 9, 100, torch.float32), (1, 1, 512, torch.float16)):
    x = torch.randn(rows, frames, channels).to(dtype)
    y = torch.randn(rows, frames, channels).to(dtype)
    scale = (torch.rand(channels) * 0.2).to(dtype)
    want = torch.addcmul(x.float(), y.float(), scale.float())
    got = wk.scaled_residual(x, y, scale)
    assert got.data_ptr() == y.data_ptr() and got.shape == x.shape and got.dtype == dtype
    worst = max(worst, (got.float() - want).abs().max().item())
print(worst)
"""


def test_the_scaled_residual_add_is_addcmul() -> None:
    """Within half precision's rounding of float32 PyTorch (sums of ~unit scale), written over the
    branch's own tensor: rows whose frames end inside a program, channels not a power of 2."""
    assert worst_error_under_the_interpreter(SCALED_RESIDUAL_CHECK) < 5e-3


def test_the_waveform_kernels_compile_for_hopper_without_spilling(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Triton's own ptxas, for sm_90 on any machine: the depthwise conv + LayerNorm keeps its sums in
    registers (16 frames over 4 warps took 255 and spilled 673 loads and stores), few enough for
    two programs an SM (4 frames over 4 warps: 168); the overlap-add too."""
    from pipeline.engine import waveform_kernels

    codes = compiled_for_hopper(tmp_path, "--waveform")
    dwconv = codes["dwconv + LayerNorm"]
    threads = 32 * waveform_kernels.WARPS
    assert dwconv["spills"] == 0 and dwconv["registers"] * threads <= 65536 // 2  # two programs an SM
    assert codes["overlap-add"]["spills"] == 0 and codes["overlap-add"]["registers"] <= 128
