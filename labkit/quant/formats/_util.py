"""Helpers shared by the float-like formats: validation, exact binary exponents, blocking.

Rounding decisions are made on exact quantities (``torch.frexp`` exponents and mantissas, never a
floating-point ``log2``), and powers of two are assembled from their bit patterns (never ``exp2``/``pow``,
whose accuracy is not guaranteed on every device), so a value at a power of two or at a tie never lands
on the wrong side. Scaling by a power of two is exact in binary floating point as long as the scale and
the results stay normal numbers; each format therefore computes in float32 when its whole exponent range
fits float32's (``work_dtype``) and in float64 otherwise, and always in float64 for float64 inputs.
"""
from __future__ import annotations

import math

import torch

# For f in [1, 2): "f >= threshold" is exactly "f > sqrt(2)" (no binary float equals sqrt(2)).
# float64: its nearest to sqrt(2) lies above sqrt(2). float32: its nearest lies below, so take the next.
SQRT2_ABOVE = {torch.float64: math.sqrt(2.0), torch.float32: 1.4142136573791504}
# Exponents of every power of two a float64-computing format may scale by stay within float64's range.
F64_EXP_LIMIT = 1000
# float32 computation: every scale 2^k and its inverse 2^-k must be a normal float32.
F32_EXP_LIMIT = 126
# bf16: 8 significant bits, values up to (2 - 2^-7) * 2^127, subnormal steps down to 2^-133
BF16_BITS, BF16_MAX, BF16_MIN_STEP_EXP = 8, (2 - 2.0 ** -7) * 2.0 ** 127, -133


# The largest floor(log2 |x|) of a finite float32 (or bf16) input: a shared exponent read off a block max
# never exceeds it (only an infinite input reaches the top of a wider field, and that value overflows
# float32 to inf, as in the fp32 path)
F32_MAX_FLOOR_EXP = 127


def why_not_bf16(owner: str, significant_bits: int, lowest_step_exp: int, max_value: float,
                 normal_only: bool = False) -> str | None:
    """None when a value set of ``significant_bits``-bit integers times powers of two no finer than
    2^lowest_step_exp, up to ``max_value``, lies inside bf16; else why not.

    ``normal_only``: only the values of magnitude >= 2^-126 (float32's normal range) must lie inside bf16;
    smaller ones (float32 subnormals) may not, and become bf16's multiples of 2^-133 (moved by < 2^-134)."""
    if significant_bits > BF16_BITS:
        return f"{owner}: {significant_bits} significant bits, bf16 has {BF16_BITS}"
    if lowest_step_exp < BF16_MIN_STEP_EXP and not normal_only:
        return f"{owner}: steps of 2^{lowest_step_exp}, finer than bf16's smallest 2^{BF16_MIN_STEP_EXP}"
    if max_value > BF16_MAX:
        return f"{owner}: max {max_value:g} exceeds bf16's {BF16_MAX:g}"
    return None


def check_range(owner: str, key: str, value, lo: int | None = None, hi: int | None = None,
                why: str = "") -> None:
    """``value`` is an int in ``[lo, hi]``; the error names the key and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}: {key} must be an int, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        lo_s = "-inf" if lo is None else str(lo)
        hi_s = "inf" if hi is None else str(hi)
        raise ValueError(f"{owner}: {key}={value} is out of range; allowed: [{lo_s}, {hi_s}]"
                         + (f" ({why})" if why else ""))


def check_bool(owner: str, key: str, value) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: {key} must be True or False, got {value!r}")


def check_exponent_range(owner: str, lo: int, hi: int) -> None:
    """The format's power-of-two scales 2^lo .. 2^hi must be float64 normal numbers."""
    if lo < -F64_EXP_LIMIT or hi > F64_EXP_LIMIT:
        raise ValueError(f"{owner}: the format's exponent range [{lo}, {hi}] leaves float64's range "
                         f"[-{F64_EXP_LIMIT}, {F64_EXP_LIMIT}]; use a smaller exponent_width or a bias "
                         "nearer 2^(exponent_width-1)-1")


def work_dtype(lo: int, hi: int, mantissa_bits: int) -> torch.dtype:
    """float32 if scales 2^lo .. 2^hi (and inverses) are normal float32 and integer mantissas of
    ``mantissa_bits`` (+ a carry bit) are exact in float32's 24 bits; else float64."""
    ok = -F32_EXP_LIMIT <= lo and hi <= F32_EXP_LIMIT and mantissa_bits + 1 <= 24
    return torch.float32 if ok else torch.float64


