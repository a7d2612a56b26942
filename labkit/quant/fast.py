"""bf16 QAT: fake-quantized operands that are exact in bf16 feed a bf16 matmul under autocast.

``QuantLinear`` normally leaves bf16 autocast and runs in fp32 (so that formats wider than bf16 are
simulated exactly), with several unfused elementwise passes per fake quantization. Where every format of
the layer produces only bf16 values (``NumberFormat.why_not_bf16()`` is None: integers of <= 9 bits,
minifloats with <= 8 significant bits, MXINT8, in range), nothing is lost by staying in bf16: the quantized
operands are the same numbers, the matmul still accumulates in fp32, and only the result is rounded to
bf16 as for any Linear under autocast. ``QuantLinear(qat_matmul="bf16")`` does that, and computes each
fake quantization and its straight-through mask in one pass (``torch.compile`` of the formats' own
reference formulas; ``compile=False`` runs the same formulas eagerly).

The fp32 path stays the oracle (tests/quant/test_qat_bf16.py compares values and gradients). Roles without a
format (e.g. an unquantized input) are cast to bf16 as autocast casts any Linear's operands.

Inference (no gradient wanted) on CUDA: each fake quantization is one Triton pass of the format's formula
(``labkit.quant.fake_quant_triton``, runtime parameters: one compile per family) writing the dtype the
matmul reads; its first result per format is checked against the reference formula, and a format whose
kernel differs or fails runs the reference from then on, with a warning. ``LABKIT_TRITON_FAKE_QUANT=0``
(``kernel_check.TRITON_FAKE_QUANT``, shared with the sign GEMM) turns the kernels off (the reference formulas,
eager or compiled as below).

A format whose hook holds a function other than labkit's (a student's, put there by ``labkit.exercises``'
``installed()``: ``NumberFormat.replaced``) takes none of these paths while it is there (``why_reference``): no
Triton kernel, no compiled or fused formula, no memoised result; its values come from ``fmt.quantize_values``,
eagerly, so that function computes every one of them on every device (the STE mask stays labkit's ``pass_mask``).
"""
from __future__ import annotations

import os
import warnings
import weakref

import torch

from . import fake_quant_triton, kernel_check
from .formats.base import NumberFormat, Quantizer, rowwise_values
from .kernel_check import same_bits

MODES = ("fp32", "bf16")
_COMPILED: dict = {}
_VALUES: dict = {}  # format -> compiled quantize_values (inference: no STE mask); None: runs eagerly
# QuantLinear compiles its inference fake quantization only where asked: on an H100 (torch 2.11) compiling
# one format took ~11 s against a ~1 s Lab 3 trial, and a search meets ~80 formats in every worker
INFERENCE_COMPILE = os.environ.get("LABKIT_INFERENCE_COMPILE", "0") == "1"
_REASONS: dict = {}  # (role, format, quantizer type, inference) -> why not bf16; asked on every forward
_TRITON_CHECKED: set = set()  # (format, out dtype) whose kernel result matched the reference once
_TRITON_OFF: dict = {}  # format -> why its kernel is not used (it differed or failed)
# the last kernel result: (weakref to the input, its version, format, out dtype, result). Query, key and value
# Linears quantize the same input tensor in the same format (uniform trials): computed once, not three times
_LAST: list = [None]


def why_reference(fmt: NumberFormat) -> str | None:
    """Why ``fmt`` must run its own ``quantize_values`` eagerly, none of this module's fast paths (the Triton
    kernel, the compiled and fused formulas, the memoised last result): a function other than labkit's sits at
    its hook (``NumberFormat.replaced``: a student's, installed by ``labkit.exercises``), and that function is
    what computes the format's values while it is there, on every device. None: the fast paths may run."""
    where = type(fmt).replaced()
    return f"{fmt.name}: another function than labkit's is installed at {where}; it computes every value" if where \
        else None


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"qat_matmul={mode!r}: allowed values are {', '.join(map(repr, MODES))}")
    return mode


def _values_and_mask(fmt: NumberFormat, x: torch.Tensor):
    """The reference formulas: fp32 values (exact in bf16) as bf16, and the STE mask (None: pass all)."""
    xf = x.float()  # exact from bf16; the fp32 path quantizes x.float() too
    return fmt.quantize_values(xf).to(torch.bfloat16), fmt.pass_mask(xf)


