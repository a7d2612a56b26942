"""``mxint8``: OCP-microscaling-style int8 groups, computed by the Lab 4 reference in
``labkit.kernels.mxint8_ref`` (imported when first used, so this module never depends on it at import).

Values and gradients both come from ``mxint8_ref.fake_quantize_mxint8``: this module only pads ragged
groups and reshapes, so ``make_format("mxint8")`` and ``kernels.fake_quantize_mxint8`` cannot drift apart.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ._util import blocks_per_element, check_range
from .base import NumberFormat, register

SHARED_BITS = 8


def _ref():
    try:
        from labkit.kernels import mxint8_ref
    except ImportError as err:
        raise ImportError("the mxint8 format computes with labkit.kernels.mxint8_ref "
                          f"(fake_quantize_mxint8), which did not import: {err}") from err
    return mxint8_ref


def _through_reference(x: torch.Tensor, group_size: int) -> torch.Tensor:
    """The reference's fake quantization of x as rows ``(-1, n_padded)``, the last dim zero-padded to a
    multiple of ``group_size``; differentiable (pad, reshape and slice pass gradients unchanged).

    The reference needs group_size to divide the last dimension; zeros never raise a group's max, so a
    ragged last group quantizes exactly as a group of its own elements would.
    """
    # explicit row count, not -1: reshape cannot infer -1 for a tensor with no elements
    rows = math.prod(x.shape[:-1]) if x.dim() >= 2 else 1
    flat = x.reshape(rows, x.shape[-1] if x.dim() else 1)
    n = flat.shape[-1]
    pad = (-n) % group_size
    if pad:
        flat = torch.nn.functional.pad(flat, (0, pad))
    return _ref().fake_quantize_mxint8(flat, group_size)[..., :n].reshape(x.shape)


@register
@dataclass(frozen=True)
class MXInt8Format(NumberFormat):
    """Groups of ``group_size`` consecutive elements along the last dimension share one 8-bit exponent E.

    Value set of a group: ``{ m * 2^(E-127) / 64 : m in {-127, ..., 127} }`` with E in {0, ..., 255}
    (uint8, bias 127); quantization (Lab 4's sheet, computed by ``labkit.kernels.mxint8_ref``):
    E = the group max's float exponent, m = sign * clamp(round(|x| / 2^(E-127) * 64), 0, 127), so the
    group max uses the full 7 magnitude bits and saturates at 127 only by rounding. Ragged last groups
    are zero-padded (the reference itself needs group_size to divide the last dimension). STE: the
    reference's, identity everywhere (see ``mxint8_ref.fake_quantize_mxint8``).
    Bits per element: 8 + 8 * ceil(n / group_size) / n for a last dimension n.
    """

    name = "mxint8"
    group_size: int = 32

    def validate(self):
        check_range(self.name, "group_size", self.group_size, 1)

    def value_set(self) -> str:
        return (f"per group of {self.group_size}: {{m * 2^(E-127) / 64 : |m| <= 127}}, E = the group max's "
                "float32 exponent field (uint8)")

    def quantize_values(self, x):
        with torch.no_grad():
            return _through_reference(x.detach(), self.group_size)

    def differentiable(self, x):
        return _through_reference(x, self.group_size)

    def bits_per_element(self, shape):
        return 8.0 + SHARED_BITS * blocks_per_element(shape, self.group_size)

    def why_not_bf16(self, normal_only=False):
        return None  # m * 2^(E-133), |m| <= 127, E <= 254: 7 bits, steps >= 2^-133, max 127 * 2^121
