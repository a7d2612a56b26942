"""Block formats: blocks of ``block_size`` consecutive elements along the last (reduction) dimension share
one exponent field, chosen from the block's largest magnitude.

For a weight ``(out, in)`` and an activation ``(..., in)`` the last dimension is the reduction dimension
of the matmul; a 1-D bias is blocked along its only dimension. A last dimension that ``block_size`` does
not divide ends in a shorter (ragged) block, which shares its own exponent. Shared fields are counted in
``bits_per_element``: ``width + shared_bits * ceil(n / block_size) / n`` for a last dimension n.

The clipped STE passes the gradient where |x| <= the block's largest value + half the gap below it (in
log2 for block_log: half a binade) and is zero beyond (saturation): the block max itself lands there when
its rounding would carry it past the largest value, other elements only when the shared field clamps at
the end of its range. A NaN stays NaN and is left out of its block's max; +-inf saturates to the block's
top value (which, with 8-bit shared fields, lies beyond float32 and casts back to inf).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ._util import (F32_MAX_FLOOR_EXP, Blocks, blocks_per_element, check_exponent_range, check_range, finish,
                    floor_log2, pow2, pow2_pair, round_log2, round_to_step, why_not_bf16, work, work_dtype)
from .base import FormatSpec, NumberFormat, hook, register
from .log import log_round
from .minifloat import ieee_saturation


def _quantize_blocks(fmt, x, fn):
    """Apply ``fn(a_blocked, block_max) -> q_blocked`` to |x| in blocks (working precision), then restore
    x's shape and sign."""
    blk = Blocks(work(x, fmt.dtype), fmt.block_size)
    return finish(blk.restore(fn(blk.blocked, blk.block_max())), x)


def _mask_blocks(fmt, x, fn):
    blk = Blocks(work(x, fmt.dtype), fmt.block_size)
    return blk.restore(fn(blk.blocked, blk.block_max()))


def _block_fp_step_exp(block_max, width: int, exponent_bias: int, emax: int):
    """log2 of each block's step 2^(s+1-M), s = clamp(floor(log2 block_max), -b, emax), M = width - 1."""
    # clamp before frexp: an infinite max saturates to the top exponent
    s = floor_log2(torch.clamp(block_max, max=2.0 ** (emax + 1)))
    return s.clamp(-exponent_bias, emax) + 1 - (width - 1)


def block_fp_values(x, width: int, block_size: int, exponent_width: int, exponent_bias: int):
    """``BlockFP(width, exponent_width, exponent_bias, block_size)``'s values of ``x``, in ``x``'s dtype (see
    the class); the arguments are those of a valid format."""
    m = width - 1
    emax = 2 ** exponent_width - 1 - exponent_bias
    kmax = 2 ** m - 1
    blk = Blocks(work(x, work_dtype(-exponent_bias + 1 - m, emax + 1, m)), block_size)
    a, mx = blk.blocked, blk.block_max()
    step, inv = pow2_pair(_block_fp_step_exp(mx, width, exponent_bias, emax), a.dtype)
    return finish(blk.restore(torch.round(a * inv).clamp(max=kmax) * step), x)


@hook
def block_fp(x, width: int, block_size: int, exponent_width: int = 8):
    """``block_fp(width, exponent_width, block_size)`` with its default bias 2^(E-1)-1: ``x``'s values.

    A module-level function (looked up at each call) so Lab 3's exercise can put a student's in its place."""
    return block_fp_values(x, width, block_size, exponent_width, 2 ** (exponent_width - 1) - 1)


