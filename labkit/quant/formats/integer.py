"""Signed fixed point: ``width`` bits two's complement with ``frac_width`` fractional bits."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ._util import check_range, why_not_bf16
from .base import FormatSpec, NumberFormat, hook, register

# Bounds that keep every value of the format, and every scale 2^+-frac_width, a normal float32 number:
# |k| / 2^f <= 2^(63+64) = 2^127 < float32's max (~2^128) and the finest step 2^-64 > 2^-126 (its smallest
# normal), so the float32 path (width <= 24) neither overflows nor flushes the grid to zero, and 64 bits is
# the widest integer a tensor holds. Beyond them the forward overflowed (OverflowError, inf or NaN).
MAX_WIDTH = 64
MAX_FRAC_WIDTH = 64


@hook
def quantize_fixed_point(x: torch.Tensor, width: int, frac_width: int) -> torch.Tensor:
    """``clamp(round(x * 2^f), -2^(w-1), 2^(w-1) - 1) / 2^f``, rounding half to even, in ``x``'s dtype.

    A module-level function (looked up at each call) so Lab 1's exercise can put a student's in its place."""
    scale = 2.0 ** frac_width
    lo, hi = -(2 ** (width - 1)), 2 ** (width - 1) - 1
    # float64 for wide formats: a 32-bit integer grid is finer than float32's 24-bit mantissa
    work = x.double() if width > 24 else x
    return (torch.round(work * scale).clamp(lo, hi) / scale).to(x.dtype)


@register
@dataclass(frozen=True)
class IntegerFormat(NumberFormat):
    """Values ``k / 2^f`` for integers ``k`` in ``[-2^(w-1), 2^(w-1) - 1]``.

    Rounding is half to even (``torch.round``); out-of-range values saturate to the nearest end, and the
    straight-through gradient is zero there (clipped STE). ``-0.0`` is kept as ``-0.0`` (equal to 0).
    """

    name = "integer"
    # Lab 3: frac = width // 2 (the course's int8 with 4 fractional bits, as in Lab 1); the search: the sheet's
    # width x frac
    spec = FormatSpec(
        study=lambda w: {"width": w, "frac_width": w // 2},
        space={"width": (8, 16, 32), "frac_width": (2, 4, 8)},
        fixed={},
        why="a fixed step 2^-frac and range 2^(width-1-frac): small frac widths clip large activations, "
            "large ones round small weights away",
        hook="quantize_fixed_point")
    width: int = 8
    frac_width: int = 4

    def validate(self):
        check_range("integer", "width", self.width, 1, MAX_WIDTH)
        check_range("integer", "frac_width", self.frac_width, -MAX_FRAC_WIDTH, MAX_FRAC_WIDTH,
                    why="the value grid 2^-frac_width must stay inside float32's range")

    @property
    def bounds(self) -> tuple[float, float]:
        scale = 2.0 ** self.frac_width
        return -(2 ** (self.width - 1)) / scale, (2 ** (self.width - 1) - 1) / scale

    def quantize_values(self, x):
        return quantize_fixed_point(x, self.width, self.frac_width)

    def row_local(self):  # elementwise
        return True

    def pass_mask(self, x):
        lo, hi = self.bounds
        return (x >= lo) & (x <= hi)

    def bits_per_element(self, shape):
        return float(self.width)

    def why_not_bf16(self, normal_only=False):
        # k / 2^f with |k| <= 2^(w-1): w-1 significant bits (2^(w-1) itself is a power of two)
        return why_not_bf16(self.describe(), self.width - 1, -self.frac_width,
                            2.0 ** (self.width - 1 - self.frac_width), normal_only)
