"""Inference fake quantization in one Triton pass: ``fmt.quantize_values(x.float())`` cast to ``out_dtype``.

A Lab 3 trial evaluates a PTQ model on 25,000 reviews; the reference formulas take 4-12 elementwise passes
per quantized input (float64 for the block formats), which made a quantized evaluation 2-6x the
unquantized one on an H100. Here each format family is one kernel: read x, compute the format's rounding
in registers, write the result (in bf16 where the bf16 path multiplies, so no cast pass follows).

The format's parameters are runtime arguments (never specialised on), so a search that meets ~80 formats
compiles one kernel per family, working dtype and block width, cached by Triton on disk for every worker.

Bit for bit the reference: the same operations in the same working dtype as the format's own code
(``fmt.dtype``: float32, or float64 where its scales leave float32's normal range), exponents read from the
bits (as ``torch.frexp``), powers of two assembled from bits (as ``_util.pow2``), round-half-to-even by
adding and subtracting 2^23 (2^52), and no division. ``labkit.quant.fast`` checks the first result of each
format against the reference and uses the reference from then on if they differ; the tests compare every
family on special values (zeros of both signs, NaN, +-inf, subnormals, ties, saturation) in Triton's CPU
interpreter and on CUDA.

Supported: integer, minifloat_denorm, minifloat_ieee, log, binary (deterministic), block_fp,
block_minifloat, block_log, mxint8; others (binary_scaling, binary_residual_sign, stochastic binary) run
the reference (``why_unsupported`` says why).
"""
from __future__ import annotations

import functools
import struct

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs without triton: the reference formulas run
    triton = None

from ..training.triton_modes import in_mode as _in_mode, interpreting  # noqa: F401 - interpreting: this module's API
from .formats.base import NumberFormat

# family codes (constexpr in the kernel): elementwise below 10, blocked from 10
FAMILIES = {"integer": 0, "minifloat_denorm": 1, "minifloat_ieee": 2, "log": 3, "binary": 4,
            "block_fp": 10, "block_minifloat": 11, "block_log": 12, "mxint8": 13}
ELEMENTWISE_TILE = 1024  # elements per row of a program's tile for the elementwise families
TILE = 4096  # elements per program
IN_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
OUT_DTYPES = (torch.float32, torch.bfloat16)


def _frac_bits(value: float, f64: bool) -> int:
    """The stored mantissa bits of ``value`` (in [1, 2)) as float32 or float64."""
    if f64:
        return struct.unpack("<q", struct.pack("<d", value))[0] & ((1 << 52) - 1)
    return struct.unpack("<i", struct.pack("<f", value))[0] & ((1 << 23) - 1)


# round_log2 goes up iff the significand f in [1, 2) is >= the float nearest above sqrt(2) (_util.SQRT2_ABOVE):
# compared as mantissa bits (literals in _round_log2: a jit function reads no plain globals), so no float64
# constant is rounded to a float32 literal by the compiler; tests check them against _frac_bits
SQRT2_FRAC_F32 = 0x3504F4
SQRT2_FRAC_F64 = 0x6A09E667F3BCD


# ---------------------------------------------------------------------------------------------------------
# device helpers (plain functions: jit-decorated per Triton mode in _kernels, as labkit.kernels.fused_triton)
# ---------------------------------------------------------------------------------------------------------

def _pow2(k, F64):
    """2^k for int tensor k in the normal range, from the exponent bits (``_util.pow2``)."""
    if F64:
        return ((k.to(tl.int64) + 1023) << 52).to(tl.float64, bitcast=True)
    else:
        return ((k.to(tl.int32) + 127) << 23).to(tl.float32, bitcast=True)


def _exp_frac(a, F64):
    """(floor(log2 a), mantissa bits) for a > 0 finite, as int32 and int32/int64; float32 subnormals are
    scaled by 2^24 first (exact) so their exponent and mantissa read as a normal number's."""
    if F64:
        bits = a.to(tl.int64, bitcast=True)
        e = ((bits >> 52) & 0x7FF).to(tl.int32) - 1023
        return e, bits & 0xFFFFFFFFFFFFF
    else:
        sub = a < 1.1754943508222875e-38  # 2^-126
        a2 = tl.where(sub, a * 16777216.0, a)
        bits = a2.to(tl.int32, bitcast=True)
        e = ((bits >> 23) & 0xFF) - 127 - tl.where(sub, 24, 0)
        return e, bits & 0x7FFFFF