@register
@dataclass(frozen=True)
class BlockFP(NumberFormat):
    """Block floating point: per block one shared exponent s, per element a sign and M = width - 1 bits.

    Block value set: ``{ k * 2^(s+1-M) : k in {-(2^M-1), ..., 2^M-1} }`` (sign-magnitude, symmetric),
    with s = clamp(floor(log2 max|x_block|), -b, 2^E-1-b) stored in ``exponent_width`` = E bits,
    b = ``exponent_bias`` (default 2^(E-1)-1). So the block max lies in [2^s, 2^(s+1)) and uses all M bits;
    round to nearest, ties to even k, saturating at k = +-(2^M-1). An all-zero block stays zero.
    width=8, E=8, b=127 and block_size=g is ``mxint8`` with group_size=g for finite inputs (s = E - 127; a
    zero or subnormal block max clamps to s = -127, MXINT8's E = 0); inf/NaN differ (MXINT8: NaN group).
    """

    name = "block_fp"
    # Lab 3: blocks of 16 along the reduction dimension, 8-bit shared exponents (fixed in the search)
    spec = FormatSpec(
        study=lambda w: {"width": w, "exponent_width": 8, "block_size": 16},
        space={"width": (3, 4, 5, 6, 8), "block_size": (16, 32)},
        fixed={"exponent_width": 8},
        why="one shared exponent per block: small values next to a large one in the same block lose their "
            "mantissa bits",
        hook="block_fp")
    width: int = 8
    exponent_width: int = 8
    exponent_bias: int | None = None
    block_size: int = 16

    def __post_init__(self):
        if self.exponent_bias is None and isinstance(self.exponent_width, int) and self.exponent_width >= 1:
            object.__setattr__(self, "exponent_bias", 2 ** (self.exponent_width - 1) - 1)
        super().__post_init__()

    def validate(self):
        check_range(self.name, "width", self.width, 2, 53, why="sign plus 1 .. 52 mantissa bits")
        check_range(self.name, "exponent_width", self.exponent_width, 1, 11)
        check_range(self.name, "exponent_bias", self.exponent_bias)
        check_range(self.name, "block_size", self.block_size, 1)
        m = self.width - 1
        check_exponent_range(self.name, -self.exponent_bias + 1 - m, self.emax + 1)

    @property
    def emax(self) -> int:
        return 2 ** self.exponent_width - 1 - self.exponent_bias

    @property
    def dtype(self):
        m = self.width - 1
        return work_dtype(-self.exponent_bias + 1 - m, self.emax + 1, m)

    def value_set(self) -> str:
        m = self.width - 1
        return (f"per block of {self.block_size}: {{k * 2^(s-{m - 1}) : |k| <= {2 ** m - 1}}}, "
                f"s = clamp(floor(log2 max|x|), {-self.exponent_bias}, {self.emax}) in {self.exponent_width} bits")

    def _step_exp(self, block_max):
        return _block_fp_step_exp(block_max, self.width, self.exponent_bias, self.emax)

    def quantize_values(self, x):
        if self.exponent_bias == 2 ** (self.exponent_width - 1) - 1:
            return block_fp(x, self.width, self.block_size, self.exponent_width)  # the default bias: Lab 3's hook
        return block_fp_values(x, self.width, self.block_size, self.exponent_width, self.exponent_bias)

    def pass_mask(self, x):
        half_above = 2 ** (self.width - 1) - 0.5
        return _mask_blocks(self, x, lambda a, mx: a <= half_above * pow2(self._step_exp(mx), a.dtype))

    def row_local(self):  # blocks along the last dimension
        return True

    def bits_per_element(self, shape):
        return self.width + self.exponent_width * blocks_per_element(shape, self.block_size)

    def why_not_bf16(self, normal_only=False):
        # k * 2^(s+1-M), |k| < 2^M; s >= -b, and s <= 127 for a finite float32/bf16 block max
        m = self.width - 1
        top = min(self.emax, F32_MAX_FLOOR_EXP)
        return why_not_bf16(self.describe(), m, -self.exponent_bias + 1 - m, (2 ** m - 1) * 2.0 ** (top + 1 - m),
                            normal_only)