def fused_fn(fmt: NumberFormat, compile: bool = True):
    """``x -> (bf16 values, mask)`` for ``fmt``, compiled once per format (dynamic shapes)."""

    def fake_quant(x):
        return _values_and_mask(fmt, x)

    if not compile or why_reference(fmt):  # an installed function runs as it is, never traced
        return fake_quant
    if fmt not in _COMPILED:
        # a code object of its own per format: dynamo caches, and counts recompiles against its limit, per code
        fake_quant.__code__ = fake_quant.__code__.replace(co_name=f"fake_quant_{len(_COMPILED)}")
        _COMPILED[fmt] = torch.compile(fake_quant, dynamic=True)
    return _COMPILED[fmt]


def _run(fmt, fn, x: torch.Tensor):
    """``fn`` on ``x`` seen as a plain 2-D tensor (rows, last dim): inputs, weights and biases then share
    one dynamic-shape graph per format and dtype instead of one per rank and Parameter-ness."""
    if x.numel() == 0:
        return _values_and_mask(fmt, x)
    q, mask = fn(x.detach().reshape(-1, x.shape[-1]) if x.dim() else x.detach().reshape(1, 1))
    return q.reshape(x.shape), (mask.reshape(x.shape) if mask is not None else None)


class _FusedFakeQuant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, fmt, fn):
        q, mask = _run(fmt, fn, x)
        ctx.has_mask = mask is not None
        ctx.x_dtype = x.dtype
        ctx.save_for_backward(*([mask] if ctx.has_mask else []))
        return q

    @staticmethod
    def backward(ctx, grad):
        if ctx.has_mask:
            grad = grad * ctx.saved_tensors[0]
        return grad.to(ctx.x_dtype), None, None


def fake_quantize_bf16(fmt: NumberFormat, x: torch.Tensor, compile: bool = True) -> torch.Tensor:
    """``fmt.fake_quantize(x.float())`` as bf16 (the same values) with the same clipped-STE gradient (a format
    with an installed function: that function, eagerly; ``why_reference``)."""
    compile = compile and why_reference(fmt) is None
    if not (torch.is_grad_enabled() and x.requires_grad):  # no STE mask: nobody asks for a gradient
        q = triton_values(fmt, x, torch.bfloat16)
        if q is not None:
            return q
        if not compile:
            return rowwise_values(fmt, x.detach().float()).to(torch.bfloat16)
        return _run(fmt, fused_fn(fmt, compile), x)[0]
    return _FusedFakeQuant.apply(x, fmt, fused_fn(fmt, compile))