def work(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """|x| in the working precision (float64 for float64 inputs, so no input bit is lost)."""
    if x.dtype == torch.float64:
        dtype = torch.float64
    return x.detach().to(dtype).abs()


def finish(q_abs: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Put the sign of ``x`` back (``-0.0`` stays ``-0.0``) and return in ``x``'s dtype."""
    return torch.copysign(q_abs.to(x.dtype), x.detach())


def floor_log2(a: torch.Tensor) -> torch.Tensor:
    """floor(log2 a) for a > 0, exactly, as int32 (a == 0 gives -1: callers clamp or mask it)."""
    _, e = torch.frexp(a)  # a = m * 2^e, m in [0.5, 1)
    return e - 1


def ceil_log2(a: torch.Tensor) -> torch.Tensor:
    """ceil(log2 a) for a > 0, exactly, as int32: floor + 1 unless a is a power of two."""
    m, e = torch.frexp(a)
    return e - (m == 0.5).to(e.dtype)


def round_log2(a: torch.Tensor) -> torch.Tensor:
    """round(log2 a) for a > 0, exactly, as int32: up iff the mantissa f in [1, 2) exceeds sqrt(2).

    log2 a is never exactly k + 1/2 for a binary float a (sqrt(2) is irrational), so there are no ties.
    """
    m, e = torch.frexp(a)
    return e - 1 + (2 * m >= SQRT2_ABOVE[a.dtype]).to(e.dtype)


def pow2(k: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """2^k for integer ``k`` (tensor), assembled from the exponent bits: exact, any device.

    ``k`` must lie in the normal range (|k| <= 126 for float32, <= 1022 for float64): the formats'
    validation and clamps guarantee it.
    """
    if dtype == torch.float64:
        return ((k.to(torch.int64) + 1023) << 52).view(torch.float64)
    return ((k.to(torch.int32) + 127) << 23).view(torch.float32)


def pow2_pair(k: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(2^k, 2^-k) from the bits, as ``pow2``; the inverse's exponent field is 2*bias - (k + bias)."""
    if dtype == torch.float64:
        bits = (k.to(torch.int64) + 1023) << 52
        return bits.view(torch.float64), ((2046 << 52) - bits).view(torch.float64)
    bits = (k.to(torch.int32) + 127) << 23
    return bits.view(torch.float32), ((254 << 23) - bits).view(torch.float32)


def round_to_step(a: torch.Tensor, step_exp: torch.Tensor) -> torch.Tensor:
    """a rounded to a multiple of 2^step_exp, ties to an even multiple (torch.round is half-to-even).

    Multiplying by 2^-k and 2^k is exact here: a * 2^-k is at most ~2^(M+1), and an underflow of it can
    only happen far below 1/2, where the rounding gives 0 either way.
    """
    step, inv = pow2_pair(step_exp, a.dtype)
    return torch.round(a * inv) * step


class Blocks:
    """View a tensor as blocks of ``size`` consecutive elements along its last dimension.

    The last dimension is zero-padded to a multiple of ``size`` (zeros never change a block's max), so
    a ragged last block is simply a shorter block; ``restore`` drops the padding. A 0-d tensor is one
    block of one element; an empty tensor has no blocks and comes back empty.
    """

    def __init__(self, x: torch.Tensor, size: int):
        self.shape = x.shape
        flat = x.reshape(1) if x.dim() == 0 else x
        self.n = flat.shape[-1]
        pad = (-self.n) % size
        if pad:
            flat = torch.nn.functional.pad(flat, (0, pad))
        # explicit block count, not -1: reshape cannot infer -1 for a tensor with no elements
        self.blocked = flat.reshape(*flat.shape[:-1], (self.n + pad) // size, size)

    def block_max(self) -> torch.Tensor:
        """max |x| of each block, NaN left out, shaped to broadcast against ``blocked`` (``.., n_blocks, 1``)."""
        return torch.nan_to_num(self.blocked.abs(), nan=0.0, posinf=math.inf).amax(dim=-1, keepdim=True)

    def restore(self, y: torch.Tensor) -> torch.Tensor:
        y = y.reshape(*y.shape[:-2], y.shape[-2] * y.shape[-1])[..., : self.n]
        return y.reshape(self.shape)


def blocks_per_element(shape: tuple[int, ...], size: int) -> float:
    """Shared fields per element for blocks of ``size`` along the last dimension (ragged block counted)."""
    shape = tuple(shape) or (1,)
    last = shape[-1]
    if last <= 0:
        raise ValueError(f"cannot count bits of an empty tensor of shape {shape}")
    return math.ceil(last / size) / last
