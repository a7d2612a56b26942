"""Lab 1's exercises: a fixed-point quantizer, ..."""
from __future__ import annotations

import torch

from ..quant.formats.integer import fixed_point as _fixed_point
from .core import Case, exercise


def _fixed_cases() -> list[Case]:
    t = torch.tensor
    return [
        Case("ties round half to even", (t([0.5, 1.5, 2.5, -0.5, -2.5, 3.5]), 8, 0),
             hint="torch.round rounds half to even (0.5 -> 0, 2.5 -> 2); floor(x + 0.5) rounds half up"),
        Case("fractional bits scale the grid", (t([0.3, 0.9, -0.9, 0.126, 1.0625]), 8, 3),
             hint="multiply by 2^frac_width, round, clamp, then divide by 2^frac_width"),
        Case("saturation at the positive end", (t([7.4, 8.0, 100.0]), 4, 0),
             hint="clamp the integer to [-2^(width-1), 2^(width-1) - 1] before dividing"),
        Case("saturation at the negative end (one more level than positive)", (t([-8.0, -8.4, -9.0, -1e6]), 4, 0),
             hint="two's complement: the lowest integer is -2^(width-1), one below -(2^(width-1) - 1)"),
        Case("negative fractional width: a coarser grid", (t([5.0, 6.0, -10.0, 3.0]), 8, -2),
             hint="2^frac_width with a negative frac_width is a step of 4: round(x / 4) * 4"),
        Case("zeros and an empty tensor keep shape and dtype", (t([0.0, -0.0]), 8, 4)),
        Case("empty input", (torch.zeros(0), 8, 4), hint="an empty tensor in, an empty tensor out"),
        Case("a 2-D float64 tensor keeps its shape and dtype",
             (t([[0.25, -0.375], [1.5, -2.0]], dtype=torch.float64), 4, 2),
             hint="return the same dtype and shape as x"),
    ]


def _fixed_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        width = rng.randint(2, 16)
        frac = rng.randint(-2, width)
        n = rng.randint(1, 12)
        # half-steps of the grid (ties) and values beyond both ends
        ks = [rng.randint(-2 ** width, 2 ** width) / 2 for _ in range(n)]
        x = torch.tensor([k / 2.0 ** frac for k in ks])
        cases.append(Case(f"random {i}: width {width}, frac {frac}", (x, width, frac)))
    return cases


def _half_away(x, width, frac_width):
    s = 2.0 ** frac_width
    k = torch.sign(x) * torch.floor(x.abs() * s + 0.5)
    return (k.clamp(-(2 ** (width - 1)), 2 ** (width - 1) - 1) / s).to(x.dtype)


def _no_clamp(x, width, frac_width):
    s = 2.0 ** frac_width
    return (torch.round(x * s) / s).to(x.dtype)


def _symmetric_clamp(x, width, frac_width):
    s = 2.0 ** frac_width
    return (torch.round(x * s).clamp(-(2 ** (width - 1) - 1), 2 ** (width - 1) - 1) / s).to(x.dtype)


@exercise(
    id="lab1.fixed_point", notebook="lab1_quantize", points=3,
    title="a fixed-point quantizer (round half to even, saturation)",
    task="Lab 1, quantization: quantize every Linear's input, weight and bias to signed fixed point "
         "(width, frac_width)",
    cases=_fixed_cases, hidden=_fixed_hidden,
    mutants={"round half away from zero": _half_away, "no clamp": _no_clamp,
             "symmetric clamp": _symmetric_clamp},
    hint="q = clamp(round(x * 2^f), -2^(w-1), 2^(w-1) - 1) / 2^f with torch.round (half to even)",
    install="labkit.quant.formats.integer:fixed_point",
)
def fixed_point(x: torch.Tensor, width: int, frac_width: int) -> torch.Tensor:
    return _fixed_point(x, width, frac_width)