@register
@dataclass(frozen=True)
class BlockMinifloat(NumberFormat):
    """Minifloat elements (``minifloat_ieee`` with E = ``exponent_width``, M = width - 1 - E, element bias
    b_e = 2^(E-1)-1, top element exponent emax_e = 2^(E-1)) times a per-block power of two 2^beta.

    beta is the block's shared exponent bias, a two's-complement integer of ``exponent_bias_width`` = B
    bits: beta = clamp(floor(log2 max|x_block|) - emax_e, -2^(B-1), 2^(B-1)-1), so the block max lands in
    the elements' top binade. Block value set: ``2^beta * V`` with V the minifloat_ieee(width, E, b_e)
    value set (no inf/NaN; subnormals at the lowest element exponent), i.e. 0, +-m * 2^(beta+1-b_e-M) and
    +-(1 + m/2^M) * 2^(beta+e), 1-b_e <= e <= emax_e. Because the bias is a real scale, a block of small
    magnitudes keeps all of its precision (the reference flushed every |x| < 1 to zero). Round to nearest,
    ties to even mantissa, saturating at +-(2 - 2^-M) * 2^(beta+emax_e).
    """

    name = "block_minifloat"
    # Lab 3: E3 elements (fewer when the width is small), an 8-bit shared bias, blocks of 16
    spec = FormatSpec(
        study=lambda w: {"width": w, "exponent_width": min(3, w - 1), "exponent_bias_width": 8, "block_size": 16},
        space={"width": (4, 5, 6, 8), "exponent_width": (2, 3), "block_size": (16, 32)},
        fixed={"exponent_bias_width": 8},
        why="few mantissa bits per element, with a per-block exponent bias",
        exponent_leaves=1)
    width: int = 8
    exponent_width: int = 3
    exponent_bias_width: int = 8
    block_size: int = 16

    def validate(self):
        check_range(self.name, "width", self.width, 2, why="sign and >= 1 exponent bit")
        check_range(self.name, "exponent_width", self.exponent_width, 1, min(self.width - 1, 10),
                    why=f"width={self.width} must leave M = width - exponent_width - 1 >= 0 mantissa bits")
        check_range(self.name, "width", self.width, None, self.exponent_width + 53,
                    why="at most 52 mantissa bits (float64 arithmetic)")
        check_range(self.name, "exponent_bias_width", self.exponent_bias_width, 1, 9)
        check_range(self.name, "block_size", self.block_size, 1)
        lo, hi = self.beta_range
        check_exponent_range(self.name, lo + 1 - self.element_bias - self.mantissa_width,
                             hi + self.element_emax + 1)

    @property
    def mantissa_width(self) -> int:
        return self.width - 1 - self.exponent_width

    @property
    def element_bias(self) -> int:
        return 2 ** (self.exponent_width - 1) - 1

    @property
    def element_emax(self) -> int:
        return 2 ** self.exponent_width - 1 - self.element_bias

    @property
    def beta_range(self) -> tuple[int, int]:
        return -(2 ** (self.exponent_bias_width - 1)), 2 ** (self.exponent_bias_width - 1) - 1

    @property
    def dtype(self):
        lo, hi = self.beta_range
        return work_dtype(lo + 1 - self.element_bias - self.mantissa_width, hi + self.element_emax + 1,
                          self.mantissa_width)

    def value_set(self) -> str:
        lo, hi = self.beta_range
        return (f"per block of {self.block_size}: 2^beta * minifloat_ieee(width={self.width}, "
                f"exponent_width={self.exponent_width}, bias={self.element_bias}) values, beta = "
                f"clamp(floor(log2 max|x|) - {self.element_emax}, {lo}, {hi}) in {self.exponent_bias_width} bits")

    def _beta(self, block_max):
        lo, hi = self.beta_range
        top = floor_log2(torch.clamp(block_max, max=2.0 ** (hi + self.element_emax + 1)))
        return (top - self.element_emax).clamp(lo, hi)

    def quantize_values(self, x):
        m, eb, emax = self.mantissa_width, self.element_bias, self.element_emax

        def fn(a, mx):
            beta = self._beta(mx)
            a = torch.minimum(a, (2 - 2.0 ** -m) * pow2(beta + emax, a.dtype))  # saturate (inf too)
            e = torch.clamp(floor_log2(a), beta + 1 - eb, beta + emax)  # binade, or the subnormal grid
            return round_to_step(a, e - m)
        return _quantize_blocks(self, x, fn)

    def pass_mask(self, x):
        top = ieee_saturation(self.exponent_width, self.mantissa_width)
        return _mask_blocks(self, x, lambda a, mx: a <= top * pow2(self._beta(mx) + self.element_emax, a.dtype))

    def row_local(self):  # blocks along the last dimension
        return True

    def bits_per_element(self, shape):
        return self.width + self.exponent_bias_width * blocks_per_element(shape, self.block_size)

    def why_not_bf16(self, normal_only=False):
        # 2^beta times minifloat_ieee values: subnormal steps from 2^(lo+1-b_e-M); beta + emax_e <= 127 for a
        # finite float32/bf16 block max
        m, (lo, hi) = self.mantissa_width, self.beta_range
        top = min(hi + self.element_emax, F32_MAX_FLOOR_EXP)
        return why_not_bf16(self.describe(), m + 1, lo + 1 - self.element_bias - m, (2 - 2.0 ** -m) * 2.0 ** top,
                            normal_only)


