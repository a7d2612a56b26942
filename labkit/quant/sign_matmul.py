"""The binary formats' Linear as an exact sign GEMM (evaluation under bf16 autocast on CUDA).

``binary``, ``binary_scaling`` and ``binary_residual_sign`` quantize a tensor to a sum of scaled sign
tensors: ``q = sum_i a_i * S_i`` with ``S_i`` in {-1, +1} (NaN where x is NaN) and ``a_i`` one scale per row
(binary_scaling per channel) or per tensor. Their values are not bf16 values (the scales are fp32), so the
reference multiplies them in fp32, which on an H100 made these formats' Lab 3 evaluation 3.4-3.5x the
unquantized one. But the product factorises:

    x_q @ w_q^T = sum_ij a_i b_j^T * (S_i @ T_j^T)

and ``S_i @ T_j^T`` is a sum of K terms +-1: every partial sum is an integer of magnitude <= K, which fp16
holds exactly up to 2048, so an fp16 GEMM gives it exactly whatever its accumulation order or precision
(K is cut into slices of at most 2048 whose exact sums add in fp32). The scales then multiply in fp32. The
result differs from the fp32 reference only by fp32 rounding (the reference rounds each of its K products
and sums; here two multiplications round), tests/quant/test_sign_matmul.py checks both against float64.

``QuantLinear`` takes this path for a forward without gradient under bf16 autocast with
``qat_matmul="bf16"`` (the search's PTQ) on CUDA (``DEVICES``), where both its input and weight formats
are binary ones (``why_not``); training and QAT keep the reference.
"""
from __future__ import annotations

import warnings

import torch

from . import kernel_check, sign_matmul_triton
from .kernel_check import same_bits

EXACT_K = 2048  # fp16 holds every integer of magnitude <= 2^11
DEVICES = ("cuda",)  # where the fp16 GEMM is fast; the tests add "cpu" to run the dispatch there
_CHECKED: set = set()  # numbers of planes (and "combine") whose kernel result matched the reference once
_KERNEL_OFF: dict = {}  # "planes" / "row signs" / "combine" -> why that kernel is off (it differed or failed)


def terms(quantizer, x: torch.Tensor):
    """``quantizer``'s value of ``x`` as (scales, planes): q = sum_i scales[i] * planes[i], or None."""
    fn = getattr(quantizer, "sign_terms", None)
    return fn(x) if fn is not None else None


def why_not(layer) -> str | None:
    """Why ``layer`` (a QuantLinear) cannot take the sign GEMM (None: it can)."""
    for role in ("data_in", "weight"):
        quantizer = getattr(layer, f"q_{role}")
        if quantizer is None or not getattr(quantizer, "has_sign_terms", lambda: False)():
            return f"{role}: not a binary format"
    return None


def signs(x: torch.Tensor) -> torch.Tensor:
    """(1, *x.shape) fp16: +1 where x >= 0 (0 and -0.0 included), -1 where x < 0, NaN where x is NaN."""
    zero, lut = _sign_table(x.device, torch.promote_types(x.dtype, torch.float32))
    return planes(x, zero, lut)


_TABLES: dict = {}  # (device, dtype) -> signs' (midpoint 0, table [[-1], [+1]]): made once, not per layer call


