"""Minifloats: ``minifloat_denorm`` (no implicit bit) and ``minifloat_ieee`` (implicit bit, subnormals).

Both are sign-magnitude, saturating (no infinities, no NaN codes), and round to the nearest value of
their value set with ties to an even mantissa. The clipped STE passes the gradient where |x| <= max + g/2,
g the gap between max and the next smaller value (the cell max would have as an interior value), and is
zero beyond (saturation). NaN inputs stay NaN; +-inf saturate to +-max.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ._util import (ceil_log2, check_exponent_range, check_range, finish, floor_log2, round_to_step,
                    why_not_bf16, work, work_dtype)
from .base import FormatSpec, NumberFormat, hook, register


@dataclass(frozen=True)
class _Minifloat(NumberFormat):
    """Fields, validation and accounting shared by the two minifloats; each subclass states its value set.

    Subclasses set ``_min_width`` / ``_min_mantissa`` (their smallest legal layout) and
    ``_lowest_step_exponent`` (log2 of their finest grid step), from which validation and the working
    dtype follow.
    """

    width: int = 8
    exponent_width: int = 4
    exponent_bias: int | None = None  # None: the IEEE-style 2^(E-1)-1, stored resolved so describe() shows it

    _min_width: ClassVar[int]
    _min_mantissa: ClassVar[int]
    _width_why: ClassVar[str]

    def __post_init__(self):
        if self.exponent_bias is None and isinstance(self.exponent_width, int) and self.exponent_width >= 1:
            object.__setattr__(self, "exponent_bias", 2 ** (self.exponent_width - 1) - 1)
        super().__post_init__()

    def validate(self):
        check_range(self.name, "width", self.width, self._min_width, why=self._width_why)
        check_range(self.name, "exponent_width", self.exponent_width, 1, self.width - 1 - self._min_mantissa,
                    why=f"width={self.width} must leave M = width - exponent_width - 1 >= "
                        f"{self._min_mantissa} mantissa bits")
        check_range(self.name, "width", self.width, None, self.exponent_width + 53,
                    why="at most 52 mantissa bits (float64 arithmetic)")
        check_range(self.name, "exponent_bias", self.exponent_bias)
        check_exponent_range(self.name, self._lowest_step_exponent, self.emax + 1)

    @property
    def mantissa_width(self) -> int:
        return self.width - self.exponent_width - 1

    @property
    def emax(self) -> int:
        return 2 ** self.exponent_width - 1 - self.exponent_bias

    @property
    def _lowest_step_exponent(self) -> int:
        raise NotImplementedError

    @property
    def dtype(self):
        return work_dtype(self._lowest_step_exponent, self.emax + 1, self.mantissa_width)

    def pass_mask(self, x):
        return work(x, self.dtype) <= self.saturation_threshold

    def row_local(self):  # elementwise
        return True

    def bits_per_element(self, shape):
        return float(self.width)

    def why_not_bf16(self, normal_only=False):
        return why_not_bf16(self.describe(), self._significant_bits, self._lowest_step_exponent, self.max_value,
                            normal_only)


def denorm_values(x, width: int, exponent_width: int, exponent_bias: int):
    """``MinifloatDenorm(width, exponent_width, exponent_bias)``'s values of ``x``, in ``x``'s dtype (see the
    class for the value set and the rounding); the arguments are those of a valid format."""
    m = width - exponent_width - 1
    emax = 2 ** exponent_width - 1 - exponent_bias
    max_value = (2 ** m - 1) * 2.0 ** (emax - m)
    a = work(x, work_dtype(-exponent_bias - m, emax + 1, m)).clamp(max=max_value)  # saturate first: inf -> max
    e = ceil_log2(a).clamp(-exponent_bias, emax)  # |x| in (2^(e-1), 2^e]; 0 lands at -b
    return finish(round_to_step(a, e - m), x)


@hook
def minifloat_denorm(x, width: int, exponent_width: int):
    """``minifloat_denorm(width, exponent_width)`` with its default bias 2^(E-1)-1: ``x``'s values.

    A module-level function (looked up at each call) so Lab 3's exercise can put a student's in its place."""
    return denorm_values(x, width, exponent_width, 2 ** (exponent_width - 1) - 1)


@register
@dataclass(frozen=True)
class MinifloatDenorm(_Minifloat):
    """Minifloat without an implicit leading bit: E exponent bits, M = width - E - 1 mantissa bits.

    Value set: ``{ +-m * 2^(e-M) : m in {0, ..., 2^M - 1}, e in {-b, ..., 2^E - 1 - b} }`` with
    b = ``exponent_bias`` (default 2^(E-1) - 1). Equivalently: 0, then in each binade (2^(e-1), 2^e]
    (-b < e <= emax = 2^E-1-b) a uniform grid of step 2^(e-M), below 2^-b multiples of 2^(-b-M), and
    largest magnitude max = (2^M - 1) * 2^(emax - M). Encodings are redundant (m=2, e equals m=1, e+1).

    Rounding: the sheet's e = clamp(ceil(log2|x|), -b, emax), mantissa round(|x| / 2^e * 2^M) ties to
    even, with one correction that makes it self-consistent: the sheet then clamps the mantissa to
    2^M - 1, which sends every power of two (|x| / 2^e = 1, mantissa 2^M) to (1 - 2^-M) * |x| although
    |x| itself is representable (m = 2^(M-1) at exponent e + 1). Here a mantissa of 2^M is that
    renormalised value, so the result is always the nearest value of the set; only above max does it
    saturate to max.
    """

    name = "minifloat_denorm"
    # Lab 3: E4M3-style (4 exponent bits, fewer when the width is small); a searched exponent width leaves the
    # sign and >= 1 mantissa bit
    spec = FormatSpec(
        study=lambda w: {"width": w, "exponent_width": min(4, w - 2)},
        space={"width": (4, 5, 6, 8), "exponent_width": (2, 3, 4)},
        fixed={},
        why="few mantissa bits and no implicit leading one",
        min_width=3, exponent_leaves=2, hook="minifloat_denorm")
    _significant_bits = property(lambda self: self.mantissa_width)  # m < 2^M, no implicit bit
    _min_width = 3
    _min_mantissa = 1
    _width_why = "sign, >= 1 exponent and >= 1 mantissa bit"

    @property
    def _lowest_step_exponent(self) -> int:  # the subnormal-like grid below 2^-b: 2^(-b-M)
        return -self.exponent_bias - self.mantissa_width

    @property
    def max_value(self) -> float:
        m = self.mantissa_width
        return (2 ** m - 1) * 2.0 ** (self.emax - m)

    def quantize_values(self, x):
        if self.exponent_bias == 2 ** (self.exponent_width - 1) - 1:
            return minifloat_denorm(x, self.width, self.exponent_width)  # the default bias: Lab 3's hook
        return denorm_values(x, self.width, self.exponent_width, self.exponent_bias)

    def value_set(self) -> str:
        m, b = self.mantissa_width, self.exponent_bias
        return (f"{{+-m * 2^(e-{m}) : 0 <= m <= {2 ** m - 1}, {-b} <= e <= {self.emax}}}, "
                f"max {self.max_value:g}")

    @property
    def saturation_threshold(self) -> float:
        """max + half the gap to its predecessor: beyond it x saturates (zero STE gradient)."""
        m = self.mantissa_width
        # M >= 2: the predecessor is one step 2^(emax-M) below; M = 1: max = 2^(emax-1), predecessor 2^(emax-2)
        gap = 2.0 ** (self.emax - m) if m >= 2 else 2.0 ** (self.emax - 2)
        return self.max_value + gap / 2


@register
@dataclass(frozen=True)
class MinifloatIEEE(_Minifloat):
    """IEEE-754-style minifloat: E exponent bits, M = width - E - 1 stored mantissa bits, implicit 1.

    Value set, with b = ``exponent_bias`` (default 2^(E-1) - 1) and emax = 2^E - 1 - b:
    ``{ +-m * 2^(1-b-M) : m in {0, ..., 2^M - 1} }`` (exponent code 0: zero and subnormals) united with
    ``{ +-(1 + m / 2^M) * 2^e : m in {0, ..., 2^M - 1}, e in {1-b, ..., emax} }`` (codes 1 .. 2^E - 1).
    Every exponent code is a finite number: there is no infinity and no NaN, so the top code adds a
    binade and max = (2 - 2^-M) * 2^emax (E4M3 with b = 7: 480). Round to nearest, ties to even
    mantissa, saturating at +-max. M = 0 (width = E + 1) is allowed: signed powers of two and zero.
    """

    name = "minifloat_ieee"
    spec = FormatSpec(
        study=lambda w: {"width": w, "exponent_width": min(4, w - 1)},
        space={"width": (4, 5, 6, 8), "exponent_width": (2, 3, 4, 5)},
        fixed={},
        why="few mantissa bits (an implicit leading one, subnormals near zero)",
        exponent_leaves=1)
    _significant_bits = property(lambda self: self.mantissa_width + 1)  # the implicit 1
    _min_width = 2
    _min_mantissa = 0
    _width_why = "sign and >= 1 exponent bit"

    @property
    def _lowest_step_exponent(self) -> int:  # subnormals: 2^(1-b-M)
        return 1 - self.exponent_bias - self.mantissa_width

    @property
    def max_value(self) -> float:
        return (2 - 2.0 ** -self.mantissa_width) * 2.0 ** self.emax

    def quantize_values(self, x):
        a = work(x, self.dtype).clamp(max=self.max_value)
        # the binade [2^e, 2^(e+1)) of |x|; below 2^(1-b) the subnormal grid continues at 2^(1-b-M)
        e = floor_log2(a).clamp(1 - self.exponent_bias, self.emax)
        return finish(round_to_step(a, e - self.mantissa_width), x)

    def value_set(self) -> str:
        m, b = self.mantissa_width, self.exponent_bias
        return (f"{{0, +-m * 2^{1 - b - m} : 0 < m < {2 ** m}}} U {{+-(1 + m/{2 ** m}) * 2^e : "
                f"0 <= m < {2 ** m}, {1 - b} <= e <= {self.emax}}}, max {self.max_value:g}, no inf/NaN")

    @property
    def saturation_threshold(self) -> float:
        """max + half the gap to its predecessor: beyond it x saturates (zero STE gradient)."""
        return ieee_saturation(self.exponent_width, self.mantissa_width) * 2.0 ** self.emax


def ieee_saturation(exponent_width: int, mantissa_width: int) -> float:
    """An IEEE-style minifloat's saturation threshold in units of 2^emax: max + half the gap below max.

    M >= 1: the predecessor is 2^(emax-M) below max = (2 - 2^-M) * 2^emax. M = 0: max = 2^emax and the
    predecessor is 2^(emax-1), or 0 when there is a single exponent code (E = 1).
    """
    m = mantissa_width
    if m >= 1:
        return 2 - 2.0 ** -m + 2.0 ** -(m + 1)
    return 1 + (0.25 if exponent_width >= 2 else 0.5)