def triton_values(fmt: NumberFormat, x: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor | None:
    """``fmt.quantize_values(x.float()).to(out_dtype)`` by the one-pass kernel, or None where it does not
    apply (kernels off, not CUDA, an unsupported format or dtype, a format whose kernel was found wrong, or one
    with an installed function: ``why_reference``).

    The first call per (format, out_dtype) also computes the reference and compares the bits; a difference
    or a failure turns the kernel off for that format (warning, ``kernel_check.FALLBACKS``) and the reference is
    returned.
    """
    if not (kernel_check.TRITON_FAKE_QUANT and (x.is_cuda or fake_quant_triton.interpreting())) or fmt in _TRITON_OFF:
        return None
    if why_reference(fmt):  # before the memo too: a result of labkit's kernel is not the installed function's
        return None
    last = _LAST[0]
    if last is not None and last[0]() is x and last[1] == x._version and last[2] == fmt and last[3] == out_dtype:
        return last[4]
    # activations only: a parameter can change in place without a version bump (fused optimizers)
    memo = not isinstance(x, torch.nn.Parameter)
    if fake_quant_triton.why_unsupported(fmt, x, out_dtype) or x.numel() == 0:
        return None
    try:
        got = fake_quant_triton.quantize(fmt, x, out_dtype)
    except Exception as err:  # a compiler problem for one family must not stop a search: the reference is exact
        want, why = fmt.quantize_values(x.detach().float()).to(out_dtype), kernel_check.failed(err)
    else:
        if (fmt, out_dtype) not in _TRITON_CHECKED:
            want = fmt.quantize_values(x.detach().float()).to(out_dtype)
            if not same_bits(got, want):
                why = f"differs from the reference in {int((got != want).sum())} of {want.numel()} values"
                got = None
            else:
                _TRITON_CHECKED.add((fmt, out_dtype))
        if got is not None:
            if memo:
                _LAST[0] = (weakref.ref(x), x._version, fmt, out_dtype, got)
            return got
    _TRITON_OFF[fmt] = why
    kernel_check.FALLBACKS[f"{fmt.describe()} (Triton)"] = why
    warnings.warn(f"one-pass Triton fake quantization of {fmt.describe()} on {x.device.type} {why}; that "
                  "format runs the reference formula here (the same values, more passes)", RuntimeWarning,
                  stacklevel=3)
    return want


def values_fn(fmt: NumberFormat):
    """``x -> fmt.quantize_values(x)`` compiled once per format (rows dynamic): the inference path."""
    if _VALUES.get(fmt) is None:
        def quant_values(x):
            return fmt.quantize_values(x)

        quant_values.__code__ = quant_values.__code__.replace(co_name=f"quant_values_{len(_VALUES)}")
        # dynamic=None, rows marked dynamic: the format's ints stay constants (with dynamic=True dynamo made
        # them symbolic and a float64 integer format's bound 2^31 overflowed); one graph per last dimension
        _VALUES[fmt] = torch.compile(quant_values, dynamic=None)
    return _VALUES[fmt]


def quantize_values(fmt: NumberFormat, x: torch.Tensor, compile: bool = True) -> torch.Tensor:
    """``fmt.quantize_values(x)``, the same bits, in one pass: the Triton kernel on CUDA where it supports
    the format (``triton_values``), else compiled where ``compile``, else eager. A fake quantization whose
    gradient nobody needs (evaluation, PTQ) skips the STE and its extra passes.

    The first call per format checks the compiled result against the eager reference on its own input;
    a format whose compilation fails or differs runs eagerly from then on, with a warning saying so. A format
    with an installed function runs it eagerly (``why_reference``).
    """
    if why_reference(fmt):
        return rowwise_values(fmt, x)
    if x.dtype == torch.float32:  # the kernel computes from x.float(): the same as the format only for fp32
        q = triton_values(fmt, x, torch.float32)
        if q is not None:
            return q
    if not compile or x.numel() == 0 or _VALUES.get(fmt, True) is None:
        return rowwise_values(fmt, x)
    rows = x.detach().reshape(-1, x.shape[-1]) if x.dim() else x.detach().reshape(1, 1)
    if rows.shape[0] > 1:
        torch._dynamo.mark_dynamic(rows, 0)
    if fmt in _VALUES:
        try:
            return _VALUES[fmt](rows).reshape(x.shape)
        except Exception as err:  # a new shape recompiles, and may fail where the first did not
            want, why = fmt.quantize_values(rows), kernel_check.failed(err)
    else:
        want = fmt.quantize_values(rows)
        try:
            got, why = values_fn(fmt)(rows), None
            if not same_bits(got, want):
                why = f"differs from the reference in {int((got != want).sum())} of {want.numel()} values"
        except Exception as err:  # an inductor bug for one format must not stop a search: eager is exact
            why = kernel_check.failed(err)
    if why:
        _VALUES[fmt] = None
        kernel_check.FALLBACKS[fmt.describe()] = why
        warnings.warn(f"compiled fake quantization of {fmt.describe()} on {x.device.type} {why}; that format "
                      "runs eagerly here (the same values, more passes)", RuntimeWarning, stacklevel=2)
    return want.reshape(x.shape)


def why_not(layer, inference: bool = False) -> str | None:
    """Why a ``QuantLinear`` cannot take the bf16 path (None: it can), whatever autocast does.

    ``inference`` (no gradient: evaluation, PTQ): a format qualifies when its values of magnitude >= 2^-126
    are bf16 values (``why_not_bf16(normal_only=True)``); its float32-subnormal values (below 2^-126, which
    activations and weights never hold in practice) then round to bf16's multiples of 2^-133, each moving a
    product by less than 2^-134 |w|, far below the bf16 rounding of the layer's output. Block formats with
    8-bit shared fields (Lab 3's) qualify only so. Training keeps the exact rule: QAT's gradients see every
    value the reference does."""
    for role in ("data_in", "weight", "bias"):
        fmt = getattr(layer.config, role)
        quantizer = getattr(layer, f"q_{role}")
        if fmt is None or quantizer is None:
            continue
        key = (role, fmt, type(quantizer), inference)
        if key not in _REASONS:
            if not (isinstance(quantizer, Quantizer) and quantizer.plain()):  # learnable or mode-dependent
                _REASONS[key] = f"{role}: {type(quantizer).__name__} is not a plain format quantizer"
            else:
                reason = fmt.why_not_bf16(normal_only=inference)
                _REASONS[key] = f"{role}: {reason}" if reason else None
        if _REASONS[key]:
            return _REASONS[key]
    return None