def _sign_table(device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    key = (device, dtype)
    if key in _TABLES:
        return _TABLES[key]
    zero = torch.zeros(1, dtype=dtype, device=device)
    # made on the device: a tensor from Python data is a host copy, which a CUDA graph capture refuses
    lut = (torch.arange(2, device=device, dtype=torch.float16) * 2 - 1)[:, None]
    if not (device.type == "cuda" and torch.cuda.is_current_stream_capturing()):  # a graph's pool is its own
        _TABLES[key] = (zero, lut)
    return zero, lut


def row_signs(x: torch.Tensor, scale) -> tuple[torch.Tensor, torch.Tensor]:
    """(``scale(x)``: binary_scaling's mean|x| per row via float64, ``signs(x)``) in one Triton pass where it
    runs; its first result per input dtype must equal the reference's bits (``_checked``)."""
    def reference():
        return scale(x), signs(x)

    if (not kernel_check.TRITON_FAKE_QUANT or "row signs" in _KERNEL_OFF or x.dim() == 0 or x.shape[-1] == 0
            or sign_matmul_triton.why_unsupported(x)):
        return reference()

    def differs(got, want):
        for name, g, w in zip(("scales", "signs"), got, want):
            if not same_bits(g, w):
                return f"row signs: {name} differ from the reference in {int((g != w).sum())} of {w.numel()}"
        return None

    return _checked("row signs", ("row signs", x.dtype), lambda: sign_matmul_triton.row_signs(x.detach()),
                    reference, differs)


def planes_reference(x: torch.Tensor, mids: torch.Tensor, lut: torch.Tensor) -> torch.Tensor:
    """(L, *x.shape) fp16: row ``searchsorted(mids, x, right=True)`` of ``lut`` (2^L, L) per element, split
    into L planes; NaN where x is NaN. x is compared in ``mids``' dtype."""
    r = x.detach().to(mids.dtype)
    e = lut.to(torch.float16)[torch.searchsorted(mids, r.contiguous(), right=True)]
    return e.movedim(-1, 0).masked_fill(torch.isnan(r), float("nan")).contiguous()


def planes(x: torch.Tensor, mids: torch.Tensor, lut: torch.Tensor) -> torch.Tensor:
    """``planes_reference`` in one Triton pass where it runs (``sign_matmul_triton``); its first result per
    number of planes must equal the reference bit for bit (``_checked``)."""
    x = x.detach()
    if (not kernel_check.TRITON_FAKE_QUANT or "planes" in _KERNEL_OFF
            or sign_matmul_triton.why_unsupported(x, mids.dtype)):
        return planes_reference(x, mids, lut)

    def differs(got, want):
        if not same_bits(got, want):
            return f"planes differ from the reference in {int((got != want).sum())} of {want.numel()} signs"
        return None

    return _checked("planes", lut.shape[1], lambda: sign_matmul_triton.planes(x, mids, lut),
                    lambda: planes_reference(x, mids, lut), differs)


def _checked(kernel: str, key, run, reference, differs):
    """``run()`` (a kernel), compared with ``reference()`` the first time per ``key``: a failure or a difference
    (``differs(got, want)`` says why) turns that kernel off, with a warning, and returns the reference."""
    try:
        got = run()
    except Exception as err:  # a compiler problem must not stop a search: the reference is exact
        return _off(kernel, kernel_check.failed(err), reference())
    if key not in _CHECKED:
        want = reference()
        why = differs(got, want)
        if why:
            return _off(kernel, why, want)
        _CHECKED.add(key)
    return got


def _off(kernel: str, why: str, want: torch.Tensor) -> torch.Tensor:
    _KERNEL_OFF[kernel] = why
    kernel_check.FALLBACKS["sign GEMM (Triton)"] = why
    warnings.warn(f"Triton kernel of the sign GEMM: {why}; the binary formats' sign GEMM takes the torch reference "
                  "(the same numbers, more passes)", RuntimeWarning, stacklevel=4)
    return want


def _exact_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b.T`` for +-1 fp16 matrices, exactly: fp16 up to K = 2048 (every integer it can reach is an fp16
    value), else the fp32 sum of exact slices."""
    k = a.shape[1]
    if k <= EXACT_K:
        return torch.mm(a, b.t())
    out = None
    for start in range(0, k, EXACT_K):
        part = torch.mm(a[:, start:start + EXACT_K], b[:, start:start + EXACT_K].t()).float()
        out = part if out is None else out + part
    return out


def combine_reference(prod, xs, ws, bias, rows: int, out: int) -> torch.Tensor:
    """sum_ij xs[i] ws[j] * prod block (i, j) (+ bias): scales (L, rows) / (L, out) per row or (L, 1)."""
    prod = prod.view(xs.shape[0], rows, ws.shape[0], out)
    y = None
    for i in range(xs.shape[0]):
        for j in range(ws.shape[0]):
            part = prod[i, :, j].float() * (xs[i][:, None] * ws[j][None, :])
            y = part if y is None else y + part
    return y + bias if bias is not None else y


def combine(prod, xs, ws, bias, rows: int, out: int) -> torch.Tensor:
    """``combine_reference`` in one Triton pass where it runs; its first result must agree with the reference
    within an ulp of the largest term (``_checked``; the kernel may fuse a multiply-add)."""
    usable = (kernel_check.TRITON_FAKE_QUANT and "combine" not in _KERNEL_OFF and sign_matmul_triton.triton is not None
              and (prod.is_cuda or sign_matmul_triton.interpreting()) and xs.dtype == ws.dtype == torch.float32
              and (bias is None or bias.dtype == torch.float32))
    if not usable:
        return combine_reference(prod, xs, ws, bias, rows, out)

    def differs(got, want):
        # a fused multiply-add rounds once where torch rounds twice: up to an ulp of the largest term per term,
        # so the tolerance scales with the largest term (an output near 0 by cancellation may differ by that)
        big = prod.float().abs().max() * xs.abs().max() * ws.abs().max() * xs.shape[0] * ws.shape[0]
        if bias is not None:
            big = big + bias.abs().max()
        diff = (got - want).abs()[torch.isfinite(want)]
        if torch.equal(torch.isnan(got), torch.isnan(want)) and bool((diff <= 2 ** -20 * big).all()):
            return None
        return f"combine differs from the reference (max |diff| {float(diff.max()):.3g}, largest term {float(big):.3g})"

    return _checked("combine", "combine", lambda: sign_matmul_triton.combine(prod, xs, ws, bias, rows, out),
                    lambda: combine_reference(prod, xs, ws, bias, rows, out), differs)


def _stack(scales: list) -> torch.Tensor:
    """(L, n) per-row scales, or (L, 1) per-tensor ones (one term: a view, no copy)."""
    if len(scales) == 1:
        return scales[0].reshape(1, -1)
    return torch.stack([s.reshape(-1) for s in scales])


def _stacked(terms_: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    scales, planes_ = terms_
    return _stack(scales), planes_


def linear(layer, x: torch.Tensor) -> torch.Tensor:
    """``layer``'s quantized forward (fp32 output, as the reference path's) by sign GEMMs."""
    rows = x.reshape(-1, x.shape[-1])
    xs, xp = _stacked(terms(layer.q_data_in, rows))
    ws, wp = layer._frozen("weight_signs", layer.weight, lambda w: _stacked(terms(layer.q_weight, w)))
    with torch.autocast(x.device.type, enabled=False):
        # planes (L, rows, K) are contiguous: every plane's rows in one GEMM, no copy
        prod = _exact_mm(xp.reshape(-1, rows.shape[1]), wp.reshape(-1, rows.shape[1]))
        bias = layer.bias
        if bias is not None:
            if layer.q_bias is not None:
                bias = layer._frozen("bias", bias, lambda t: layer._apply_quantizer(layer.q_bias, t))
            bias = bias.float()
        y = combine(prod, xs, ws, bias, rows.shape[0], layer.out_features)
    return y.reshape(*x.shape[:-1], layer.out_features)
