"""A BERT training step's Linear and LayerNorm gradients with fewer, faster kernels: for the CUDA-graphed step.

A graphed Lab 2 step on an H100 spent about a tenth of its kernel time on bias gradients (``grad.sum(0)`` over
batch x tokens rows: ~13-17 us each where a GEMV with a ones vector takes 6-10 us,
benchmarks/training/lab2_step_pieces.json), another tenth on LayerNorm's backward (torch's gamma/beta kernel ~23-42 us
for 8192 rows of 128-512 features, ~0.4-0.8 TB/s) and another on casts. Here, for the exact ``nn.Linear`` and affine
``nn.LayerNorm`` modules of a model, inside ``fast_layers(model)``:

- Linear: the same forward (``F.linear`` on the same casts; an input several layers read cast once); the same
  products for the gradients, and the bias gradient as ``ones(1, rows) @ grad`` (cuBLAS, fp32 accumulation),
  each written in its tensor's dtype by the GEMM (autocast's path rounds them to bf16 and casts them back to
  fp32: a cast kernel per parameter and per fp32 activation per step).
- LayerNorm: torch's forward (``native_layer_norm``: the same output, mean and 1/std); the backward in one
  Triton kernel over blocks of rows: the input gradient and per-block gamma/beta partial sums (fixed order,
  so every run gives the same bits), summed by torch. Off a GPU (and without Triton) torch's backward runs.

Autocast's policy is kept by hand (a custom autograd function is not autocast): Linear inputs cast to the
autocast dtype, LayerNorm's to fp32, as ``torch.autocast`` does for ``linear`` and ``layer_norm``.
``LABKIT_STEP_KERNELS=0`` turns both off (the reference path: torch's modules).
"""
from __future__ import annotations

import contextlib
import functools
import os
import types

import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: torch's LayerNorm backward runs
    triton = None

from .triton_modes import in_mode, interpreter_scalar_compat, interpreting

ENV = "LABKIT_STEP_KERNELS"
VERSION = "fp32-grads+shared-casts+ln-bwd-3"  # in CUDA trials' cache keys (labkit.labs.lab2_objectives.trial_settings)
MAX_FEATURES = 8192  # one row block must fit a program's registers

_ADD = None  # the kernel's copy names a jit-decorated _add here (see _kernel)