def _floor_log2(a, F64):
    """``_util.floor_log2``: frexp's e - 1, so 0 gives -1."""
    e, frac = _exp_frac(a, F64)
    return tl.where(a == 0, -1, e)


def _ceil_log2(a, F64):
    """``_util.ceil_log2``: floor + 1 unless a power of two; 0 gives 0."""
    e, frac = _exp_frac(a, F64)
    return tl.where(a == 0, 0, e + (frac != 0).to(tl.int32))


def _round_log2(a, F64):
    """``_util.round_log2``: up iff the significand >= the float above sqrt(2); 0 gives -1."""
    e, frac = _exp_frac(a, F64)
    if F64:
        up = frac >= 0x6A09E667F3BCD  # SQRT2_FRAC_F64
    else:
        up = frac >= 0x3504F4  # SQRT2_FRAC_F32
    return tl.where(a == 0, -1, e + up.to(tl.int32))


def _rint(y, F64):
    """Round half to even (``torch.round``) for y >= 0, NaN or +inf: below 2^23 (2^52) adding and
    subtracting it rounds in the FPU's round-to-nearest-even; from there on every float is an integer."""
    if F64:
        big = 4503599627370496.0  # 2^52
    else:
        big = 8388608.0  # 2^23
    return tl.where(y < big, (y + big) - big, y)


def _clamp(v, lo, hi):
    """clamp keeping NaN (tl.minimum/maximum would drop it)."""
    return tl.where(v < lo, lo, tl.where(v > hi, hi, v))


def _round_to_step(a, k, F64):
    """``_util.round_to_step``: round(a * 2^-k) * 2^k."""
    return _rint(a * _pow2(-k, F64), F64) * _pow2(k, F64)


def _log_round(a, emin, emax, F64):
    """``log.log_round`` for a >= 0 (or NaN): {0} U {2^e : emin <= e <= emax}."""
    top = _pow2(emax, F64)
    a = tl.where(a > top, top, a)
    e = _clamp(_round_log2(a, F64), emin, emax)
    zero = a < _pow2(emin - 1, F64)
    return tl.where(zero | (a != a), a * 0, _pow2(e, F64))


def _max(a, b):
    return tl.maximum(a, b)