@register
@dataclass(frozen=True)
class BlockLog(NumberFormat):
    """Log elements (sign + n = width - 1 bit exponent code, code 0 = zero) with a per-block bias.

    Each block stores its top exponent t = clamp(round(log2 max|x_block|), -2^(B-1), 2^(B-1)-1) in
    ``exponent_bias_width`` = B bits (the per-block bias is 2^n - 1 - t); codes 1 .. 2^n-1 are the
    exponents t - 2^n + 2 .. t. Block value set: ``{0} U { +-2^e : t - 2^n + 2 <= e <= t }``. Rounding as
    in ``log``: 2^round(log2|x|) in the log domain, |x| below half the block's smallest magnitude flushes
    to zero, saturating at 2^t (only reached by the block max's own rounding or a clamped t).

    Same as ``log`` wherever both windows hold the data: a log element has no mantissa, so the block bias
    only slides the window of 2^n - 1 exponents, and inside both windows both give 2^round(log2|x|). At
    width 8 (127 exponents) ``log``'s fixed 2^-63 .. 2^63 already holds every weight and activation of
    the Lab 3 models (pretrained minilm-l2 weights: 2^-27 .. 2^3), so the two agree bit for bit there
    (Lab 3's equal 8-bit PTQ accuracy and SNR); they differ where ``log``'s window does not fit: at small
    widths (width 4: 2^-3 .. 2^3, which flushes most weights) or for blocks beyond 2^+-63.
    """

    name = "block_log"
    spec = FormatSpec(
        study=lambda w: {"width": w, "exponent_bias_width": 8, "block_size": 16},
        space={"width": (3, 4, 5, 6, 8), "block_size": (16, 32)},
        fixed={"exponent_bias_width": 8},
        why="powers of two with a per-block window: like log, the mantissa-free rounding error remains")
    width: int = 8
    exponent_bias_width: int = 8
    block_size: int = 16

    def validate(self):
        check_range(self.name, "width", self.width, 2, 11, why="sign plus 1 .. 10 exponent bits")
        check_range(self.name, "exponent_bias_width", self.exponent_bias_width, 1, 9)
        check_range(self.name, "block_size", self.block_size, 1)
        lo, hi = self.top_range
        check_exponent_range(self.name, lo - 2 ** (self.width - 1) + 1, hi + 1)

    @property
    def top_range(self) -> tuple[int, int]:
        return -(2 ** (self.exponent_bias_width - 1)), 2 ** (self.exponent_bias_width - 1) - 1

    @property
    def dtype(self):
        lo, hi = self.top_range
        return work_dtype(lo - 2 ** (self.width - 1) + 1, hi + 1, 1)

    def value_set(self) -> str:
        lo, hi = self.top_range
        return (f"per block of {self.block_size}: {{0}} U {{+-2^e : t - {2 ** (self.width - 1) - 2} <= e <= t}}, "
                f"t = clamp(round(log2 max|x|), {lo}, {hi}) in {self.exponent_bias_width} bits")

    def _top(self, block_max):
        lo, hi = self.top_range
        return round_log2(torch.clamp(block_max, max=2.0 ** (hi + 1))).clamp(lo, hi)

    def quantize_values(self, x):
        span = 2 ** (self.width - 1) - 2

        def fn(a, mx):
            t = self._top(mx)
            return log_round(a, t - span, t)
        return _quantize_blocks(self, x, fn)

    def pass_mask(self, x):
        def inside(a, mx):
            return (a == 0) | (torch.isfinite(a) & (round_log2(a) <= self._top(mx)))
        return _mask_blocks(self, x, inside)

    def row_local(self):  # blocks along the last dimension
        return True

    def bits_per_element(self, shape):
        return self.width + self.exponent_bias_width * blocks_per_element(shape, self.block_size)

    def why_not_bf16(self, normal_only=False):
        # powers of two 2^(t - span) .. 2^t; t = round(log2 max) <= 128 for a finite float32/bf16 block max
        lo, hi = self.top_range
        span = 2 ** (self.width - 1) - 2
        return why_not_bf16(self.describe(), 1, lo - span, 2.0 ** min(hi, F32_MAX_FLOOR_EXP + 1), normal_only)
