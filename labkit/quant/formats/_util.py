"""Helpers shared by the float-like formats: validation, exact binary exponents, blocking.

Rounding decisions are made on exact quantities (``torch.frexp`` exponents and mantissas, never a
floating-point ``log2``), so a value exactly at a power of two or a tie never lands on the wrong side.
Arithmetic runs in float64: dividing by a power of two is exact there for every format these modules
accept (validation keeps step sizes inside float64's normal range), and the result is cast back to the
input's dtype.
"""
from __future__ import annotations

import math

import torch

# The float64 nearest to sqrt(2) is above sqrt(2) and its predecessor below, so for float64 f in [1, 2)
# "f >= SQRT2" is exactly "f > sqrt(2)" (no float64 equals sqrt(2)).
SQRT2 = math.sqrt(2.0)
# Exponents of every power of two a format may scale by stay within float64's normal range.
F64_EXP_LIMIT = 1000


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


def work(x: torch.Tensor) -> torch.Tensor:
    """|x| in float64 (the working precision of every float-like format)."""
    return x.detach().to(torch.float64).abs()


def finish(q_abs: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Put the sign of ``x`` back (``-0.0`` stays ``-0.0``) and return in ``x``'s dtype."""
    return torch.copysign(q_abs, x.detach().to(torch.float64)).to(x.dtype)


def floor_log2(a: torch.Tensor) -> torch.Tensor:
    """floor(log2 a) for a > 0, exactly (float64 result; meaningless where a == 0, callers mask it)."""
    _, e = torch.frexp(a)  # a = m * 2^e, m in [0.5, 1)
    return (e - 1).to(torch.float64)


def ceil_log2(a: torch.Tensor) -> torch.Tensor:
    """ceil(log2 a) for a > 0, exactly: floor + 1 unless a is a power of two."""
    m, e = torch.frexp(a)
    return (e - (m == 0.5).to(e.dtype)).to(torch.float64)


def round_log2(a: torch.Tensor) -> torch.Tensor:
    """round(log2 a) for a > 0, exactly: up iff the mantissa f in [1, 2) exceeds sqrt(2).

    log2 a is never exactly k + 1/2 for a float a (sqrt(2) is irrational), so there are no ties.
    """
    m, e = torch.frexp(a)
    return (e - 1 + (2 * m >= SQRT2).to(e.dtype)).to(torch.float64)


def pow2(k: torch.Tensor) -> torch.Tensor:
    """2^k for integer-valued float64 ``k`` (exact within float64's normal range)."""
    return torch.exp2(k)


def round_to_step(a: torch.Tensor, step_exp: torch.Tensor) -> torch.Tensor:
    """a rounded to a multiple of 2^step_exp, ties to an even multiple (torch.round is half-to-even)."""
    step = pow2(step_exp)
    return torch.round(a / step) * step


class Blocks:
    """View a tensor as blocks of ``size`` consecutive elements along its last dimension.

    The last dimension is zero-padded to a multiple of ``size`` (zeros never change a block's max), so
    a ragged last block is simply a shorter block; ``restore`` drops the padding. A 0-d tensor is one
    block of one element.
    """

    def __init__(self, x: torch.Tensor, size: int):
        self.shape = x.shape
        flat = x.reshape(1) if x.dim() == 0 else x
        self.n = flat.shape[-1]
        pad = (-self.n) % size
        if pad:
            flat = torch.nn.functional.pad(flat, (0, pad))
        self.blocked = flat.reshape(*flat.shape[:-1], -1, size)

    def block_max(self) -> torch.Tensor:
        """max |x| of each block, shaped to broadcast against ``blocked`` (``.., n_blocks, 1``)."""
        return self.blocked.abs().amax(dim=-1, keepdim=True)

    def restore(self, y: torch.Tensor) -> torch.Tensor:
        y = y.reshape(*y.shape[:-2], -1)[..., : self.n]
        return y.reshape(self.shape)


def blocks_per_element(shape: tuple[int, ...], size: int) -> float:
    """Shared fields per element for blocks of ``size`` along the last dimension (ragged block counted)."""
    shape = tuple(shape) or (1,)
    last = shape[-1]
    if last <= 0:
        raise ValueError(f"cannot count bits of an empty tensor of shape {shape}")
    return math.ceil(last / size) / last
