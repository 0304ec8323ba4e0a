"""A layer's elementwise work on the GPU in Triton kernels: residual add + RMSNorm, SiLU × up, and
a prefill's RoPE with its split into heads.

Between its GEMMs a Llama layer adds the residual, normalises (RMSNorm), and gates the MLP
(``silu(gate) * up``). In PyTorch that is ~8 kernels per layer (the adds, RMSNorm's
square/mean/rsqrt/multiplies, SiLU and the multiply), each reading and writing a [B, C] tensor
that fits in L2: at 1,024 decode rows they took ~20 % of a step as launch and latency, not
bytes (docs/engine.md). Here one program per row does each fused op in float32 and writes the
compute dtype once:

- ``add_rms_norm(x, delta, weight)`` -> (x + delta, rms_norm(x + delta) * weight)
- ``silu_mul(gate_up, x)`` -> silu(g) * u, (g, u) = gate_up * rms_scale(x): gate_up projected from the
  residual x itself by weights holding the norm's own, normalised here (gpt.py's deferred norms)
- ``rope_heads(qkv, x, cos, sin, heads)`` -> the same normalisation, RoPE'd q and k, and v, each
  [B, H, L, D] (a prefill's)
- ``code_embed(codes, table, vocab)`` -> the sum of a row's codebook embeddings (a decode step's
  input): the gather, float32 sum and rounding of ``TokenEmbeddings.code_embed`` in one pass, not 5

Only on CUDA in half precision (``gpt.py`` decides); elsewhere ``gpt.py`` runs the PyTorch ops.
The tests run these kernels under Triton's CPU interpreter against those ops.
"""

from __future__ import annotations

import torch

from pipeline.engine.triton_import import tl, triton

