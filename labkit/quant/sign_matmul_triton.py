"""The sign GEMM's two elementwise ends in Triton (``labkit.quant.sign_matmul``): the planes and the combine.

Planes: one pass from a tensor to the +-1 sign planes of its nearest level (``sign_matmul.planes``).

A binary format's value of x is the level nearest to it among 2^L sorted levels, and each level is a sum of
L scaled signs, so its planes are L fp16 tensors of +-1: plane i holds the i-th sign of each element's level.
The reference (torch) finds the level by ``searchsorted`` (int64 indices) and gathers an (..., L) table row
per element, then splits and masks NaN: several passes over L + 8 bytes an element. Here each element is
compared with the 2^L - 1 midpoints (the same fp32 numbers, so the same level), and its signs are read from
the tiny level table; NaN stays NaN. ``binary`` and ``binary_scaling`` are the case of one midpoint, 0.

Row signs: ``binary_scaling``'s per-row terms in one kernel: alpha = mean|x| over each row, accumulated in
float64 as the reference's ``mean(dtype=float64)`` (the sum times 1/K, as torch's CUDA mean), rounded to
float32, and the row's sign plane (torch took abs, a float64 copy, the reduction, a cast and the planes: five
passes over the activation, a third of that format's evaluation on an H100).

Combine: y = sum_ij sx_i sw_j^T * P_ij + bias from the GEMM's exact integer products in one pass (torch took a
conversion, an outer product, a multiplication and an addition per term, each a pass over rows x out).
"""
from __future__ import annotations

import functools

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the torch reference runs
    triton = None

from ..training.triton_modes import in_mode, interpreter_scalar_compat, interpreting

BLOCK = 1024
DTYPES = (torch.float32, torch.bfloat16, torch.float16)  # x dtypes whose fp32 value is the reference's r


_ADD = None  # the kernels' copies name a jit-decorated _add here (see _kernel)


def _add(a, b):
    return a + b


