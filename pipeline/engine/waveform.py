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
from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import pipeline.engine.waveform_kernels as waveform_kernels  # noqa: PLR0402 (a package import is a circle)
from pipeline.engine.graph_recording import Allowed
from pipeline.engine.host_lists import to_device
from pipeline.engine.waveform_graphs import WaveformGraphs

log = logging.getLogger(__name__)

HOP = 256  # samples per mel frame; two mel frames per GPT step
STEP_BUCKET = 32  # decode chunks are padded to a multiple of this many GPT steps (on the GPU)
DECODE_CUDNN = False  # EngineTuning.decode_cudnn (set by loading.apply_tuning)


class WaveformDecoder:
    """Runs upstream's Decoder (``DVAE`` without VQ) and ``Vocos`` over masked batches."""

    def __init__(self, decoder: nn.Module, vocos: nn.Module, dtype: torch.dtype,
                 row_steps_per_chunk: int = 16384,
                 graphs_allowed: Allowed = lambda device: False) -> None:
        head = vocos.head.istft
        self.n_fft = int(head.n_fft)
        self.hop = int(head.hop_length)
        self.window = head.window.detach().float().clone()  # before any cast: the ISTFT is fp32
        self.decoder = decoder.to(dtype)
        self.vocos = vocos.to(dtype)
        self.dtype = dtype
        self.row_steps_per_chunk = row_steps_per_chunk
        # cuDNN builds an execution plan for every new (rows, frames) shape of a half-precision
        # depthwise conv, which costs seconds per batch on the H200; the native kernels need no
        # planning. EngineTuning.decode_cudnn turns cuDNN on.
        self.use_cudnn = dtype == torch.float32 or DECODE_CUDNN
        # On the GPU in half precision, every GEMM and inverse FFT runs over fixed tiles of
        # frames (``linear_in_tiles``, ``_inverse_rfft``: no library planning per new shape),
        # and full (non-depthwise) convs become such GEMMs: without cuDNN PyTorch runs them one
        # row at a time (an im2col and a GEMM per row, 4,096 of each per 1024-sentence batch on
        # the H200, their launches holding up the host that feeds the decode steps).
        self.fixed_shapes = not self.use_cudnn and self.device.type == "cuda"
        # and such chunks replay from CUDA graphs (waveform_graphs: one launch, not ~1,000)
        self.graphs = WaveformGraphs(self.decode_padded, row_steps_per_chunk, self.hop, graphs_allowed)

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
        graphs = self._graphs_in_use()
        waves: list[torch.Tensor | None] = [None] * len(hiddens)
        for chunk in self._chunks([h.shape[0] for h in hiddens], graphs):
            with torch.backends.cudnn.flags(enabled=self.use_cudnn):
                batch = self._decode_batch([hiddens[i] for i in chunk], graphs)
            for i, wave in zip(chunk, batch):
                waves[i] = wave
        empty = torch.zeros(0, dtype=torch.float32, device=self.device)
        return [w if w is not None else empty for w in waves]

    def whole_chunks(self, lengths: list[int]) -> list[int]:
        """Of rows of ``lengths`` GPT steps, those (indices) that fill whole chunks: every chunk
        ``decode_on_device`` would make of them but the last, which the next row did not close.
        A chunk runs at its padded shape however few rows it holds (a graph's rows, a bucket's
        steps): ``waveform_overlap.FLUSH_CHUNKS`` has what launching whole ones saves."""
        return [i for chunk in self._chunks(lengths, self._graphs_in_use())[:-1] for i in chunk]

    def _graphs_in_use(self) -> WaveformGraphs | None:
        return self.graphs if self.fixed_shapes and self.graphs.wanted(self.device) else None

    def _chunks(self, lengths: list[int], graphs: WaveformGraphs | None = None) -> list[list[int]]:
        return chunk_rows(lengths, self.row_steps_per_chunk, lambda steps: self._padded_steps(steps, graphs))

    def _padded_steps(self, steps: int, graphs: WaveformGraphs | None) -> int:
        """What a chunk whose longest row has ``steps`` is padded to: a graph's bucket, else (on
        the GPU) a multiple of STEP_BUCKET, so that chunk shapes repeat from batch to batch and
        the GEMM and FFT libraries find their plans cached (a first shape costs host time,
        measured on the H200); the masks keep the padding out of every row."""
        if graphs is not None and (bucket := graphs.padded_steps(steps)):
            return bucket
        return -(-steps // STEP_BUCKET) * STEP_BUCKET if self.device.type == "cuda" else steps

    def _decode_batch(self, hiddens: Sequence[torch.Tensor],
                      graphs: WaveformGraphs | None = None) -> list[torch.Tensor]:
        lengths = [h.shape[0] for h in hiddens]
        steps = self._padded_steps(max(lengths), graphs)
        graphed = graphs is not None and graphs.fits(len(lengths), steps)
        rows = graphs.padded_rows(len(lengths), steps) if graphed else len(lengths)
        # in the decoder's dtype (what decode_padded computes in): one graph input buffer serves
        # float32 hidden states (the benchmark's fidelity check) and the GPT's own alike
        x = torch.nn.utils.rnn.pad_sequence([h.to(self.dtype) for h in hiddens], batch_first=True)  # [B, T, C]
        x = F.pad(x, (0, 0, 0, steps - x.shape[1], 0, rows - x.shape[0]))
        frames = to_device([2 * n for n in lengths] + [0] * (rows - len(lengths)), self.device)
        audio = graphs.run(x, frames) if graphed else self.decode_padded(x, frames)
        return [audio[i, : (2 * n - 1) * self.hop] for i, n in enumerate(lengths)]

    def decode_padded(self, x: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """Waveforms [R, (2S - 1) * hop] of hidden states x [R, S, C] (rows zero-padded past their
        own ``frames`` [R] / 2 steps); every op has shapes fixed by x's. Frames stay channels-last
        ([R, 2S, channels], what the GEMMs read) from the hidden states to the spectrum."""
        rows, steps, channels = x.shape
        # mel frame 2s + j is step s's j-th half of channels (upstream's view and permute)
        x = x.to(self.dtype).reshape(rows, 2 * steps, channels // 2)
        mask = (torch.arange(2 * steps, device=x.device) < frames[:, None]).unsqueeze(2)  # [R, 2S, 1]
        mel = self._mel(x, mask.to(self.dtype), frames)
        return self._vocos(mel, mask, frames)

    def _mel(self, x: torch.Tensor, mask: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """Upstream ``DVAE.forward(mode='decode')`` without VQ, each conv input masked."""
        net = self.decoder.decoder
        conv_a, act, conv_b = net.conv_in
        y = self._conv(conv_b, act(self._conv(conv_a, x * mask)) * mask)
        for block in net.decoder_block:
            y = self._convnext(block, y, mask, frames, block.weight)
        y = self._conv(net.conv_out, y)
        return self._conv(self.decoder.out_conv, y * mask) * self.decoder.coef.to(self.dtype).view(1, 1, -1)

    def _vocos(self, mel: torch.Tensor, mask: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """Upstream ``Vocos.decode``: backbone in the decoder dtype, ISTFT in float32."""
        m = mask.to(self.dtype)
        backbone = self.vocos.backbone
        x = backbone.norm(self._conv(backbone.embed, mel * m))
        for block in backbone.convnext:
            x = self._convnext(block, x, m, frames, block.gamma)
        x = backbone.final_layer_norm(x)
        spec = self._linear(self.vocos.head.out, x).float()  # [R, F, n_fft + 2]
        magnitude, phase = spec.chunk(2, dim=2)
        magnitude = torch.exp(magnitude).clamp_(max=1e2)
        complex_spec = torch.polar(magnitude, phase)  # upstream's mag * (cos + 1j * sin), one pass not five
        return self._istft(complex_spec, mask.squeeze(2), frames)

    def _conv(self, conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
        """``conv`` over channels-last x [R, T, C_in] -> [R, T', C_out]."""
        return conv_as_gemm(conv, x) if self.fixed_shapes else conv(x.transpose(1, 2)).transpose(1, 2)

    def _linear(self, linear: nn.Linear, x: torch.Tensor, gelu: bool = False) -> torch.Tensor:
        """``linear`` over x [..., C_in], then GELU where ``gelu``: on the GPU's fixed tiles in the
        GEMM's own epilogue (``linear_in_tiles``), so the MLP's widest tensor is written once and
        read once rather than twice each."""
        if not self.fixed_shapes:
            return F.gelu(linear(x)) if gelu else linear(x)
        flat = linear_in_tiles(x.reshape(-1, x.shape[-1]), linear.weight, linear.bias, gelu=gelu)
        return flat.view(*x.shape[:-1], flat.shape[-1])

    def _convnext(self, block: nn.Module, x: torch.Tensor, mask: torch.Tensor, frames: torch.Tensor,
                  scale: torch.Tensor) -> torch.Tensor:
        """A ConvNeXt block (upstream's and Vocos's share this shape) over channels-last x, its
        branch's input masked: x + scale * branch. On CUDA in half precision the depthwise conv
        and the LayerNorm are one kernel, the residual add another (``waveform_kernels``)."""
        fused = self._kernels_on(x)
        if fused:
            y = waveform_kernels.dwconv_layer_norm(x, frames, block.dwconv, block.norm)
        else:
            y = waveform_kernels.dwconv_layer_norm_ops(x, mask, block.dwconv, block.norm)
        y = self._linear(block.pwconv2, self._linear(block.pwconv1, y, gelu=True))  # block.act: GELU
        return waveform_kernels.scaled_residual(x, y, scale) if fused else torch.addcmul(x, y, scale)

    def _kernels_on(self, x: torch.Tensor) -> bool:
        """Whether ``waveform_kernels``' Triton kernels run on ``x`` (CUDA, half precision's fixed
        shapes, ``FUSED``); elsewhere their ``*_ops`` twins do."""
        return x.is_cuda and self.fixed_shapes and waveform_kernels.FUSED and waveform_kernels.available()

    def _istft(self, spec: torch.Tensor, mask: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """``torch.istft(center=True)`` per row of spec [B, F, bins]: frames past a row's end
        (``frames`` [B]; ``mask`` [B, F]) add nothing, not even to its window envelope. Returns
        [B, (F - 1) * hop] with F the longest row's frame count. On CUDA in half precision the
        overlap-add, the envelope and the division are one kernel (``waveform_kernels``)."""
        window = self.window.to(spec.device)
        time_frames = _inverse_rfft(spec, self.n_fft, self.fixed_shapes)
        if self._kernels_on(spec):
            return waveform_kernels.overlap_add(time_frames, window, frames, self.hop)
        return waveform_kernels.overlap_add_ops(time_frames, window, mask, self.hop)


def chunk_rows(lengths: Sequence[int], budget: int, padded_steps: Callable[[int], int]) -> list[list[int]]:
    """Rows (indices into ``lengths``, GPT steps each) in groups of similar length whose padded
    size (rows x ``padded_steps`` of the longest) stays within ``budget``: shortest first, each
    group closed by the first row that would take it past the budget."""
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: lengths[i])
    chunks: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) + 1) * padded_steps(lengths[i]) > budget:
            chunks.append(current)
            current = []
        current.append(i)
    if current:
        chunks.append(current)
    return chunks


FFT_TILE = 4096  # frames per inverse FFT on the GPU: one cuFFT plan, ever


def _inverse_rfft(spec: torch.Tensor, n_fft: int, tiled: bool) -> torch.Tensor:
    """Each frame's ``torch.fft.irfft`` for spec [B, F, bins], as [B, F, n_fft]. ``tiled`` (the GPU) puts
    the B * F frames through in batches of exactly ``FFT_TILE`` (the last one zero-padded): cuFFT
    builds a plan for every new batch shape, ~10-30 ms of host time on the H200, during which
    the decode steps' queue runs dry; every decode chunk has its own (B, F)."""
    rows, count, bins = spec.shape
    flat = spec.reshape(rows * count, bins)
    if not tiled:
        return torch.fft.irfft(flat, n_fft, dim=-1).view(rows, count, n_fft)
    total = rows * count
    frames = flat.new_empty(total + (-total % FFT_TILE), n_fft, dtype=torch.float32)
    for start in range(0, total, FFT_TILE):
        tile = flat[start:start + FFT_TILE]
        if tile.shape[0] < FFT_TILE:
            tile = torch.cat([tile, tile.new_zeros(FFT_TILE - tile.shape[0], bins)])
        torch.fft.irfft(tile, n_fft, dim=-1, out=frames[start:start + FFT_TILE])
    return frames[:total].view(rows, count, n_fft)


GEMM_TILE = 8192  # frames per GEMM in the GPU decode path: one shape per weight, ever


def linear_in_tiles(x: torch.Tensor, weight: torch.Tensor,
                    bias: torch.Tensor | None = None, gelu: bool = False) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for x [M, K], as GEMMs of exactly ``GEMM_TILE`` rows (the
    last tile zero-padded). cuBLASLt picks an algorithm for every new GEMM shape, which costs
    ~30 ms of host time per shape on the H200 (torch.profiler) while the decode steps' queue
    runs dry; decode chunks vary in rows x frames, tiles do not.

    ``gelu`` (a bias needed): GELU applied by the GEMM itself (``torch._addmm_activation``, a
    cuBLASLt epilogue), not by a pass of its own over the output. On a GPU that is GELU's tanh
    form: the synthetic weights' waveforms 73.8 dB from the exact one's, where the fp16 path's
    own SNR is 58.4 dB (docs/benchmarks.md); on a CPU it is the exact GELU."""
    rows = x.shape[0]
    out = x.new_empty(rows + (-rows % GEMM_TILE), weight.shape[0])
    for start in range(0, rows, GEMM_TILE):
        tile = x[start:start + GEMM_TILE]
        if tile.shape[0] < GEMM_TILE:
            tile = F.pad(tile, (0, 0, 0, GEMM_TILE - tile.shape[0]))
        target = out[start:start + GEMM_TILE]
        if gelu:
            torch._addmm_activation(bias, tile, weight.t(), use_gelu=True, out=target)
        elif bias is None:
            torch.mm(tile, weight.t(), out=target)
        else:
            torch.addmm(bias, tile, weight.t(), out=target)
    return out[:rows]


def conv_as_gemm(conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
    """``conv`` over channels-last x [B, T, C_in] (zero padding, stride 1, no groups) as one GEMM:
    every row's sliding windows side by side [B * T', C_in * k] against the kernel
    [C_out, C_in * k]; channels-last out, [B, T', C_out]."""
    if conv.groups != 1 or conv.stride != (1,) or conv.padding_mode != "zeros":
        return conv(x.transpose(1, 2)).transpose(1, 2)
    rows, steps, channels = x.shape
    (k,), (dilation,), (pad,) = conv.kernel_size, conv.dilation, conv.padding
    span = (k - 1) * dilation + 1
    windows = F.pad(x, (0, 0, pad, pad)).unfold(1, span, 1)[..., ::dilation]  # [B, T', C_in, k] view
    out_steps = windows.shape[1]
    columns = windows.reshape(rows * out_steps, channels * k)
    y = linear_in_tiles(columns, conv.weight.reshape(conv.out_channels, channels * k), conv.bias)
    return y.view(rows, out_steps, conv.out_channels)


def to_numpy(waves: Sequence[torch.Tensor]) -> list[np.ndarray]:
    """Device waveforms to the host in one copy (not one sync per row)."""
    if not waves:
        return []
    joined = torch.cat([w.reshape(-1) for w in waves]).cpu().numpy()
    bounds = np.cumsum([w.numel() for w in waves])[:-1]
    return np.split(joined, bounds)  # views of one host array: no second copy
