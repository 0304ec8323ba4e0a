"""GPT hidden states -> mel (upstream's Decoder) -> waveform (Vocos), batched, rows of any length.

Upstream zero-pads the batch to its longest row and runs the convolutions over the padding, so a
row's last ~0.8 s depend on how long its batch-mates are. Here every convolution's input is masked
to each row's own length, which is exactly the zero padding a row run alone would see, and the
inverse STFT normalises each row by its own window envelope. A sentence's waveform is therefore the
same alone or in any batch. Convolutions run in the decoder's dtype (half on GPU); the ISTFT always
runs in float32.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pipeline.engine.host_lists import to_device

log = logging.getLogger(__name__)

HOP = 256  # samples per mel frame; two mel frames per GPT step
STEP_BUCKET = 32  # decode chunks are padded to a multiple of this many GPT steps (on the GPU)


class WaveformDecoder:
    """Runs upstream's Decoder (``DVAE`` without VQ) and ``Vocos`` over masked batches."""

    def __init__(self, decoder: nn.Module, vocos: nn.Module, dtype: torch.dtype,
                 row_steps_per_chunk: int = 16384) -> None:
        head = vocos.head.istft
        self.n_fft = int(head.n_fft)
        self.hop = int(head.hop_length)
        self.window = head.window.detach().float().clone()  # before any cast: the ISTFT is fp32
        self.decoder = decoder.to(dtype)
        self.vocos = vocos.to(dtype)
        self.dtype = dtype
        self.row_steps_per_chunk = row_steps_per_chunk
        # cuDNN builds an execution plan for every new (rows, frames) shape of a half-precision
        # depthwise conv, which cost seconds per batch on the H200 (docs/engine.md, run 1); the
        # native kernels need no planning. TTS_JOBS_DECODE_CUDNN=1 turns cuDNN back on.
        self.use_cudnn = dtype == torch.float32 or os.environ.get("TTS_JOBS_DECODE_CUDNN") == "1"
        # Without cuDNN, PyTorch runs a full (non-depthwise) conv one row at a time (an im2col
        # and a GEMM per row: 4,096 of each per 1024-sentence batch on the H200, their launches
        # holding up the host that feeds the decode steps); one GEMM over all rows instead.
        self.batched_convs = not self.use_cudnn and self.device.type == "cuda"

    @property
    def device(self) -> torch.device:
        return self.decoder.coef.device

    @torch.inference_mode()
    def decode(self, hiddens: Sequence[torch.Tensor]) -> list[np.ndarray]:
        """Waveforms (float32, 24 kHz) of GPT hidden states [T_i, C]; (2*T_i - 1) * 256 samples."""
        return to_numpy(self.decode_on_device(hiddens))

    @torch.inference_mode()
    def decode_on_device(self, hiddens: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """``decode`` without the copy to the host (no sync): float32 device tensors."""
        waves: list[torch.Tensor | None] = [None] * len(hiddens)
        for chunk in self._chunks([h.shape[0] for h in hiddens]):
            with torch.backends.cudnn.flags(enabled=self.use_cudnn):
                batch = self._decode_batch([hiddens[i] for i in chunk])
            for i, wave in zip(chunk, batch):
                waves[i] = wave
        empty = torch.zeros(0, dtype=torch.float32, device=self.device)
        return [w if w is not None else empty for w in waves]

    def _chunks(self, lengths: list[int]) -> list[list[int]]:
        """Row groups of similar length whose padded size stays under the per-chunk budget."""
        order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: lengths[i])
        chunks: list[list[int]] = []
        current: list[int] = []
        for i in order:
            if current and (len(current) + 1) * lengths[i] > self.row_steps_per_chunk:
                chunks.append(current)
                current = []
            current.append(i)
        if current:
            chunks.append(current)
        return chunks

    def _decode_batch(self, hiddens: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        lengths = [h.shape[0] for h in hiddens]
        # padded to a multiple of STEP_BUCKET on the GPU: chunk shapes then repeat from batch to
        # batch, and the GEMM and FFT libraries find their plans cached (a first shape costs
        # host time, measured on the H200); the mask keeps the padding out of every row
        steps = -(-max(lengths) // STEP_BUCKET) * STEP_BUCKET if self.device.type == "cuda" \
            else max(lengths)
        x = torch.nn.utils.rnn.pad_sequence(list(hiddens), batch_first=True)  # [B, T, C]
        x = F.pad(x, (0, 0, 0, steps - x.shape[1])).to(self.dtype).transpose(1, 2).contiguous()
        frames = to_device([2 * n for n in lengths], self.device)
        mask = (torch.arange(2 * steps, device=self.device) < frames[:, None]).unsqueeze(1)
        mel = self._mel(x, mask.to(self.dtype))
        audio = self._vocos(mel, mask)
        return [audio[i, : (2 * n - 1) * self.hop] for i, n in enumerate(lengths)]

    def _mel(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Upstream ``DVAE.forward(mode='decode')`` without VQ, each conv input masked."""
        rows, channels, steps = x.shape
        x = x.view(rows, 2, channels // 2, steps).permute(0, 2, 3, 1).flatten(2)
        net = self.decoder.decoder
        conv_a, act, conv_b = net.conv_in
        y = self._conv(conv_b, act(self._conv(conv_a, x * mask)) * mask)
        for block in net.decoder_block:
            y = y + _convnext(block, y * mask, block.weight)
        y = self._conv(net.conv_out, y)
        return self._conv(self.decoder.out_conv, y * mask) * self.decoder.coef.to(self.dtype)

    def _vocos(self, mel: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Upstream ``Vocos.decode``: backbone in the decoder dtype, ISTFT in float32."""
        m = mask.to(self.dtype)
        backbone = self.vocos.backbone
        x = self._conv(backbone.embed, mel * m)
        x = backbone.norm(x.transpose(1, 2)).transpose(1, 2)
        for block in backbone.convnext:
            x = x + _convnext(block, x * m, block.gamma)
        x = backbone.final_layer_norm(x.transpose(1, 2))
        spec = self.vocos.head.out(x).transpose(1, 2).float()
        magnitude, phase = spec.chunk(2, dim=1)
        magnitude = torch.clip(torch.exp(magnitude), max=1e2)
        complex_spec = magnitude * (torch.cos(phase) + 1j * torch.sin(phase))
        return self._istft(complex_spec, mask.squeeze(1))

    def _conv(self, conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
        return conv_rows_at_once(conv, x) if self.batched_convs else conv(x)

    def _istft(self, spec: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``torch.istft(center=True)`` per row: frames past a row's end add nothing, not even to
        its window envelope. Returns [B, (F - 1) * hop] with F the longest row's frame count."""
        window = self.window.to(spec.device)
        n_fft, hop = self.n_fft, self.hop
        frames = _inverse_rfft(spec, n_fft) * window[None, :, None]
        frames = frames * mask[:, None, :]
        count = spec.shape[-1]
        length = (count - 1) * hop + n_fft
        fold = {"output_size": (1, length), "kernel_size": (1, n_fft), "stride": (1, hop)}
        audio = F.fold(frames, **fold)[:, 0, 0]
        weights = window.square()[None, :, None] * mask[:, None, :].float()
        envelope = F.fold(weights, **fold)[:, 0, 0]
        start = n_fft // 2
        audio = audio[:, start: start + (count - 1) * hop]
        envelope = envelope[:, start: start + (count - 1) * hop]
        return audio / torch.where(envelope > 1e-11, envelope, torch.ones_like(envelope))


FFT_FRAME_BUCKET = 4096


def _inverse_rfft(spec: torch.Tensor, n_fft: int) -> torch.Tensor:
    """``torch.fft.irfft(spec, n_fft, dim=1)`` for spec [B, bins, F], as one batch of B * F
    frames padded up to a multiple of ``FFT_FRAME_BUCKET``. cuFFT builds a plan for every new
    batch shape (~10 ms of host time, measured on the H200), and every decode chunk has its own
    (B, F); bucketed, a few plans serve every chunk."""
    rows, bins, count = spec.shape
    flat = spec.transpose(1, 2).reshape(rows * count, bins)
    padding = -flat.shape[0] % FFT_FRAME_BUCKET
    if spec.is_cuda and padding:
        flat = torch.cat([flat, flat.new_zeros(padding, bins)])
    frames = torch.fft.irfft(flat, n_fft, dim=-1)[: rows * count]
    return frames.view(rows, count, n_fft).transpose(1, 2)


def conv_rows_at_once(conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
    """``conv(x)`` for x [B, C_in, T] (zero padding, stride 1, no groups) as one GEMM: every
    row's sliding windows side by side [B * T, C_in * k] against the kernel [C_out, C_in * k]."""
    if conv.groups != 1 or conv.stride != (1,) or conv.padding_mode != "zeros":
        return conv(x)
    rows, channels, steps = x.shape
    (k,), (dilation,), (pad,) = conv.kernel_size, conv.dilation, conv.padding
    span = (k - 1) * dilation + 1
    windows = F.pad(x, (pad, pad)).unfold(2, span, 1)[..., ::dilation]  # [B, C_in, T', k] view
    out_steps = windows.shape[2]
    columns = windows.permute(0, 2, 1, 3).reshape(rows * out_steps, channels * k)
    y = F.linear(columns, conv.weight.reshape(conv.out_channels, channels * k), conv.bias)
    return y.view(rows, out_steps, conv.out_channels).transpose(1, 2)


def to_numpy(waves: Sequence[torch.Tensor]) -> list[np.ndarray]:
    """Device waveforms to the host in one copy (not one sync per row)."""
    if not waves:
        return []
    joined = torch.cat([w.reshape(-1) for w in waves]).cpu().numpy()
    bounds = np.cumsum([w.numel() for w in waves])[:-1]
    return np.split(joined, bounds)  # views of one host array: no second copy


def _convnext(block: nn.Module, x: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    """The residual branch of a ConvNeXt block (upstream's and Vocos's share this shape)."""
    y = block.dwconv(x).transpose(1, 2)
    y = block.pwconv2(block.act(block.pwconv1(block.norm(y))))
    if scale is not None:
        y = y * scale
    return y.transpose(1, 2)
