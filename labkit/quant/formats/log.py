"""``log``: sign plus a (width-1)-bit exponent code; every non-zero value is a signed power of two."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch

from ._util import check_exponent_range, check_range, finish, pow2, round_log2, why_not_bf16, work, work_dtype
from .base import FormatSpec, NumberFormat, Quantizer, hook, register

# A first batch where more than this share of the non-zero inputs flushes to zero or saturates makes a
# log quantizer warn: the format's range does not fit the tensor (the reference's silent collapse).
COLLAPSE_WARN_FRACTION = 0.5


@register
@dataclass(frozen=True)
class LogFormat(NumberFormat):
    """Signed powers of two with a reserved zero code.

    With n = width - 1 exponent bits and b = ``exponent_bias``, code 0 is zero and codes c = 1 .. 2^n - 1
    are 2^(c - b), so the value set is ``{0} U { +-2^e : e in {1-b, ..., emax} }``, emax = 2^n - 1 - b.
    Rounding is in the log domain, as the sheet's q = sign * 2^clamp(round(log2|x|), .., emax): |x| goes
    to 2^round(log2|x|) (the cell of 2^e is [2^(e-1/2), 2^(e+1/2)); log2|x| is never a tie), saturating
    at 2^emax. Zero: |x| < 2^-b (half the smallest magnitude 2^(1-b), the linear midpoint) flushes to 0;
    2^-b <= |x| < 2^(1/2-b) goes up to 2^(1-b). The clipped STE passes where |x| < 2^(emax+1/2) (the top
    cell) and is zero beyond; flushed values keep the gradient.

    Default bias: 2^(n-1), which centres the range on 1 (width 8: 2^-63 .. 2^63; width 4: 2^-3 .. 2^3;
    width 2: {0, +-1}). The reference's 2^(n-1)-1 without a zero code maps everything below 2^-b to
    +-2^-b: at width 4 every weight of magnitude < 1/8 became +-1/8 (the collapse). No fixed bias suits
    both weights (~0.05) and activations (~1-10) at 3 exponent bits, so give each role its own bias:
    ``bias_for(width, max_abs)`` puts the top value at round(log2 max|x|). As a guard, the quantizer
    module warns once if more than half of the first non-zero inputs it sees flush to zero or saturate.
    """

    name = "log"
    # Lab 3: the default bias 2^(width-2)
    spec = FormatSpec(
        study=lambda w: {"width": w},
        space={"width": (3, 4, 5, 6, 8)},
        fixed={},
        why="only powers of two, with a fixed exponent window: a relative error of up to ~41% near the middle "
            "between two powers, and values outside the window clip or vanish",
        hook="log_quantize")
    width: int = 8
    exponent_bias: int | None = None

    def __post_init__(self):
        if self.exponent_bias is None and isinstance(self.width, int) and self.width >= 2:
            object.__setattr__(self, "exponent_bias", 2 ** (self.width - 2))
        super().__post_init__()

    def validate(self):
        check_range(self.name, "width", self.width, 2, 11,
                    why="sign plus 1 .. 10 exponent bits (2^10 - 1 exponents span float64's range)")
        check_range(self.name, "exponent_bias", self.exponent_bias)
        check_exponent_range(self.name, -self.exponent_bias, self.emax + 1)

    @property
    def emin(self) -> int:
        return 1 - self.exponent_bias

    @property
    def emax(self) -> int:
        return 2 ** (self.width - 1) - 1 - self.exponent_bias

    def value_set(self) -> str:
        return f"{{0}} U {{+-2^e : {self.emin} <= e <= {self.emax}}}, |x| < 2^{self.emin - 1} -> 0"

    @staticmethod
    def bias_for(width: int, max_abs: float) -> int:
        """The bias whose largest value 2^emax is the power of two nearest (in log2) to ``max_abs``."""
        if not max_abs > 0 or not math.isfinite(max_abs):
            raise ValueError(f"log.bias_for: max_abs must be a positive finite number, got {max_abs}")
        top = int(round_log2(torch.tensor([float(max_abs)], dtype=torch.float64)).item())
        return 2 ** (width - 1) - 1 - top

    @property
    def dtype(self):
        return work_dtype(self.emin - 1, self.emax + 1, 1)

    def quantize_values(self, x):
        return log_quantize(x, self.width, self.exponent_bias)

    def row_local(self):  # elementwise
        return True

    def pass_mask(self, x):
        a = work(x, self.dtype)
        return ((round_log2(a) <= self.emax) & torch.isfinite(a)) | (a == 0)

    def bits_per_element(self, shape):
        return float(self.width)

    def why_not_bf16(self, normal_only=False):  # powers of two 2^emin .. 2^emax
        return why_not_bf16(self.describe(), 1, self.emin, 2.0 ** self.emax, normal_only)

    def quantizer(self):
        return LogQuantizer(self)


def _pow2(k, dtype: torch.dtype):
    """2^k: a Python float for an int ``k`` (a tensor made from it would be a host-to-device copy, which a
    CUDA-graphed QAT step cannot capture), ``pow2`` for a tensor."""
    return pow2(k, dtype) if isinstance(k, torch.Tensor) else 2.0 ** k


def log_round(a: torch.Tensor, emin, emax) -> torch.Tensor:
    """|x| (>= 0) to {0} U {2^e : emin <= e <= emax}; ``emin``/``emax`` are ints or per-block int tensors."""
    a = torch.clamp(a, max=_pow2(emax, a.dtype))  # saturate first (inf too); NaN stays NaN
    e = torch.clamp(round_log2(a), emin, emax)
    zero = a < _pow2(emin - 1, a.dtype)  # below half the smallest magnitude
    return torch.where(zero | torch.isnan(a), a * 0, pow2(e, a.dtype))


def log_values(x: torch.Tensor, width: int, bias: int) -> torch.Tensor:
    """``LogFormat(width, exponent_bias=bias)``'s values of ``x``, in ``x``'s dtype: sign(x) *
    2^clamp(round(log2|x|), 1 - bias, 2^(width-1) - 1 - bias), and 0 where |x| < 2^-bias."""
    emin, emax = 1 - bias, 2 ** (width - 1) - 1 - bias
    return finish(log_round(work(x, work_dtype(emin - 1, emax + 1, 1)), emin, emax), x)


@hook
def log_quantize(x: torch.Tensor, width: int, bias: int) -> torch.Tensor:
    """The ``log`` format's values (``log_values``). A module-level function (looked up at each call) so Lab 3's
    exercise can put a student's in its place."""
    return log_values(x, width, bias)


class LogQuantizer(Quantizer):
    """The log format as a module that checks, once, that its range fits the data it quantizes."""

    def __init__(self, fmt: LogFormat):
        super().__init__(fmt)
        self.checked = False

    def forward(self, x):
        self.observe(x)
        return super().forward(x)

    def inference(self, x, values=None):
        self.observe(x)
        return super().inference(x, values)

    def observe(self, x):
        if not self.checked:
            self.checked = True
            with torch.no_grad():
                a = work(x, self.fmt.dtype)
                nonzero = a > 0
                bad = (a < 2.0 ** (self.fmt.emin - 1)) | ~self.fmt.pass_mask(x)
                share = (bad & nonzero).sum().item() / max(1, nonzero.sum().item())
            if share > COLLAPSE_WARN_FRACTION:
                warnings.warn(f"{self.fmt.describe()}: {share:.0%} of the non-zero inputs flush to zero or "
                              f"saturate (range 2^{self.fmt.emin} .. 2^{self.fmt.emax}); set exponent_bias, "
                              "e.g. LogFormat.bias_for(width, max|x|)", RuntimeWarning, stacklevel=3)