def enabled(env: dict | None = None) -> bool:
    """``LABKIT_STEP_KERNELS`` (default on): 1/0; another value is an error naming the allowed ones."""
    value = (os.environ if env is None else env).get(ENV, "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"{ENV}={value!r}: allowed values are 0 (torch's modules), 1 (these kernels)")
    return value == "1"


def cache_key(graphed: bool) -> str:
    """What a CUDA trial's training step runs, for its cache key: these kernels (by version) only in a graphed
    step (``train._graphed_step``) and while enabled; torch's modules otherwise."""
    return VERSION if graphed and enabled() else "torch"


def _add(a, b):
    return a + b


if triton is not None:
    def _ln_bwd_kernel(x_ptr, dy_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, pw_ptr, pb_ptr, R, N,
                       BR: tl.constexpr, BN: tl.constexpr):
        """Rows [pid*BR, pid*BR + BR): dx = rstd * (w*dy - mean(w*dy) - xhat * mean(w*dy*xhat)) (torch's
        formula), and this block's sums of dy*xhat and dy per feature into row ``pid`` of the partials."""
        pid = tl.program_id(0)
        r = pid.to(tl.int64) * BR + tl.arange(0, BR)
        c = tl.arange(0, BN)
        rmask, cmask = r < R, c < N
        mask = rmask[:, None] & cmask[None, :]
        at = r[:, None] * N + c[None, :]
        x = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + at, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + r, mask=rmask, other=0.0)
        rstd = tl.load(rstd_ptr + r, mask=rmask, other=0.0)
        w = tl.load(w_ptr + c, mask=cmask, other=0.0).to(tl.float32)
        xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
        wdy = w[None, :] * dy
        inv_n = 1.0 / N  # fp32
        c1 = tl.reduce(xhat * wdy, 1, _ADD) * inv_n  # tl.sum is a helper jit-decorated at import (triton_modes)
        c2 = tl.reduce(wdy, 1, _ADD) * inv_n
        dx = (wdy - (xhat * c1[:, None] + c2[:, None])) * rstd[:, None]
        tl.store(dx_ptr + at, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        tl.store(pw_ptr + pid.to(tl.int64) * N + c, tl.reduce(dy * xhat, 0, _ADD), mask=cmask)
        tl.store(pb_ptr + pid.to(tl.int64) * N + c, tl.reduce(dy, 0, _ADD), mask=cmask)


@functools.cache
def _kernel(interp: bool):
    interpreter_scalar_compat()
    return triton.jit(in_mode(_ln_bwd_kernel, {"_ADD": triton.jit(_add)}))


def _blocks(n: int) -> tuple[int, int, int]:
    """(rows per program, padded features, warps): about 4096 elements a program."""
    bn = triton.next_power_of_2(n)
    return max(1, 4096 // bn), bn, 4 if bn <= 2048 else 8


def ln_backward_supported(x: torch.Tensor, weight: torch.Tensor | None) -> bool:
    return (triton is not None and weight is not None and (x.is_cuda or interpreting())
            and x.shape[-1] <= MAX_FEATURES and x.dtype in (torch.float32, torch.bfloat16, torch.float16))


def ln_backward(dy, x, weight, mean, rstd):
    """(dx, dweight, dbias) of ``layer_norm(x, weight, bias)`` over the last dim, from the forward's mean
    and 1/std (one value per row, fp32)."""
    n = x.shape[-1]
    x2, dy2 = x.reshape(-1, n).contiguous(), dy.reshape(-1, n).contiguous()
    rows = x2.shape[0]
    br, bn, warps = _blocks(n)
    programs = triton.cdiv(rows, br)
    dx = torch.empty_like(x2)
    pw = torch.empty((programs, n), dtype=torch.float32, device=x.device)
    pb = torch.empty_like(pw)
    _kernel(interpreting())[(programs,)](x2, dy2, weight.contiguous(), mean.reshape(-1).contiguous(),
                                          rstd.reshape(-1).contiguous(), dx, pw, pb, rows, n, BR=br, BN=bn,
                                          num_warps=warps)
    return dx.view(x.shape), pw.sum(0).to(weight.dtype), pb.sum(0).to(weight.dtype)


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, shape, eps):
        out, mean, rstd = torch.native_layer_norm(x, shape, weight, bias, eps)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        ctx.shape = shape
        return out

    @staticmethod
    def backward(ctx, dy):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        if len(ctx.shape) == 1 and ln_backward_supported(x, weight) and bias is not None:
            dx, dw, db = ln_backward(dy, x, weight, mean, rstd)
        else:  # torch's own backward (e.g. a CPU without the interpreter)
            dx, dw, db = torch.ops.aten.native_layer_norm_backward(
                dy.contiguous(), x, ctx.shape, mean, rstd, weight, bias, list(ctx.needs_input_grad[:3]))
        return (dx if ctx.needs_input_grad[0] else None, dw if ctx.needs_input_grad[1] else None,
                db if ctx.needs_input_grad[2] else None, None, None)


_ONES: dict = {}


def _ones(rows: int, like: torch.Tensor) -> torch.Tensor:
    """A (1, rows) ones row, kept per (rows, dtype, device) so a CUDA graph does not refill it every step;
    not stored while a graph is being captured (its memory belongs to that graph's pool)."""
    key = (rows, like.dtype, like.device)
    ones = _ONES.get(key)
    if ones is None:
        ones = torch.ones((1, rows), dtype=like.dtype, device=like.device)
        if not (like.is_cuda and torch.cuda.is_current_stream_capturing()):
            _ONES[key] = ones
    return ones


def _mm(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """a @ b with the result in ``dtype``: on CUDA straight from the GEMM's fp32 accumulator (no bf16 rounding,
    no cast kernel); elsewhere (no such CPU kernel) the product of the operands widened to ``dtype``."""
    if dtype == a.dtype:
        return torch.mm(a, b)
    if a.is_cuda:
        return torch.mm(a, b, out_dtype=dtype)
    return torch.mm(a.to(dtype), b.to(dtype))


_CASTS: dict | None = None  # inside fast_layers: id(x) -> (x, x in the autocast dtype, x's version)


def _cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x.to(dtype)``, made once per forward for an input several layers read (BERT's query, key and value
    all read the same fp32 LayerNorm output: autocast casts it three times)."""
    if x.dtype == dtype:
        return x
    hit = _CASTS.get(id(x)) if _CASTS is not None else None
    if hit is not None and hit[0] is x and hit[2] == x._version:
        return hit[1]
    out = x.to(dtype)
    if _CASTS is not None:
        _CASTS[id(x)] = (x, out, x._version)
    return out


class _Linear(torch.autograd.Function):
    """``F.linear(x.to(dtype), weight.to(dtype), bias.to(dtype))`` whose gradients come out in the dtypes of x
    and of the parameters (fp32 under autocast) straight from the GEMMs' fp32 accumulators: autocast's path
    rounds them to bf16 and then casts them to fp32, a cast kernel per tensor per step (~100 parameters in an
    8-layer model, and each fp32 activation a Linear reads). The bias gradient is a GEMV with a ones row."""

    @staticmethod
    def forward(ctx, x, weight, bias, dtype):
        xc, w = _cast(x, dtype), weight.to(dtype)
        ctx.save_for_backward(xc, w)
        ctx.x_dtype, ctx.param_dtype, ctx.has_bias = x.dtype, weight.dtype, bias is not None
        return F.linear(xc, w, bias.to(dtype) if bias is not None else None)

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dy2 = dy.reshape(-1, dy.shape[-1])
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = _mm(dy2, w, ctx.x_dtype).view(*dy.shape[:-1], w.shape[1])
        if ctx.needs_input_grad[1]:
            dw = _mm(dy2.t(), x.reshape(-1, x.shape[-1]), ctx.param_dtype)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = _mm(_ones(dy2.shape[0], dy2), dy2, ctx.param_dtype).view(-1)
        return dx, dw, db, None


def _autocast_dtype(t: torch.Tensor) -> torch.dtype | None:
    kind = t.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else None


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear`` (under autocast: inputs in the autocast dtype, as autocast casts them) with the gradients
    of ``_Linear``."""
    dtype = _autocast_dtype(x)
    if dtype is None:
        return _Linear.apply(x, weight, bias, weight.dtype)
    with torch.autocast(x.device.type, enabled=False):
        return _Linear.apply(x, weight, bias, dtype)


def layer_norm(x, shape, weight, bias, eps) -> torch.Tensor:
    """``F.layer_norm`` with the backward above (autocast runs layer norm in fp32: so here)."""
    shape = list(shape)
    if _autocast_dtype(x) is None:
        return _LayerNorm.apply(x, weight, bias, shape, eps)
    f32 = [t.float() if t is not None else None for t in (x, weight, bias)]
    with torch.autocast(x.device.type, enabled=False):
        return _LayerNorm.apply(*f32, shape, eps)


def _linear_forward(self, x):
    return linear(x, self.weight, self.bias)


def _layer_norm_forward(self, x):
    return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


@contextlib.contextmanager
def fast_layers(model: torch.nn.Module, on: bool | None = None):
    """Inside: ``model``'s exact ``nn.Linear`` and affine ``nn.LayerNorm`` modules run the functions above
    (subclasses, e.g. quantized or parametrized layers, keep their own forward). ``on`` None: ``enabled()``.
    Yields the number of modules switched. Gradients made inside keep their backward after the block."""
    global _CASTS
    swapped = []
    if on if on is not None else enabled():
        for m in model.modules():
            if type(m) is torch.nn.Linear:
                m.forward = types.MethodType(_linear_forward, m)
                swapped.append(m)
            elif type(m) is torch.nn.LayerNorm and m.elementwise_affine and m.bias is not None:
                m.forward = types.MethodType(_layer_norm_forward, m)
                swapped.append(m)
    outer, _CASTS = _CASTS, ({} if swapped else _CASTS)
    try:
        yield len(swapped)
    finally:
        _CASTS = outer
        for m in swapped:
            del m.forward