def _fq_kernel(x_ptr, y_ptr, n, K, L, G, p0, p1, p2, p3, FAMILY: tl.constexpr, F64: tl.constexpr,
               FLAT: tl.constexpr, BLOCK_G: tl.constexpr, BL: tl.constexpr):
    """One (BLOCK_G, BL) tile of groups. FLAT (elementwise families; block formats whose power-of-two block
    divides the last dimension): group g is elements [g*BL, g*BL + BL) of the flat tensor, so loads and
    stores are contiguous and aligned (vectorised). Otherwise group g is row g // NB, columns
    [c*L, c*L + L) of that row (c = g % NB, NB = ceil(K / L)), a ragged last group masked."""
    g = (tl.program_id(0).to(tl.int64) * BLOCK_G + tl.arange(0, BLOCK_G))[:, None]
    j = tl.arange(0, BL)[None, :]
    if FLAT:
        offs = g * BL + j
        mask = offs < n
    else:
        nb = (K + L - 1) // L
        col = (g % nb) * L + j
        offs = (g // nb) * K + col
        mask = (g < G) & (j < L) & (col < K)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if F64:
        w = x.to(tl.float64)
    else:
        w = x
    a = tl.abs(w)
    if F64:
        sign = (w.to(tl.int64, bitcast=True) >> 63) << 63
    else:
        sign = (w.to(tl.int32, bitcast=True) >> 31) << 31
    if FAMILY == 4:  # binary: +1 where x >= 0 (-0.0 too), -1 below, NaN stays
        q = tl.where(w != w, w, tl.where(w >= 0, 1.0, -1.0).to(w.dtype))
    else:
        if FAMILY == 0:  # integer: p0 = frac_width, p1 = width; round(x * 2^f).clamp(lo, hi) / 2^f
            # on magnitudes, the sign put back below (round(-0.3) is -0.0; Triton's unary minus is 0 - x,
            # which would give +0.0): |lo| = 2^(w-1) for negatives, hi = 2^(w-1) - 1 for the rest
            r = _rint(a * _pow2(p0, F64), F64)
            top = _pow2(p1 - 1, F64)
            top = tl.where(w < 0, top, top - 1)
            qa = tl.where(r > top, top, r) * _pow2(-p0, F64)
        elif FAMILY == 1:  # minifloat_denorm: p0 = M, p1 = bias, p2 = emax
            mx = (_pow2(p0, F64) - 1) * _pow2(p2 - p0, F64)
            a = tl.where(a > mx, mx, a)
            e = _clamp(_ceil_log2(a, F64), -p1, p2)
            qa = _round_to_step(a, e - p0, F64)
        elif FAMILY == 2:  # minifloat_ieee: p0 = M, p1 = bias, p2 = emax
            mx = (_pow2(p0 + 1, F64) - 1) * _pow2(p2 - p0, F64)
            a = tl.where(a > mx, mx, a)
            e = _clamp(_floor_log2(a, F64), 1 - p1, p2)
            qa = _round_to_step(a, e - p0, F64)
        elif FAMILY == 3:  # log: p0 = emin, p1 = emax
            qa = _log_round(a, p0, p1, F64)
        elif FAMILY == 13:  # mxint8: float32 group max (NaN and inf give exponent 255: a NaN group)
            af = tl.abs(x)
            nan = tl.reduce((af != af).to(tl.int32), 1, _max)[:, None]
            amax = tl.reduce(tl.where(af != af, 0.0, af), 1, _max)[:, None]
            ex = tl.where(nan > 0, 255, (amax.to(tl.int32, bitcast=True) >> 23) & 0xFF)
            mag = _rint(af.to(tl.float64) * _pow2(133 - ex, True), True)
            mag = tl.where(mag > 127.0, 127.0, mag)
            m = tl.where(x < 0, -mag, mag).to(tl.int32)  # through int8 as the reference: -0 becomes +0
            val = (m.to(tl.float64) * _pow2(ex - 133, True)).to(tl.float32)
            qa = tl.where(ex == 255, tl.full(val.shape, 0x7FC00000, tl.int32).to(tl.float32, bitcast=True), val)
        else:  # block formats: the block max of |x| with NaN left out (Blocks.block_max)
            bmax = tl.reduce(tl.where(a != a, 0.0, a), 1, _max)[:, None]
            if FAMILY == 10:  # block_fp: p0 = M, p1 = bias, p2 = emax
                top = _pow2(p2 + 1, F64)
                s = _floor_log2(tl.where(bmax > top, top, bmax), F64)
                k = _clamp(s, -p1, p2) + 1 - p0
                kmax = _pow2(p0, F64) - 1
                r = _rint(a * _pow2(-k, F64), F64)
                qa = tl.where(r > kmax, kmax, r) * _pow2(k, F64)
            elif FAMILY == 11:  # block_minifloat: p0 = M, p1 = element bias, p2 = element emax, p3 = B
                lo = -(1 << (p3 - 1))
                hi = (1 << (p3 - 1)) - 1
                top = _pow2(hi + p2 + 1, F64)
                beta = _clamp(_floor_log2(tl.where(bmax > top, top, bmax), F64) - p2, lo, hi)
                sat = (_pow2(p0 + 1, F64) - 1) * _pow2(beta + p2 - p0, F64)
                a = tl.where(a > sat, sat, a)
                e = _clamp(_floor_log2(a, F64), beta + 1 - p1, beta + p2)
                qa = _round_to_step(a, e - p0, F64)
            else:  # block_log: p0 = span (2^(width-1) - 2), p3 = B
                lo = -(1 << (p3 - 1))
                hi = (1 << (p3 - 1)) - 1
                top = _pow2(hi + 1, F64)
                t = _clamp(_round_log2(tl.where(bmax > top, top, bmax), F64), lo, hi)
                qa = _log_round(a, t - p0, t, F64)
        # finish: x's sign on the magnitude (copysign, -0.0 kept), then through float32 as the reference
        if FAMILY == 13:
            q = qa
        elif F64:
            q = (qa.to(tl.int64, bitcast=True) | sign).to(tl.float64, bitcast=True).to(tl.float32)
        else:
            q = (qa.to(tl.int32, bitcast=True) | sign).to(tl.float32, bitcast=True)
    tl.store(y_ptr + offs, q.to(tl.float32).to(y_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------------------------------------------------
# host side
# ---------------------------------------------------------------------------------------------------------

@functools.cache
def _kernel(interpreting: bool):
    """The kernel for this TRITON_INTERPRET mode: helpers jit-decorated in that mode (the interpreter
    needs its reduction's combine function decorated under the flag, as labkit.training.triton_modes explains)."""
    names = ("_pow2", "_exp_frac", "_floor_log2", "_ceil_log2", "_round_log2", "_rint", "_clamp",
             "_round_to_step", "_log_round", "_max")
    helpers = {name: triton.jit(_in_mode(globals()[name], {})) for name in names}
    for helper in helpers.values():  # each helper calls the jit versions of the others
        helper.fn.__globals__.update(helpers)
    params = ("p0", "p1", "p2", "p3", "K", "L", "G")  # n: divisibility by 16 lets masked accesses vectorise
    return triton.jit(_in_mode(_fq_kernel, helpers), do_not_specialize=params)


def _dtype_f64(fmt: NumberFormat) -> bool:
    if fmt.name == "integer":
        return fmt.width > 24  # IntegerFormat computes in float64 above 24 bits
    return getattr(fmt, "dtype", torch.float32) == torch.float64


def _params(fmt: NumberFormat) -> tuple[int, int, int, int]:
    n = fmt.name
    if n == "integer":
        return fmt.frac_width, fmt.width, 0, 0
    if n in ("minifloat_denorm", "minifloat_ieee"):
        return fmt.mantissa_width, fmt.exponent_bias, fmt.emax, 0
    if n == "log":
        return fmt.emin, fmt.emax, 0, 0
    if n == "block_fp":
        return fmt.width - 1, fmt.exponent_bias, fmt.emax, 0
    if n == "block_minifloat":
        return fmt.mantissa_width, fmt.element_bias, fmt.element_emax, fmt.exponent_bias_width
    if n == "block_log":
        return 2 ** (fmt.width - 1) - 2, 0, 0, fmt.exponent_bias_width
    return 0, 0, 0, 0


def _group(fmt: NumberFormat) -> int:
    return getattr(fmt, "block_size", None) or getattr(fmt, "group_size", None) or ELEMENTWISE_TILE


def why_unsupported(fmt: NumberFormat, x: torch.Tensor | None = None, out_dtype=None) -> str | None:
    """None when ``quantize`` computes ``fmt`` on ``x`` (into ``out_dtype``); else why not."""
    if triton is None:
        return "triton is not installed"
    if fmt.name not in FAMILIES:
        return f"{fmt.name}: no one-pass kernel (runs the reference formula)"
    if fmt.name == "binary" and fmt.stochastic:
        return "binary(stochastic=True): draws random numbers (runs the reference formula)"
    if _group(fmt) > 4096:
        return f"{fmt.describe()}: blocks of more than 4096 elements"
    if x is not None:
        if x.dtype not in IN_DTYPES:
            return f"input dtype {x.dtype}: the kernel reads {', '.join(map(str, IN_DTYPES))}"
        if not (x.is_cuda or interpreting()):
            return f"input on {x.device.type}: the kernel runs on CUDA (or Triton's interpreter)"
    if out_dtype is not None and out_dtype not in OUT_DTYPES:
        return f"output dtype {out_dtype}: the kernel writes {', '.join(map(str, OUT_DTYPES))}"
    return None


def quantize(fmt: NumberFormat, x: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """``fmt.quantize_values(x.float()).to(out_dtype)`` (out_dtype defaults to float32) in one pass.

    The caller checks ``why_unsupported`` first; blocks run along the last dimension as the formats' own
    ``Blocks`` (a ragged last block included).
    """
    out_dtype = out_dtype or torch.float32
    why = why_unsupported(fmt, x, out_dtype)
    if why:
        raise ValueError(why)
    xc = x.detach().contiguous()
    y = torch.empty(x.shape, dtype=out_dtype, device=x.device)
    n = xc.numel()
    if n == 0:
        return y
    family = FAMILIES[fmt.name]
    if family < 10:
        K, L = n, ELEMENTWISE_TILE
    else:
        K, L = (x.shape[-1] if x.dim() else 1), _group(fmt)
    bl = triton.next_power_of_2(L)
    bg = max(1, TILE // bl)
    flat = bl == L and K % L == 0 or family < 10  # groups are consecutive runs of L elements
    G = triton.cdiv(n, L) if flat else (n // K) * triton.cdiv(K, L)
    grid = (triton.cdiv(G, bg),)
    _kernel(interpreting())[grid](xc, y, n, K, L, G, *_params(fmt), FAMILY=family, F64=_dtype_f64(fmt), FLAT=flat,
                                  BLOCK_G=bg, BL=bl, num_warps=4)
    return y