if triton is not None:  # pragma: no cover
    from pipeline.engine.attention_block import rms_scale

    @triton.jit
    def _add_rms_norm_kernel(x_ptr, delta_ptr, weight_ptr, sum_ptr, norm_ptr, eps, width,
                             stride_x, stride_d, stride_s, stride_n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        inside = cols < width
        weight = tl.load(weight_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * stride_x + cols, mask=inside, other=0.0).to(tl.float32)
        delta = tl.load(delta_ptr + row * stride_d + cols, mask=inside, other=0.0).to(tl.float32)
        # rounded to the compute dtype first, as ``x + delta`` in PyTorch is: the residual stream
        # and the normalised copy then agree with the unfused path
        total = (x + delta).to(sum_ptr.dtype.element_ty)
        tl.store(sum_ptr + row * stride_s + cols, total, mask=inside)
        total = total.to(tl.float32)
        mean_square = tl.sum(total * total, 0) / width
        normed = total * tl.rsqrt(mean_square + eps)
        normed = normed.to(norm_ptr.dtype.element_ty).to(tl.float32) * weight
        tl.store(norm_ptr + row * stride_n + cols, normed.to(norm_ptr.dtype.element_ty), mask=inside)

    @triton.jit
    def _silu_mul_kernel(gate_up_ptr, x_ptr, out_ptr, eps, width, x_width, stride_g, stride_x, stride_o,
                         BLOCK: tl.constexpr, BLOCK_X: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        inside = cols < width
        norm = rms_scale(x_ptr + row * stride_x, x_width, eps, BLOCK_X)  # the MLP input's RMSNorm
        gate = tl.load(gate_up_ptr + row * stride_g + cols, mask=inside, other=0.0).to(tl.float32) * norm
        up = tl.load(gate_up_ptr + row * stride_g + width + cols, mask=inside, other=0.0).to(tl.float32) * norm
        # silu rounded to the compute dtype before the product, as F.silu(gate) * up does
        silu = (gate / (1.0 + tl.exp(-gate))).to(out_ptr.dtype.element_ty).to(tl.float32)
        tl.store(out_ptr + row * stride_o + cols, (silu * up).to(out_ptr.dtype.element_ty), mask=inside)


    @triton.jit
    def _rope_heads_kernel(qkv_ptr, x_ptr, cos_ptr, sin_ptr, q_ptr, k_ptr, v_ptr, eps, width, stride_qkv,
                           stride_x, heads, HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_X: tl.constexpr):
        at = tl.program_id(0).to(tl.int64)  # one position of one row: row * width + position
        row = at // width
        position = at % width
        head = tl.arange(0, HEADS)[:, None]  # HEADS: ``heads`` rounded up to a power of 2
        dims = tl.arange(0, HEAD_DIM)[None, :]
        inside = (head < heads) & (dims < HEAD_DIM)
        partner = (dims + HEAD_DIM // 2) % HEAD_DIM  # rotate_half: [-x2, x1]
        sign = tl.where(dims < HEAD_DIM // 2, -1.0, 1.0)
        cos = tl.load(cos_ptr + at * HEAD_DIM + dims).to(tl.float32)
        sin = tl.load(sin_ptr + at * HEAD_DIM + dims).to(tl.float32)
        q_in = qkv_ptr + at * stride_qkv + head * HEAD_DIM
        k_in = q_in + heads * HEAD_DIM
        v_in = k_in + heads * HEAD_DIM
        out = ((row * heads + head) * width + position) * HEAD_DIM + dims  # [B, H, L, D]
        kind = q_ptr.dtype.element_ty
        norm = rms_scale(x_ptr + at * stride_x, heads * HEAD_DIM, eps, BLOCK_X)  # the input's RMSNorm
        q = tl.load(q_in + dims, mask=inside).to(tl.float32) * cos
        q += sign * tl.load(q_in + partner, mask=inside).to(tl.float32) * sin
        tl.store(q_ptr + out, (q * norm).to(kind), mask=inside)
        k = tl.load(k_in + dims, mask=inside).to(tl.float32) * cos
        k += sign * tl.load(k_in + partner, mask=inside).to(tl.float32) * sin
        tl.store(k_ptr + out, (k * norm).to(kind), mask=inside)
        tl.store(v_ptr + out, (tl.load(v_in + dims, mask=inside).to(tl.float32) * norm).to(kind), mask=inside)


    @triton.jit
    def _code_embed_kernel(codes_ptr, table_ptr, out_ptr, vocab, width, CODEBOOKS: tl.constexpr,
                           BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        inside = cols < width
        total = tl.zeros([BLOCK], tl.float32)
        for book in tl.static_range(CODEBOOKS):  # codebook q's table follows q - 1's
            code = tl.load(codes_ptr + row * CODEBOOKS + book).to(tl.int64) + book * vocab
            total += tl.load(table_ptr + code * width + cols, mask=inside, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * width + cols, total.to(out_ptr.dtype.element_ty), mask=inside)


def available() -> bool:
    return triton is not None


def rope_heads(qkv: torch.Tensor, residual: torch.Tensor, eps: float, cos: torch.Tensor, sin: torch.Tensor,
               heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A prefill's fused projection qkv [B, L, 3 * H * D] of the ``residual`` rows [B, L, C] (by
    weights holding the input norm's) as normalised, RoPE'd queries and keys and the values, each
    [B, H, L, D] contiguous (what SDPA and the cache read), in one pass: the RMSNorm and RoPE in
    float32 from cos, sin [B, 1, L, D], as the decode kernels do them. The PyTorch ops
    (``layer_ops.apply_rope`` on permuted views, then copies to the heads' layout) ran six
    strided kernels a layer: ~7.6 of an H100's 23.5 ms for an admission of 256 rows x 64."""
    rows, width, _ = qkv.shape
    dim = cos.shape[-1]
    qkv, residual = qkv.contiguous(), residual.reshape(rows * width, -1)
    cos, sin = cos.expand(rows, 1, width, dim).contiguous(), sin.expand(rows, 1, width, dim).contiguous()
    q, k, v = (torch.empty(rows, heads, width, dim, dtype=qkv.dtype, device=qkv.device) for _ in range(3))
    if rows * width:
        _rope_heads_kernel[(rows * width,)](qkv, residual, cos, sin, q, k, v, eps, width, qkv.stride(1),
                                            residual.stride(0), heads, HEADS=triton.next_power_of_2(heads),
                                            HEAD_DIM=dim, BLOCK_X=triton.next_power_of_2(heads * dim), num_warps=4)
    return q, k, v


def add_rms_norm(x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(x + delta, RMSNorm(x + delta) * weight) for x, delta [..., C]: one pass, two new tensors."""
    width = x.shape[-1]
    rows_x, rows_d = x.reshape(-1, width), delta.reshape(-1, width)
    total = torch.empty_like(rows_x)
    normed = torch.empty_like(rows_x)
    _add_rms_norm_kernel[(rows_x.shape[0],)](
        rows_x, rows_d, weight, total, normed, eps, width, rows_x.stride(0), rows_d.stride(0),
        total.stride(0), normed.stride(0), BLOCK=triton.next_power_of_2(width), num_warps=4)
    return total.view(x.shape), normed.view(x.shape)


SILU_BLOCK = 1024  # columns per program: the MLP's 3,072 in three programs a row


def silu_mul(gate_up: torch.Tensor, residual: torch.Tensor, eps: float) -> torch.Tensor:
    """silu(gate) * up for the fused projection's output [..., 2I] (gate first) of the
    ``residual`` rows [..., C] by weights holding the MLP norm's, both halves normalised by the
    rows' RMSNorm first: [..., I]."""
    width = gate_up.shape[-1] // 2
    rows = gate_up.reshape(-1, 2 * width)
    inputs = residual.reshape(rows.shape[0], -1)
    out = torch.empty((rows.shape[0], width), dtype=gate_up.dtype, device=gate_up.device)
    block = min(SILU_BLOCK, triton.next_power_of_2(width))
    _silu_mul_kernel[(rows.shape[0], triton.cdiv(width, block))](
        rows, inputs, out, eps, width, inputs.shape[1], rows.stride(0), inputs.stride(0), out.stride(0),
        BLOCK=block, BLOCK_X=triton.next_power_of_2(inputs.shape[1]), num_warps=4)
    return out.view(*gate_up.shape[:-1], width)


def code_embed(codes: torch.Tensor, table: torch.Tensor, vocab: int) -> torch.Tensor:
    """codes [..., Q] (each < ``vocab``) -> [..., C]: the sum of their rows of ``table`` [Q * vocab,
    C] (codebook q's rows from q * vocab), summed in float32, rounded to the table's dtype once."""
    books, width = codes.shape[-1], table.shape[-1]
    flat = codes.reshape(-1, books).contiguous()
    out = torch.empty(flat.shape[0], width, dtype=table.dtype, device=table.device)
    if flat.shape[0]:
        _code_embed_kernel[(flat.shape[0],)](flat, table, out, vocab, width, CODEBOOKS=books,
                                             BLOCK=triton.next_power_of_2(width), num_warps=4)
    return out.view(*codes.shape[:-1], width)