if triton is not None:
    def _planes_kernel(x_ptr, mid_ptr, lut_ptr, out_ptr, n, NMID: tl.constexpr, L: tl.constexpr,
                       BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        # searchsorted(mids, x, right=True): how many midpoints lie at or below x (NMID >= 1; no tl.zeros,
        # a helper jit-decorated at import, which the interpreter cannot call: labkit.training.triton_modes)
        idx = (x >= tl.load(mid_ptr)).to(tl.int32)
        for m in tl.static_range(1, NMID):
            idx += (x >= tl.load(mid_ptr + m)).to(tl.int32)
        nan = x != x
        for i in tl.static_range(L):
            e = tl.load(lut_ptr + idx * L + i)  # fp16 +-1; idx is valid on masked lanes too (x = 0 there)
            tl.store(out_ptr + i * n + offs, tl.where(nan, x.to(tl.float16), e), mask=mask)


    def _row_signs_kernel(x_ptr, s_ptr, out_ptr, R, K, BR: tl.constexpr, BK: tl.constexpr):
        r = tl.program_id(0).to(tl.int64) * BR + tl.arange(0, BR)
        rmask = r < R
        total = (r * 0).to(tl.float64)  # zeros without tl.zeros (see _planes_kernel)
        for k0 in range(0, K, BK):
            k = k0 + tl.arange(0, BK)
            mask = rmask[:, None] & (k < K)[None, :]
            x = tl.load(x_ptr + r[:, None] * K + k[None, :], mask=mask, other=0.0).to(tl.float64)
            total += tl.reduce(tl.abs(x), 1, _ADD)  # tl.sum is a helper decorated at import (see _kernel)
        inv = 1.0 / K.to(tl.float64)  # correctly rounded, as the host's 1.0 / K that torch's mean multiplies by
        tl.store(s_ptr + r, (total * inv).to(tl.float32), mask=rmask)
        for k0 in range(0, K, BK):  # the row again (from cache): its signs
            k = k0 + tl.arange(0, BK)
            mask = rmask[:, None] & (k < K)[None, :]
            x = tl.load(x_ptr + r[:, None] * K + k[None, :], mask=mask, other=0.0).to(tl.float32)
            e = tl.where(x >= 0, 1.0, -1.0)
            tl.store(out_ptr + r[:, None] * K + k[None, :], tl.where(x != x, x, e).to(tl.float16), mask=mask)


    def _combine_kernel(p_ptr, xs_ptr, ws_ptr, b_ptr, y_ptr, R, O, LX: tl.constexpr, LW: tl.constexpr,
                        XS_ROW: tl.constexpr, WS_ROW: tl.constexpr, HAS_BIAS: tl.constexpr, BR: tl.constexpr,
                        BO: tl.constexpr):
        r = tl.program_id(0).to(tl.int64) * BR + tl.arange(0, BR)
        o = tl.program_id(1) * BO + tl.arange(0, BO)
        rmask, omask = r < R, o < O
        mask = rmask[:, None] & omask[None, :]
        acc = (r[:, None] * 0 + o[None, :] * 0).to(tl.float32)  # zeros without tl.zeros (see _planes_kernel)
        for i in tl.static_range(LX):
            if XS_ROW:
                sx = tl.load(xs_ptr + i * R + r, mask=rmask, other=0.0)[:, None]
            else:
                sx = tl.load(xs_ptr + i)
            for j in tl.static_range(LW):
                if WS_ROW:
                    sw = tl.load(ws_ptr + j * O + o, mask=omask, other=0.0)[None, :]
                else:
                    sw = tl.load(ws_ptr + j)
                # prod row i*R + r, column j*O + o: (LX*R, LW*O) from one GEMM of stacked planes
                p = tl.load(p_ptr + (i * R + r)[:, None] * (LW * O) + (j * O + o)[None, :], mask=mask, other=0.0)
                acc += p.to(tl.float32) * (sx * sw)
        if HAS_BIAS:
            acc += tl.load(b_ptr + o, mask=omask, other=0.0)[None, :]
        tl.store(y_ptr + r[:, None] * O + o[None, :], acc, mask=mask)


@functools.cache
def _kernel(interpreting: bool, name: str = "_planes_kernel"):
    """This TRITON_INTERPRET mode's copy of a kernel, its helper decorated in that mode
    (labkit.training.triton_modes)."""
    interpreter_scalar_compat()  # range() over the runtime K in Triton 3.6's interpreter
    helpers = {"_ADD": triton.jit(_add)}
    return triton.jit(in_mode(globals()[name], helpers), do_not_specialize=("n", "R", "O", "K"))


def why_unsupported(x: torch.Tensor, mids_dtype: torch.dtype = torch.float32) -> str | None:
    if triton is None:
        return "triton is not installed"
    if not (x.is_cuda or interpreting()):
        return f"x is on {x.device.type} (the kernel runs on CUDA or in Triton's interpreter)"
    if x.dtype not in DTYPES or mids_dtype != torch.float32:
        return f"x {x.dtype}, midpoints {mids_dtype}: the kernel takes x in {DTYPES} with float32 midpoints"
    return None


def planes(x: torch.Tensor, mids: torch.Tensor, lut: torch.Tensor) -> torch.Tensor:
    """(L, *x.shape) fp16: ``lut[searchsorted(mids, x, right=True)]`` per element (lut (2^L, L) fp16), NaN
    where x is NaN."""
    xc = x.contiguous()
    L = lut.shape[1]
    out = torch.empty((L, *x.shape), dtype=torch.float16, device=x.device)
    n = xc.numel()
    if n:
        _kernel(interpreting())[(triton.cdiv(n, BLOCK),)](
            xc, mids.contiguous(), lut.to(torch.float16).contiguous(), out, n,
            NMID=mids.numel(), L=L, BLOCK=BLOCK, num_warps=4)
    return out


def row_signs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(alpha (*x.shape[:-1], 1) fp32 = mean|x| per row via float64, planes (1, *x.shape) fp16 +-1, NaN kept)."""
    xc = x.contiguous()
    k = x.shape[-1]
    rows = xc.numel() // k if k else 0
    alpha = torch.empty((*x.shape[:-1], 1), dtype=torch.float32, device=x.device)
    out = torch.empty((1, *x.shape), dtype=torch.float16, device=x.device)
    if rows and k:
        BR = 8
        BK = min(512, triton.next_power_of_2(k))
        _kernel(interpreting(), "_row_signs_kernel")[(triton.cdiv(rows, BR),)](
            xc, alpha, out, rows, k, BR=BR, BK=BK, num_warps=4)
    return alpha, out


def combine(prod: torch.Tensor, xs: torch.Tensor, ws: torch.Tensor, bias: torch.Tensor | None, rows: int,
            out: int) -> torch.Tensor:
    """(rows, out) fp32: sum_ij xs[i] ws[j] prod[i*rows + r, j*out + o] (+ bias[o]). ``xs`` (LX, rows) per
    row or (LX, 1) per tensor (one row: either, the same numbers), ``ws`` (LW, out) or (LW, 1), fp32; ``prod``
    fp16 or fp32."""
    lx, lw = xs.shape[0], ws.shape[0]
    y = torch.empty((rows, out), dtype=torch.float32, device=prod.device)
    if rows and out:
        BR, BO = 32, 128
        _kernel(interpreting(), "_combine_kernel")[(triton.cdiv(rows, BR), triton.cdiv(out, BO))](
            prod.contiguous(), xs.contiguous(), ws.contiguous(), bias if bias is not None else xs, y, rows, out,
            LX=lx, LW=lw, XS_ROW=xs.shape[1] > 1,
            WS_ROW=ws.shape[1] > 1, HAS_BIAS=bias is not None, BR=BR, BO=BO, num_warps=4)
    return y
