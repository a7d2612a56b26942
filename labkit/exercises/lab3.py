"""Lab 3's exercises: three number formats (lab3_formats: the denorm minifloat, the log format, block floating
point) and the bit cost of a per-layer configuration (lab3_search: average weight bits, accuracy - lambda x bits).

The three quantizers are checked against the format code of ``labkit.quant.formats`` (its module-level functions
``minifloat_denorm``, ``log_quantize`` and ``block_fp`` are what the formats call, so a passing function can take
their place: ``CheckResult.installed``); the bit cost against ``labkit.quant.bits.average_bits``' accounting.
"""
from __future__ import annotations

import math

import torch

from ..quant.bits import mean_bits
from ..quant.formats import BlockFP, LogFormat, MinifloatDenorm
from ..quant.formats._util import blocks_per_element
from ..quant.formats.block import block_fp_values
from ..quant.formats.log import log_values
from ..quant.formats.minifloat import denorm_values
from ..labs.lab3_precision import stored_tensor as _T
from .core import Case, differs, exercise

RAISES_VALUE_ERROR = "raises ValueError"


def _f32(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def _gen(rng) -> torch.Generator:
    return torch.Generator().manual_seed(rng.getrandbits(31))


def _below(v: float) -> float:
    """The float32 just below ``v`` (> 0)."""
    return torch.nextafter(_f32(v), _f32(0.0)).item()


def _sqrt2_neighbours(k: int) -> list[float]:
    """The two float32 values either side of sqrt(2) * 2^k: log2 of them is k + 1/2 -+ ~1e-8, which a float32
    log2 rounds to k + 1/2 itself."""
    near = _f32(math.sqrt(2.0) * 2.0 ** k)
    lo = near if near.double().item() < math.sqrt(2.0) * 2.0 ** k else torch.nextafter(near, _f32(0.0))
    return [lo.item(), torch.nextafter(lo, _f32(1e30)).item()]


# --- lab3.minifloat_denorm -------------------------------------------------------------------------------------

def _denorm_cases() -> list[Case]:
    return [
        Case("values of the format stay (width 8, E 4: M 3, bias 7)", (_f32([0.25, 1.5, -3.5, 0.875, 2.0 ** -10, 14.0, 224.0]), 8, 4),
             hint="m * 2^(e-M) with m < 2^M and -b <= e <= 2^E-1-b are the values; each must come back unchanged "
                  "(no implicit leading 1: in the binade (2, 4] the step is 2^(2-3) = 0.5)"),
        Case("powers of two are values too", (_f32([0.5, 2.0, 64.0, -0.125, 2.0 ** -7, 1.0]), 8, 4),
             hint="|x| = 2^e gives e = ceil(log2|x|) and a mantissa of exactly 2^M: that is 2^e itself (m = 2^(M-1) "
                  "one exponent up); clamping that mantissa to 2^M - 1 (the sheet's literal rule) returns "
                  "(1 - 2^-M) * |x|. Saturate |x| at the largest value first instead"),
        Case("ties go to the even mantissa", (_f32([1.125, 1.375, -1.125, 0.5625, 2.5 * 2.0 ** -10, 3.5 * 2.0 ** -10]), 8, 4),
             hint="torch.round rounds half to even: 1.125 is 4.5 steps of 0.25, so 1.0; floor(v + 0.5) goes up"),
        Case("saturation at the largest value (224)", (_f32([220.0, 229.0, 240.0, 256.0, 1000.0, -1e6]), 8, 4),
             hint="max = (2^M - 1) * 2^(emax - M) with emax = 2^E - 1 - b = 8: 7 * 2^5 = 224; larger |x| saturate to "
                  "it (240 would round to 8 * 32 = 256, which needs a mantissa of 2^M)"),
        Case("below the smallest step 2^(-b-M): flush or round up", (_f32([2.0 ** -12, 2.0 ** -11, 1.5 * 2.0 ** -11,
                                                                            3.0 * 2.0 ** -11, -2.0 ** -11, 1e-30]), 8, 4),
             hint="the exponent clamps at -b, so below 2^-b the grid stays 2^(-b-M): 2^-11 is half a step (a tie, "
                  "to 0), 1.5 * 2^-11 rounds to 2^-10. Without the clamp the grid keeps shrinking"),
        Case("zeros and negatives", (_f32([0.0, -0.0, -0.3, -7.9, 0.3]), 8, 4),
             hint="quantize |x| and put the sign back; log2(0) = -inf must still give 0"),
        Case("width 4, E 2: one mantissa bit (values 0, 0.25, 0.5, 1, 2)", (_f32([0.1, 0.13, 0.3, 0.75, 1.6, 3.0, -2.5, 0.2]), 4, 2),
             hint="M = width - E - 1 = 1, b = 1, emax = 2: the values are m * 2^(e-1), m in {0, 1}, e in {-1 .. 2}"),
        Case("width 3, E 1: {0, 0.5, 1}", (_f32([0.2, 0.25, 0.3, 0.74, 0.76, 5.0, -0.6]), 3, 1),
             hint="b = 2^(E-1) - 1 = 0, emax = 1, M = 1"),
        Case("float64, 2-D, width 8 E 2 (M 5: max 3.875)", (torch.tensor([[0.1, 0.33, 3.9], [-0.01, 2.0 ** -6, 1.03125]],
                                                                          dtype=torch.float64), 8, 2),
             hint="return the shape and dtype of x"),
        Case("a 3-D activation (batch, tokens, features), as PTQ and QAT feed it (width 8, E 4)",
             (_f32([[[0.3, -1.7, 9.5], [2.0 ** -9, 0.0, 300.0]], [[-0.06, 17.0, 1.125], [-240.0, 0.7, 2.0 ** -12]]]), 8, 4),
             hint="the same rule on any shape: elementwise, returning x's shape"),
    ]


def _denorm_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        width = rng.randint(3, 12)
        e_width = rng.randint(1, min(6, width - 2))
        m = width - e_width - 1
        b = 2 ** (e_width - 1) - 1
        emax = 2 ** e_width - 1 - b
        g = _gen(rng)
        # grid points and their midpoints (ties), values beyond max and below the smallest step, random values
        ks = torch.randint(0, 2 ** (m + 1), (12,), generator=g).double() / 2
        es = torch.randint(-b, emax + 1, (12,), generator=g).double()
        grid = ks * torch.exp2(es - m)
        rand = torch.randn(12, generator=g, dtype=torch.float64) * torch.exp2(
            torch.randint(-b - m - 2, emax + 2, (12,), generator=g).double())
        x = torch.cat([grid, rand]).float()
        cases.append(Case(f"random {i}: width {width}, E {e_width}", (x, width, e_width)))
    return cases


def _as_sheet(x, width, exponent_width, *, implicit=False, clamp_e=True, away=False, clamp_mantissa=False):
    """The denorm minifloat with one deliberate mistake (the mutants)."""
    m = width - exponent_width - 1
    b = 2 ** (exponent_width - 1) - 1
    emax = 2 ** exponent_width - 1 - b
    a = x.double().abs()
    if implicit:  # an IEEE-style leading 1: binade [2^e, 2^(e+1)), subnormal grid below 2^(1-b)
        top = (2 - 2.0 ** -m) * 2.0 ** emax
        a = a.clamp(max=top)
        e = torch.floor(torch.log2(a)).clamp(1 - b, emax)
    else:
        if not clamp_mantissa:
            a = a.clamp(max=(2 ** m - 1) * 2.0 ** (emax - m))
        e = torch.ceil(torch.log2(a))
        e = e.clamp(-b, emax) if clamp_e else torch.where(a == 0, torch.zeros_like(e), e)
    step = torch.exp2(e - m)
    k = torch.floor(a / step + 0.5) if away else torch.round(a / step)
    if clamp_mantissa:
        k = k.clamp(max=2 ** m - 1)
    return torch.copysign(k * step, x.double()).to(x.dtype)


@exercise(
    id="lab3.minifloat_denorm", on_device=True, notebook="lab3_formats", points=3,
    title="the denorm minifloat (no implicit bit, exponent clamp, saturation)",
    task="Lab 3, formats: minifloat denorm, E exponent bits, M = w-E-1 mantissa bits, no implicit bit",
    cases=_denorm_cases, hidden=_denorm_hidden,
    mutants={"implicit leading 1 (IEEE-style)": lambda x, w, e: _as_sheet(x, w, e, implicit=True),
             "no exponent clamp": lambda x, w, e: _as_sheet(x, w, e, clamp_e=False),
             "round half away from zero": lambda x, w, e: _as_sheet(x, w, e, away=True),
             "mantissa clamped to 2^M - 1 (the sheet's literal rule)":
                 lambda x, w, e: _as_sheet(x, w, e, clamp_mantissa=True)},
    hint="a = min(|x|, max); e = clamp(ceil(log2 a), -b, 2^E-1-b); q = sign(x) * round(a / 2^(e-M)) * 2^(e-M)",
    install="labkit.quant.formats.minifloat:minifloat_denorm",
)
def minifloat_denorm(x: torch.Tensor, width: int, exponent_width: int) -> torch.Tensor:
    fmt = MinifloatDenorm(width=width, exponent_width=exponent_width)  # labkit's validation of the parameters
    return denorm_values(x, fmt.width, fmt.exponent_width, fmt.exponent_bias)


# --- lab3.log ---------------------------------------------------------------------------------------------------

def _log_cases() -> list[Case]:
    return [
        Case("powers of two stay (width 4, bias 4: 2^-3 .. 2^3)", (_f32([0.125, 0.5, 1.0, 4.0, 8.0, -2.0]), 4, 4),
             hint="the values are 0 and +-2^e with 1 - bias <= e <= 2^(width-1) - 1 - bias"),
        Case("round in the log domain: the cut is sqrt(2) * 2^k, not 1.5 * 2^k", (_f32([1.45, 1.4, 2.9, 2.8, 0.36, -1.45]), 4, 4),
             hint="round(log2|x|): 1.45 has log2 0.54, so 2; the nearer power of two in value (1) is not the rule"),
        Case("float32 neighbours of sqrt(2) * 2^k", (_f32([v for k in (-5, -3, 1, 3, 7) for v in _sqrt2_neighbours(k)]), 8, 64),
             hint="log2 of these float32 values is k + 1/2 -+ 1e-8; torch.log2 in float32 returns k + 1/2 exactly and "
                  "round then goes to even. Compute log2 in float64 (x.double()), or compare with sqrt(2) * 2^floor"),
        Case("saturation at 2^emax", (_f32([8.0, 11.0, 12.0, 1e6, -100.0]), 4, 4),
             hint="clamp the exponent at 2^(width-1) - 1 - bias: 12 rounds to 2^4, which saturates to 2^3"),
        Case("flush to zero below 2^-bias, and up to 2^(1-bias) above", (_f32([0.05, 0.0625, 0.07, 0.09, 0.03, -0.06, 0.0]), 4, 4),
             hint="code 0 is zero, so the smallest power is 2^(1-bias) = 1/8; |x| < 2^-bias (half of it) flushes to 0, "
                  "2^-bias <= |x| goes up to 1/8. Mapping 0 or tiny values to the smallest power is the collapse"),
        Case("width 8, default bias 64 (2^-63 .. 2^63)", (_f32([0.02, -0.013, 0.5, 3e-5, 1e-25, 1e20, 0.0]), 8, 64),
             hint="1e-25 is below 2^-64: 0; 1e20 is beyond 2^63: saturates"),
        Case("width 2, bias 1: {0, +-1}", (_f32([0.3, 0.5, 0.49, 5.0, -0.7]), 2, 1),
             hint="emin = 1 - bias = 0 = emax: one power; |x| < 2^-1 flushes to 0"),
        Case("a fitted bias, float64 (width 5, bias 20: 2^-19 .. 2^-5)",
             (torch.tensor([[0.01, 0.04, 1.0], [1e-6, 5e-7, -0.02]], dtype=torch.float64), 5, 20),
             hint="emin = 1 - 20 = -19, emax = 15 - 20 = -5; return x's dtype and shape"),
        Case("a 3-D activation (batch, tokens, features), as PTQ and QAT feed it (width 8, bias 64)",
             (_f32([[[0.3, -1.7, 9.5], [1e-21, 0.0, 3e5]], [[-0.06, 17.0, 1.45], [-2.9, 0.7, 1e-25]]]), 8, 64),
             hint="the same rule on any shape: elementwise, returning x's shape"),
    ]


def _log_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        width = rng.randint(2, 9)
        bias = rng.randint(-2, 2 ** (width - 1) + 4)
        emin, emax = 1 - bias, 2 ** (width - 1) - 1 - bias
        g = _gen(rng)
        ex = torch.randint(emin - 3, emax + 3, (20,), generator=g).double()
        mant = torch.rand(20, generator=g, dtype=torch.float64) + 1.0
        sign = torch.where(torch.rand(20, generator=g) < 0.5, -1.0, 1.0).double()
        x = (sign * mant * torch.exp2(ex)).float()
        x[rng.randrange(20)] = 0.0
        cases.append(Case(f"random {i}: width {width}, bias {bias}", (x, width, bias)))
    return cases


def _log_wrong(x, width, bias, *, floor=False, clamp=True, zero_to_smallest=False, value_domain=False):
    emin, emax = 1 - bias, 2 ** (width - 1) - 1 - bias
    a = x.double().abs()
    lg = torch.log2(a)
    if floor:
        e = torch.floor(lg)
    elif value_domain:  # the nearer power of two in value: up iff |x| >= 1.5 * 2^floor
        f = torch.floor(lg)
        e = f + (a >= 1.5 * torch.exp2(f)).double()
    else:
        e = torch.round(lg)
    if clamp:
        e = e.clamp(emin, emax)
    q = torch.exp2(e)
    if not zero_to_smallest:
        q = torch.where(a < 2.0 ** (emin - 1), torch.zeros_like(q), q)
    else:
        q = torch.where(a == 0, torch.full_like(q, 2.0 ** emin), q)
    return torch.copysign(q, x.double()).to(x.dtype)


@exercise(
    id="lab3.log", on_device=True, notebook="lab3_formats", points=3,
    title="the log format (signed powers of two, log-domain rounding, a zero code)",
    task="Lab 3, formats: log, sign + (w-1) exponent bits, q = sign * 2^clamp(round(log2|x|), ..)",
    cases=_log_cases, hidden=_log_hidden,
    mutants={"floor of log2": lambda x, w, b: _log_wrong(x, w, b, floor=True),
             "no clamp": lambda x, w, b: _log_wrong(x, w, b, clamp=False),
             "zero mapped to the smallest power": lambda x, w, b: _log_wrong(x, w, b, zero_to_smallest=True),
             "rounding in the value domain": lambda x, w, b: _log_wrong(x, w, b, value_domain=True)},
    hint="e = clamp(round(log2|x|), 1 - bias, 2^(w-1) - 1 - bias); q = sign(x) * 2^e, and 0 where |x| < 2^-bias",
    install="labkit.quant.formats.log:log_quantize",
)
def log_quantize(x: torch.Tensor, width: int, bias: int) -> torch.Tensor:
    fmt = LogFormat(width=width, exponent_bias=bias)
    return log_values(x, fmt.width, fmt.exponent_bias)


# --- lab3.block_fp ----------------------------------------------------------------------------------------------

def _block_cases() -> list[Case]:
    return [
        Case("one block, its values exact (width 4: 3 mantissa bits)", (_f32([1.0, 2.0, -3.0, 0.5]), 4, 4),
             hint="s = floor(log2 max|x|) = 1, step 2^(s+1-M) = 0.5: every value is a multiple of the step"),
        Case("a ragged last block has its own exponent", (_f32([0.1, 0.2, 0.3, 0.4, 8.0, 0.3]), 4, 4),
             hint="blocks of block_size along the last dimension; the last 2 elements form a block of their own "
                  "(pad with zeros: they never change a block's max), with the exponent of their max, 8"),
        Case("an all-zero block stays zero (no NaN)", (_f32([0.0, 0.0, -0.0, 0.0, 1.0, -1.5, 0.25, 3.0]), 4, 4),
             hint="log2(0) = -inf: clamp the shared exponent to [-bias, 2^E-1-bias] (bias 127 for E 8) before 2^s, "
                  "or 0 * inf gives NaN"),
        Case("one large outlier flushes its block's small values", (_f32([0.01, -0.02, 0.03, 100.0, 0.5, -0.7, 1.2, 2.0]), 4, 8),
             hint="the shared exponent comes from the block's largest magnitude: 100 sets a step of 16"),
        Case("ties to even, and the top mantissa saturates", (_f32([7.9, 0.75, 2.5, 3.5, -0.5]), 4, 8),
             hint="7.9 rounds to 8 steps of 1, but M = 3 bits hold at most 7: clamp |k| to 2^M - 1; torch.round "
                  "sends 2.5 to 2 and 3.5 to 4"),
        Case("negatives: the max is of |x|, wherever it sits", (_f32([0.3, -6.0, 1.0, 2.2]), 5, 4),
             hint="max |x| over the whole block (here -6, the second element), not x.max() nor the first element"),
        Case("2-D: blocks along the last dimension, row by row", (torch.tensor([[0.5, 0.1, 0.2, 0.3, 4.0, 0.25],
                                                                             [-0.01, 0.02, 0.015, 0.003, 0.9, 1.7],
                                                                             [3.0, -2.0, 1.0, 0.0, 0.0, 0.0]]), 5, 4),
             hint="each row is blocked on its own (x.shape[-1] = 6: a block of 4 and a ragged block of 2 per row); "
                  "never across rows, never over the flattened tensor"),
        Case("few exponent bits: the shared exponent clamps (E 3: -3 .. 4)", (_f32([100.0, 1.0, 0.001, 0.002]), 4, 2, 3),
             hint="bias = 2^(E-1) - 1 = 3, so s lies in [-3, 4]: 100 gets s = 4 (and saturates at 7 * 4 = 28)"),
        Case("a block max just below a power of two (float32)", (_f32([_below(2.0 ** -7), 0.003, -0.0011, 0.0004]), 8, 4),
             hint="floor(log2 max) must be exact: torch.log2 in float32 returns -7.0 for the float32 just below "
                  "2^-7 (true: -7.0000001); use float64 (x.double()) or torch.frexp"),
        Case("a 3-D activation (batch, tokens, features), as PTQ and QAT feed it: blocks along the features",
             (torch.tensor([[[0.5, 0.1, 0.2, 0.3, 4.0, 0.25], [-0.01, 0.02, 0.015, 0.003, 0.9, 1.7]],
                            [[3.0, -2.0, 1.0, 0.0, 0.0, 0.0], [0.05, -0.4, 0.125, 6.0, -0.3, 0.02]]]), 5, 4),
             hint="block only the last dimension, each (batch, token) row on its own: reshape with *x.shape[:-1], "
                  "never over the flattened tensor nor across tokens"),
    ]


def _block_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        width = rng.randint(2, 9)
        block = rng.choice([1, 2, 3, 4, 8, 16])
        e_width = rng.choice([3, 4, 8])
        g = _gen(rng)
        rows, cols = rng.randint(1, 4), rng.randint(1, 40)
        scale = torch.exp2(torch.randint(-12, 8, (rows, cols), generator=g).float())
        x = torch.randn(rows, cols, generator=g) * scale
        if cols > block and rng.random() < 0.5:
            x[0, :block] = 0.0  # an all-zero block
        cases.append(Case(f"random {i}: width {width}, block {block}, E {e_width}, shape {rows}x{cols}",
                          (x, width, block, e_width)))
    return cases


def _block_wrong(x, width, block_size, exponent_width=8, *, whole=False, first=False, saturate=True):
    m = width - 1
    b = 2 ** (exponent_width - 1) - 1
    emax = 2 ** exponent_width - 1 - b
    xs = x.double().reshape(1) if x.dim() == 0 else x.double()
    n = xs.shape[-1]
    pad = (-n) % block_size
    blk = torch.nn.functional.pad(xs, (0, pad)).reshape(*xs.shape[:-1], (n + pad) // block_size, block_size)
    if whole:
        top = xs.abs().max().expand(*blk.shape[:-1], 1)
    elif first:
        top = blk[..., :1].abs()
    else:
        top = blk.abs().amax(dim=-1, keepdim=True)
    s = torch.floor(torch.log2(top)).clamp(-b, emax)
    step = torch.exp2(s + 1 - m)
    k = torch.round(blk / step)
    if saturate:
        k = k.clamp(-(2 ** m - 1), 2 ** m - 1)
    q = (k * step).reshape(*xs.shape[:-1], n + pad)[..., :n]
    return q.reshape(x.shape).to(x.dtype)


@exercise(
    id="lab3.block_fp", on_device=True, notebook="lab3_formats", points=3,
    title="block floating point (a shared exponent per block of the last dimension)",
    task="Lab 3, formats: block FP, one shared exponent per block from the block max, mantissas of w-1 bits plus sign",
    cases=_block_cases, hidden=_block_hidden,
    mutants={"one exponent for the whole tensor": lambda *a: _block_wrong(*a, whole=True),
             "exponent from the block's first element": lambda *a: _block_wrong(*a, first=True),
             "no saturation of the top mantissa": lambda *a: _block_wrong(*a, saturate=False)},
    hint="per block of the last dimension: s = clamp(floor(log2 max|x|), -bias, 2^E-1-bias), step = 2^(s+1-M), "
         "q = clamp(round(x / step), -(2^M-1), 2^M-1) * step, M = width - 1",
    install="labkit.quant.formats.block:block_fp",
)
def block_fp(x: torch.Tensor, width: int, block_size: int, exponent_width: int = 8) -> torch.Tensor:
    fmt = BlockFP(width=width, exponent_width=exponent_width, block_size=block_size)
    return block_fp_values(x, fmt.width, fmt.block_size, fmt.exponent_width, fmt.exponent_bias)


# --- lab3.average_bits: the bit cost of a per-layer configuration (notebook lab3_search) -------------------------

def _numel(shape) -> int:
    return math.prod(tuple(shape) or (1,))


def _tensor_bits(t: dict) -> float:
    """Stored bits per element of one tensor entry: ``width`` plus, when ``shared_bits``, one shared field per block
    of ``block_size`` along the last dimension (``block_size`` None: one field for the whole tensor), as the
    formats' ``bits_per_element`` count them."""
    shape, shared = tuple(t["shape"]), t.get("shared_bits", 0)
    if not shared:
        return float(t["width"])
    if t.get("block_size") is None:
        return float(t["width"]) + shared / _numel(shape)
    return t["width"] + shared * blocks_per_element(shape, t["block_size"])


def _cost_compare(expected, got):
    return differs(expected, got, atol=0.0, rtol=1e-12)


_cost_compare.tolerance = "|got - expected| <= 1e-12 * |expected| (float sums in any order)"


def _cost_cases() -> list[Case]:
    return [
        Case("one elementwise tensor: its width", (0.9, [_T((64, 32), 6)], 0.01),
             hint="weight_bits = sum(numel * bits per element) / sum(numel); cost = accuracy - lam * weight_bits"),
        Case("unequal sizes: weighted by element count", (0.85, [_T((100, 10), 4), _T((10,), 32)], 0.01),
             hint="(1000 * 4 + 10 * 32) / 1010, not the mean over tensors (4 + 32) / 2"),
        Case("a block format: the shared field amortised over its block", (0.8, [_T((8, 32), 6, 8, 16)], 0.001),
             hint="6 bits per element plus one 8-bit exponent per block of 16: 6 + 8 / 16 = 6.5"),
        Case("a ragged last block still stores a shared field", (0.8, [_T((3, 40), 6, 8, 16)], 0.002),
             hint="40 = 16 + 16 + 8: 3 blocks per row, so 8 * 3 / 40 bits per element; blocks never span rows"),
        Case("a 1-D bias is blocked along its own length", (0.7, [_T((20, 48), 5, 8, 32), _T((20,), 5, 8, 32)], 0.01),
             hint="a tensor's blocks run along its last dimension: the bias of 20 is one (ragged) block"),
        Case("one shared field for a whole tensor (block_size None)", (0.75, [_T((16, 16), 2, 64), _T((16,), 32)], 0.003),
             hint="block_size None: one field of shared_bits for the tensor, so shared_bits / numel per element"),
        Case("fp32 beside quantized layers, and a larger lambda", (0.91, [_T((384, 384), 8), _T((384,), 8), _T((2, 384), 32),
                                                                           _T((2,), 32)], 0.03),
             hint="an unquantized tensor counts 32 bits; cost = accuracy - lam * bits (the price lowers it)"),
        Case("lambda 0: the cost is the accuracy", (0.6, [_T((4, 4), 8, 8, 32)], 0.0),
             hint="lam = 0 prices bits at nothing; a block of 32 over 4 elements is one (ragged) block per row"),
        Case("the lab's sizes: a 384 x 1536 FFN weight in blocks of 1536 and its transpose's in blocks of 384",
             (0.56, [_T((384, 1536), 4, 8, 1536), _T((1536, 384), 3, 8, 384), _T((1536,), 5, 64),
                     _T((384,), 32)], 0.01),
             hint="one block per row when block_size is the row's length: shared_bits / last dim per element"),
        Case("no tensors: ValueError", (0.5, [], 0.01),
             hint="with nothing to count there is no average: raise ValueError (not ZeroDivisionError)"),
    ]


def _cost_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        tensors = []
        for _ in range(rng.randint(1, 6)):
            rows, cols = rng.randint(1, 300), rng.randint(1, 300)
            kind = rng.choice(["fp32", "plain", "block", "tensor"])
            for shape in ((rows, cols), (rows,)):
                if kind == "fp32":
                    tensors.append(_T(shape, 32))
                elif kind == "plain":
                    tensors.append(_T(shape, rng.randint(1, 16)))
                elif kind == "block":
                    tensors.append(_T(shape, rng.randint(2, 8), rng.choice([8, 32]), rng.choice([8, 16, 32])))
                else:
                    tensors.append(_T(shape, rng.randint(1, 3), 32 * rng.randint(1, 3)))
        cases.append(Case(f"random {i}: {len(tensors)} tensors", (rng.random(), tensors, rng.choice([0.0, 0.001, 0.01, 0.1]))))
    return cases


def _cost_from(bits_of, weighted=True, sign=1.0):
    def cost(accuracy, tensors, lam):
        if not tensors:
            raise ValueError("no tensors")
        if weighted:
            total = sum(_numel(t["shape"]) for t in tensors)
            bits = sum(bits_of(t) * _numel(t["shape"]) for t in tensors) / total
        else:
            bits = sum(bits_of(t) for t in tensors) / len(tensors)
        return {"weight_bits": bits, "cost": accuracy - sign * lam * bits}
    return cost


def _per_block_size(t):  # the shared field over block_size elements, whatever the last dimension
    if not t["shared_bits"]:
        return float(t["width"])
    size = t["block_size"] or _numel(t["shape"])
    return t["width"] + t["shared_bits"] / size


def _per_element(t):  # every element stores the shared field
    return float(t["width"] + t["shared_bits"])


@exercise(
    id="lab3.average_bits", notebook="lab3_search", points=2,
    title="the bit cost: average weight bits of a per-layer configuration, accuracy - lambda x bits",
    task="Lab 3, search: the cost accuracy - lambda x average weight bits of a per-layer configuration",
    cases=_cost_cases, hidden=_cost_hidden, expect_raises=("ValueError",), compare=_cost_compare,
    mutants={"unweighted mean over tensors": _cost_from(_tensor_bits, weighted=False),
             "shared field / block_size (ragged blocks ignored)": _cost_from(_per_block_size),
             "shared field stored per element": _cost_from(_per_element),
             "cost adds lambda x bits (sign of lambda)": _cost_from(_tensor_bits, sign=-1.0)},
    hint="per tensor: width + shared_bits * (blocks along the last dim per row) / (last dim), or shared_bits / numel "
         "for block_size None; weight by numel; cost = accuracy - lam * weight_bits; ValueError when empty",
)
def bit_cost(accuracy: float, tensors: list[dict], lam: float) -> dict:
    weight_bits = mean_bits([(_tensor_bits(t), _numel(t["shape"])) for t in tensors])  # average_bits' arithmetic
    return {"weight_bits": weight_bits, "cost": accuracy - lam * weight_bits}
