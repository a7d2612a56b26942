"""``mxint8``: OCP-microscaling-style int8 groups, and the pure-PyTorch reference that computes them
(quantize, dequantize, fake-quantize): the one definition of MXINT8's values, which the Lab 4 kernels
(``labkit.kernels``) import and match bit for bit.

The format (Lab 4): groups of ``group_size`` consecutive elements along the last dimension share one
uint8 exponent ``E`` (bias 127); each element keeps an int8 mantissa ``m`` in [-127, 127]; the value is
``m * 2**(E - 127) / 64``. 8 + 8/group_size bits per element (8.25 for groups of 32).

Definitions this module fixes (the CUDA kernel agrees bit for bit; tests/kernels/test_mxint8.py checks):

- ``E`` is the float32 exponent field of the group's largest magnitude: ``floor(log2(amax)) + 127`` for a
  normal ``amax``; 0 for an all-zero group or a subnormal ``amax`` (scale 2**-127, the smallest); 255 when
  the group holds inf or NaN (the OCP MX spec's NaN scale; mantissas then 0). Inputs are converted to
  float32 first, so float64 magnitudes beyond float32's range count as inf.
- ``m = sign(w) * clamp(round(|w| * 2**(133 - E)), 0, 127)`` with ``torch.round`` (half to even),
  computed in float64, where scaling by a power of two is exact.
- Decoding is exact: ``m * 2**(E - 133)`` is representable in bf16 for every byte pair (E = 0 lands on
  bf16 subnormals), except ``m = -128, E = 254`` (-2**128, rounds to -inf) and ``E = 255`` (NaN).

``make_format("mxint8")`` only pads ragged groups and reshapes around ``fake_quantize_mxint8``, so the format
and the kernels' reference cannot drift apart.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ._util import blocks_per_element, check_range
from .base import FormatSpec, NumberFormat, register

SHARED_BITS = 8
MANTISSA_MAX = 127
EXPONENT_BIAS = 127
NAN_EXPONENT = 255


def _divisors(n: int, limit: int = 12) -> str:
    divs = [d for d in range(1, n + 1) if n % d == 0]
    return ", ".join(map(str, divs[:limit])) + (", ..." if len(divs) > limit else "")


def check_group_size(shape, group_size, name: str = "w") -> int:
    """``group_size`` as an int after checking it divides the last dimension of ``shape``."""
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size={group_size!r}: must be a positive int dividing the last dimension of {name}")
    if len(shape) == 0:
        raise ValueError(f"{name} is a scalar; MXINT8 groups run along the last dimension, so it needs one")
    last = shape[-1]
    if last % group_size:
        raise ValueError(f"group_size={group_size} does not divide the last dimension of {name} "
                         f"(shape {tuple(shape)}); allowed values: divisors of {last}: {_divisors(last)}")
    return group_size


def exponent_shape(shape, group_size: int) -> tuple:
    """Shape of the exponent tensor for mantissas of ``shape``: one exponent per group."""
    return (*shape[:-1], shape[-1] // group_size)


def quantize_mxint8(w: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 mantissas (``w``'s shape) and uint8 exponents (``(*w.shape[:-1], K // group_size)``)."""
    if not isinstance(w, torch.Tensor) or not w.is_floating_point():
        raise TypeError(f"w must be a floating-point tensor, got {type(w).__name__}"
                        + (f" of dtype {w.dtype}" if isinstance(w, torch.Tensor) else ""))
    check_group_size(w.shape, group_size)
    shape = w.shape
    groups = w.detach().to(torch.float32).reshape(*shape[:-1], shape[-1] // group_size, group_size)
    amax = groups.abs().amax(dim=-1)                                   # NaN propagates; inf stays inf
    exponent = ((amax.contiguous().view(torch.int32) >> 23) & 0xFF)   # float32 exponent field
    # |w| / 2**(E-127) * 64 = |w| * 2**(133 - E); 2**(133 - E) built from float64 bits (exact, any E).
    scale = ((1023 + 133 - exponent.to(torch.int64)) << 52).view(torch.float64)
    mag = torch.round(groups.abs().to(torch.float64) * scale.unsqueeze(-1)).clamp_(0, MANTISSA_MAX)
    mantissa = torch.where(groups < 0, -mag, mag)
    mantissa = torch.where((exponent == NAN_EXPONENT).unsqueeze(-1), 0.0, mantissa)
    return mantissa.to(torch.int8).reshape(shape), exponent.to(torch.uint8)


def _check_pair(mantissa: torch.Tensor, exponent: torch.Tensor, group_size: int) -> torch.Tensor:
    """Validate a (mantissa, exponent) pair; returns the exponent flattened to one per group."""
    if not isinstance(mantissa, torch.Tensor) or mantissa.dtype != torch.int8:
        raise TypeError(f"mantissa must be a torch.int8 tensor, got "
                        f"{mantissa.dtype if isinstance(mantissa, torch.Tensor) else type(mantissa).__name__}")
    if not isinstance(exponent, torch.Tensor) or exponent.dtype != torch.uint8:
        raise TypeError(f"exponent must be a torch.uint8 tensor, got "
                        f"{exponent.dtype if isinstance(exponent, torch.Tensor) else type(exponent).__name__}")
    check_group_size(mantissa.shape, group_size, "mantissa")
    if mantissa.device != exponent.device:
        raise ValueError(f"mantissa is on {mantissa.device} but exponent on {exponent.device}")
    expected = exponent_shape(mantissa.shape, group_size)
    n_groups = mantissa.numel() // group_size
    if tuple(exponent.shape) != expected and tuple(exponent.shape) != (n_groups,):
        raise ValueError(f"exponent shape {tuple(exponent.shape)} does not match mantissa shape "
                         f"{tuple(mantissa.shape)} with group_size={group_size}; expected {expected} "
                         f"(or flat ({n_groups},))")
    return exponent.reshape(-1)


def dequantize_groups(m_groups: torch.Tensor, e_groups: torch.Tensor) -> torch.Tensor:
    """float32 values of ``m_groups`` (G, group_size) int8 with ``e_groups`` (G,) uint8: the formula alone.

    Plain tensor code (no checks), the version that eager PyTorch and torch.compile run in the benchmark.
    """
    e = e_groups.to(torch.int32)
    # 2**(E-127) as float32 bits; E = 0 means the same scale as the bf16 subnormal range, 2**-127.
    scale = torch.where(e == 0, 1 << 22, e << 23).view(torch.float32)
    values = m_groups.to(torch.float32) * (1 / 64) * scale.unsqueeze(-1)   # exact: no rounding anywhere
    return torch.where((e == NAN_EXPONENT).unsqueeze(-1), float("nan"), values)


def dequantize_mxint8(mantissa: torch.Tensor, exponent: torch.Tensor, group_size: int,
                      dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """``mantissa * 2**(exponent - 127) / 64`` in ``dtype`` (exact in bf16 and float32), ``mantissa``'s shape.

    ``exponent`` is ``(*mantissa.shape[:-1], K // group_size)`` as ``quantize_mxint8`` returns it, or flat.
    """
    e = _check_pair(mantissa, exponent, group_size)
    values = dequantize_groups(mantissa.reshape(-1, group_size), e).to(dtype)
    # One NaN bit pattern (0x7FC0 in bf16) whatever the conversion kernels do with NaN payloads/signs.
    nan = torch.full((), float("nan"), dtype=dtype, device=values.device)
    values = torch.where((e == NAN_EXPONENT).unsqueeze(-1), nan, values)
    return values.reshape(mantissa.shape)


class _FakeQuantize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group_size):
        mantissa, exponent = quantize_mxint8(x, group_size)
        return dequantize_mxint8(mantissa, exponent, group_size, dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad, None  # straight-through: rounding and clamping pass the gradient unchanged


def fake_quantize_mxint8(x: torch.Tensor, group_size: int) -> torch.Tensor:
    """Quantize to MXINT8 and back, in ``x``'s dtype, with a straight-through gradient.

    The one MXINT8 fake quantizer: ``make_format("mxint8")`` calls it too. STE: the gradient passes
    unchanged everywhere. The shared exponent follows the group max, so the clamp at 127 only catches
    the group max's own rounding (|x| in (127.5, 128) mantissa units, less than half a step off); a
    clipped STE would zero exactly that element's gradient and freeze it in QAT (0.6% of the groups of a
    Gaussian 4096 x 1024 weight, group 32).
    """
    return _FakeQuantize.apply(x, group_size)


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
    return fake_quantize_mxint8(flat, group_size)[..., :n].reshape(x.shape)


@register
@dataclass(frozen=True)
class MXInt8Format(NumberFormat):
    """Groups of ``group_size`` consecutive elements along the last dimension share one 8-bit exponent E.

    Value set of a group: ``{ m * 2^(E-127) / 64 : m in {-127, ..., 127} }`` with E in {0, ..., 255}
    (uint8, bias 127); quantization (Lab 4's sheet, computed by ``quantize_mxint8`` above):
    E = the group max's float exponent, m = sign * clamp(round(|x| / 2^(E-127) * 64), 0, 127), so the
    group max uses the full 7 magnitude bits and saturates at 127 only by rounding. Ragged last groups
    are zero-padded (the reference itself needs group_size to divide the last dimension). STE: the
    reference's, identity everywhere (see ``fake_quantize_mxint8``).
    Bits per element: 8 + 8 * ceil(n / group_size) / n for a last dimension n.
    """

    name = "mxint8"
    # width fixed by definition: groups of 32 (8.25 bits), nothing to search
    spec = FormatSpec(
        study=lambda w: {"group_size": 32},
        space={},
        fixed={"group_size": 32},
        why="8-bit mantissas with a shared exponent per 32 values",
        min_width=None)
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

    def row_local(self):  # groups along the last dimension, each row padded on its own
        return True

    def bits_per_element(self, shape):
        return 8.0 + SHARED_BITS * blocks_per_element(shape, self.group_size)

    def why_not_bf16(self, normal_only=False):
        return None  # m * 2^(E-133), |m| <= 127, E <= 254: 7 bits, steps >= 2^-133, max 127 * 2^121
