"""Lab 4's exercises: an honest timer and naive attention (``lab4_perf``), the MXINT8 quantizer and the sheet's
decode by bit assembly (``lab4_mxint8``)."""
from __future__ import annotations

import math
import statistics

import torch

from ..kernels.sheet_decode import bits_of
from ..quant.formats.mxint import dequantize_mxint8, quantize_mxint8 as _quantize_mxint8
from ..perf.sdpa import naive_attention as _naive_attention
from ..perf.timing import Timing, clock_calls
from .core import Case, differs, exercise

# ------------------------------------------------------------------------------------------------
# lab4.timer: first call apart, warm-up out, median of the steady calls, synchronize before the clock
# ------------------------------------------------------------------------------------------------


def _timer_case(name, durations, repeats, warmup, hint, **kw) -> Case:
    extra = f", {kw['launch']:g} s of each on the host at the call" if kw.get("launch") else ""
    return Case(name, (list(durations), repeats, warmup), kw, hint=hint,
                show=f"call durations {[float(d) for d in durations]} s (done at sync{extra}), "
                     f"repeats={repeats}, warmup={warmup}")


def _timer_cases() -> list[Case]:
    return [
        _timer_case("the first call (compilation) is reported apart", [10.0, 2.0, 2.0, 1.0, 1.0, 1.0], 3, 2,
                    "first = the duration of call 0 alone; the median is over the last `repeats` calls only"),
        _timer_case("an even number of steady calls: the mean of the two middle ones", [8.0, 1.0, 1.0, 3.0, 2.0, 4.0],
                    4, 1, "statistics.median averages the two middle values (torch.median returns the lower one); "
                          "and leave call 0 out of the median"),
        _timer_case("warmup=0: the steady calls start right after the first", [6.0, 1.0, 2.0, 4.0], 3, 0,
                    "make 1 + warmup + repeats calls; with warmup=0 the steady calls are calls 1..repeats"),
        _timer_case("repeats=1: the median of one call is that call", [5.0, 3.0, 0.5], 1, 1,
                    "the warm-up calls (here call 1) are made but left out of both numbers"),
        _timer_case("an outlier among the steady calls", [4.0, 1.0, 1.0, 1.0, 50.0, 1.0, 1.0], 5, 1,
                    "a median ignores one slow call (a page fault, a busy core); a mean would not"),
        _timer_case("slow warm-up calls are not steady calls", [9.0, 6.0, 5.0, 4.0, 1.0, 1.5, 1.0], 3, 3,
                    "the warm-up calls settle caches and autotuners: leave calls 1..warmup out of the median"),
        _timer_case("the lab's 20 repeats after 2 warm-up calls", [7.0, 2.0, 1.5] + [1.0, 0.5] * 10, 20, 2,
                    "the median of the last `repeats` calls: with 20 of them, the mean of the 10th and 11th smallest"),
        _timer_case("the work finishes only at sync (an asynchronous device)", [3.0, 1.5, 0.75, 0.5, 0.75], 3, 1,
                    "call sync() after fn() and before reading the clock; otherwise only the launch is timed",
                    launch=0.25),
    ]


def _timer_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        warmup, repeats = rng.randint(0, 3), rng.randint(1, 24)
        durations = [rng.randint(40, 400) / 8] + [rng.randint(1, 64) / 16 for _ in range(warmup + repeats)]
        launch = rng.choice([0.0, 0.0, 1 / 16])
        extra = {"launch": launch} if launch else {}
        cases.append(_timer_case(f"random {i}", durations, repeats, warmup, None, **extra))
    return cases


def _timer_first_in_median(fn, repeats, warmup, clock, sync):
    times = clock_calls(fn, 1 + warmup + repeats, clock, sync)
    return {"first": times[0], "median": statistics.median([times[0]] + times[1 + warmup:])}


def _timer_mean(fn, repeats, warmup, clock, sync):
    times = clock_calls(fn, 1 + warmup + repeats, clock, sync)
    steady = times[1 + warmup:]
    return {"first": times[0], "median": sum(steady) / len(steady)}


def _timer_no_sync(fn, repeats, warmup, clock, sync):
    times = clock_calls(fn, 1 + warmup + repeats, clock)  # never waits for the device
    return {"first": times[0], "median": statistics.median(times[1 + warmup:])}


def _timer_warmup_in_median(fn, repeats, warmup, clock, sync):
    times = clock_calls(fn, 1 + warmup + repeats, clock, sync)
    return {"first": times[0], "median": statistics.median(times[1:])}


@exercise(
    id="lab4.timer", spans=("repeats", "warmup"), notebook="lab4_perf", points=3,
    title="an honest timer (first call apart, warm-up out, median, synchronize before the clock)",
    task="Lab 4, part 1: time torch.compile on ResNet-18 (the sheet averages 5 calls with no warm-up)",
    cases=_timer_cases, hidden=_timer_hidden, runner="fake_device",
    mutants={"first call counted in the median": _timer_first_in_median, "mean instead of median": _timer_mean,
             "clock read without sync": _timer_no_sync, "warm-up calls in the median": _timer_warmup_in_median},
    hint="make 1 + warmup + repeats calls; per call: sync(), t0 = clock(), fn(), sync(), clock() - t0; "
         "first = call 0, median of the last `repeats` calls",
)
def time_calls(fn, repeats: int, warmup: int, clock, sync) -> dict:
    t = Timing(device="cpu", warmup=warmup, per_call=clock_calls(fn, 1 + warmup + repeats, clock, sync))
    return {"first": t.first, "median": t.steady_median}


# ------------------------------------------------------------------------------------------------
# lab4.naive_attention: softmax(Q K^T / sqrt(d)) V, optionally causal
# ------------------------------------------------------------------------------------------------

def _randn(shape, seed: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale


def _qkv(q_shape, k_len: int | None = None, seed: int = 0, scale: float = 1.0):
    *lead, lq, d = q_shape
    k_shape = (*lead, lq if k_len is None else k_len, d)
    return _randn(q_shape, seed, scale), _randn(k_shape, seed + 1, scale), _randn(k_shape, seed + 2)


def _attn_case(name, qkv, kwargs=None, hint=None, show=None) -> Case:
    q, k, _ = qkv
    shown = show or f"q {tuple(q.shape)}, k and v {tuple(k.shape)}, float32"
    if kwargs:
        shown += ", " + ", ".join(f"{key}={val}" for key, val in kwargs.items())
    return Case(name, tuple(qkv), dict(kwargs or {}), show=shown, hint=hint)


def _attention_cases() -> list[Case]:
    # large magnitudes: integers (exact products) with d = 4 (scale 1/2): scores reach ~1e4, exp overflows
    # float32 beyond 88, so the softmax must subtract the row max
    big_q = torch.tensor([[[30.0, -60.0, 90.0, 12.0], [-45.0, 80.0, 10.0, -70.0], [95.0, 5.0, -40.0, 66.0]]])
    big_k = torch.tensor([[[50.0, -20.0, 70.0, 33.0], [-90.0, 60.0, 25.0, -15.0], [40.0, 40.0, -80.0, 90.0],
                           [-10.0, -95.0, 55.0, 20.0]]])
    big_v = _randn((1, 4, 4), 7)
    return [
        _attn_case("batch and heads: (batch, heads, seq, d)", _qkv((2, 3, 5, 8), seed=0),
                   hint="softmax(q @ k.transpose(-2, -1) / sqrt(d), dim=-1) @ v, over the last two dims only"),
        _attn_case("the scale is 1/sqrt(d) with d = the head dim (16 here)",
                   _qkv((1, 2, 4, 16), seed=10, scale=2.0),
                   hint="d is q.shape[-1] (the head dim), not the sequence length"),
        _attn_case("softmax over the keys (each query's weights sum to 1)", _qkv((1, 1, 6, 4), k_len=3, seed=20),
                   hint="the softmax runs along the keys: dim=-1 of the (queries x keys) score matrix"),
        _attn_case("seq 1: one query, one key", _qkv((2, 1, 1, 8), seed=30),
                   hint="one key gets weight 1: the output is v"),
        _attn_case("causal: query i sees keys 0..i", _qkv((1, 2, 5, 8), seed=40), {"is_causal": True},
                   hint="mask the scores above the diagonal (key j > query i) with -inf before the softmax "
                        "(torch.ones(Lq, Lk).tril() marks what is kept)"),
        _attn_case("causal with fewer queries than keys (top-left aligned, as SDPA)",
                   _qkv((1, 1, 3, 4), k_len=6, seed=50), {"is_causal": True},
                   hint="query i sees keys 0..i of the Lk keys: tril of the (Lq, Lk) matrix"),
        _attn_case("no leading dims: (seq, d)", _qkv((4, 8), k_len=5, seed=60),
                   hint="use dims -2 and -1, not 1 and 2"),
        _attn_case("large scores (~1e4): the softmax must stay finite", (big_q, big_k, big_v),
                   show="q (1, 3, 4), k and v (1, 4, 4): q, k integers up to 95, d = 4, scores up to ~1.4e4",
                   hint="exp(88) overflows float32: subtract each row's max before exp, or use torch.softmax, "
                        "which does"),
    ]


def _attention_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        lead = [rng.randint(1, 3) for _ in range(rng.randint(0, 2))]
        lq, d = rng.randint(1, 9), rng.choice([4, 8, 16, 32])
        lk = lq if rng.random() < 0.5 else rng.randint(1, 9)
        causal = rng.random() < 0.5
        q, k, v = _qkv((*lead, lq, d), k_len=lk, seed=rng.getrandbits(31), scale=rng.choice([0.5, 1.0, 3.0]))
        cases.append(_attn_case(f"random {i}", (q, k, v), {"is_causal": causal}))
    return cases


def _attn_no_scale(q, k, v, is_causal=False):
    return _naive_attention(q, k, v, is_causal=is_causal, scale=1.0)


def _attn_wrong_dim(q, k, v, is_causal=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-2) @ v


def _attn_wrong_triangle(q, k, v, is_causal=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _attn_unstable(q, k, v, is_causal=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    e = scores.exp()
    return e / e.sum(-1, keepdim=True) @ v


@exercise(
    id="lab4.naive_attention", on_device=True, notebook="lab4_perf", points=3,
    title="naive attention: softmax(Q K^T / sqrt(d)) V, optionally causal",
    task="Lab 4, part 2: naive attention vs F.scaled_dot_product_attention",
    cases=_attention_cases, hidden=_attention_hidden, atol=1e-6, rtol=1e-5,
    mutants={"no 1/sqrt(d) scale": _attn_no_scale, "softmax over the queries (dim=-2)": _attn_wrong_dim,
             "causal mask on the wrong triangle": _attn_wrong_triangle,
             "exp without subtracting the max": _attn_unstable},
    hint="scores = q @ k.transpose(-2, -1) / sqrt(q.shape[-1]); causal: -inf where key > query; "
         "torch.softmax(scores, dim=-1) @ v",
)
def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    return _naive_attention(q, k, v, is_causal=is_causal)


# ------------------------------------------------------------------------------------------------
# lab4.mxint8_quantize: E = the group max's float exponent field, m = sign * clamp(round(|w| * 2^(133-E)), 0, 127)
# ------------------------------------------------------------------------------------------------

def _quantize_cases() -> list[Case]:
    t = torch.tensor
    return [
        Case("ties round half to even", (t([1.0, 0.5 / 64, 1.5 / 64, 2.5 / 64, -2.5 / 64, 3.5 / 64, -0.5 / 64,
                                            126.5 / 64]), 8),
             hint="torch.round rounds half to even: 2.5 -> 2, 3.5 -> 4, 126.5 -> 126"),
        Case("the group max is exactly a power of two", (t([2.0, 1.0, -0.5, 0.3]), 4),
             hint="2.0 = 1.0 x 2^1: E = 127 + 1 = 128 and 2.0 gets m = 64, not 128"),
        Case("the group max just below a power of two (2^20 - 1/16)", (t([1048575.9375, 524288.0, -3.0, 0.0]), 4),
             hint="E comes from the float's exponent field (19 + 127 here): float32 floor(log2(x)) rounds up to 20 "
                  "for x just below 2^20; use torch.frexp (exponent - 1) or the float32 bits"),
        Case("saturation: |w| * scale rounds to 128", (t([1.999, -1.995, 0.5, 1.0]), 4),
             hint="clamp |m| to 127 after rounding: 1.999 * 64 = 127.9 rounds to 128, which int8 cannot hold"),
        Case("an all-zero group has E = 0", (t([[0.0, -0.0, 0.0, 0.0], [1.0, 2.0, 3.0, -4.0]]), 4),
             hint="the float32 exponent field of 0.0 is 0, so E = 0 (and every m = 0); frexp(0) gives "
                  "exponent 0, log2(0) = -inf: treat amax == 0 apart"),
        Case("negatives: the sign comes from w, the rounding from |w|", (t([-1.0, -0.75, 0.5, -0.1, -2.5 / 64,
                                                                             -3.5 / 64, 0.25, -0.5]), 8),
             hint="m = sign(w) * round(|w| * 2^(133 - E)): rounding |w| keeps ties symmetric (-2.5 -> -2)"),
        Case("several groups of a 2-D weight, each its own E", (t([[0.01, -0.02, 0.03, 0.04, 100.0, -50.0, 25.0, 1.0],
                                                                   [1e-3, 0.0, 0.0, 0.0, -3.0, 3.0, 0.75, -0.125]]), 4),
             hint="groups are consecutive runs of group_size along the last dim; exponent has shape "
                  "(*w.shape[:-1], K // group_size)"),
        Case("the lab's group of 128 (one exponent for a whole row here)",
             (torch.linspace(-3.0, 2.0, 256).reshape(2, 128) * torch.tensor([[1.0], [1e-3]]), 128),
             hint="the exponent has one entry per group: shape (*w.shape[:-1], K // 128)"),
        Case("group_size 1: an exponent per element", (t([3.0, -0.1, 0.0, 1e-3, 6.5e4]), 1),
             hint="with group_size 1 each element is its own group: |m| is 64..127 unless w is 0"),
    ]


def _quantize_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        g = rng.choice([1, 2, 4, 8, 16, 32, 128])
        rows, groups = rng.randint(1, 3), rng.randint(1, 4)
        w = _randn((rows, groups * g), rng.getrandbits(31), scale=10.0 ** rng.randint(-6, 6))
        if rng.random() < 0.5:   # an all-zero group
            r, c = rng.randrange(rows), rng.randrange(groups)
            w[r, c * g:(c + 1) * g] = 0.0
        if g >= 2 and rng.random() < 0.5:  # ties: (j + 1/2) steps of a group whose max is a power of two
            e = rng.randint(-20, 20)
            w[0, :g] = torch.tensor([2.0 ** e] + [(rng.randint(-126, 126) + 0.5) / 64 * 2.0 ** e
                                                  for _ in range(g - 1)])
        cases.append(Case(f"random {i}: shape {tuple(w.shape)}, group_size {g}", (w, g)))
    return cases


def _exponent_field(amax: torch.Tensor) -> torch.Tensor:
    return (amax.float().contiguous().view(torch.int32) >> 23) & 0xFF


def _quantize_with(w, group_size, e_of, rounding=torch.round, clamp=True):
    groups = w.float().reshape(*w.shape[:-1], w.shape[-1] // group_size, group_size)
    e = e_of(groups.abs())
    mag = rounding(groups.abs().double() * torch.pow(2.0, (133 - e).double()).unsqueeze(-1))
    if clamp:
        mag = mag.clamp(0, 127)
    m = torch.where(groups < 0, -mag, mag)
    return m.to(torch.int8).reshape(w.shape), e.to(torch.uint8)


def _q_floor(w, group_size):
    return _quantize_with(w, group_size, lambda a: _exponent_field(a.amax(-1)), rounding=torch.floor)


def _q_no_clamp(w, group_size):
    return _quantize_with(w, group_size, lambda a: _exponent_field(a.amax(-1)), clamp=False)


def _q_min_exponent(w, group_size):
    return _quantize_with(w, group_size, lambda a: _exponent_field(a.amin(-1)))


def _q_log2(w, group_size):
    def e_of(a):
        amax = a.amax(-1)
        return torch.where(amax > 0, torch.floor(torch.log2(amax)) + 127, torch.zeros_like(amax)).to(torch.int32)
    return _quantize_with(w, group_size, e_of)


@exercise(
    id="lab4.mxint8_quantize", on_device=True, notebook="lab4_mxint8", points=3,
    title="the MXINT8 quantizer (shared exponent, round half to even, saturate at 127)",
    task="Lab 4, part 3: quantize a weight to MXINT8 (int8 mantissas, one uint8 exponent per group)",
    cases=_quantize_cases, hidden=_quantize_hidden,
    mutants={"floor instead of round": _q_floor, "no clamp to 127": _q_no_clamp,
             "E from the group's min": _q_min_exponent, "E = floor(log2(amax)) in float32": _q_log2},
    hint="per group of group_size along the last dim: E = float32 exponent field of max|w| (0 for an all-zero "
         "group); m = sign(w) * clamp(round(|w| * 2^(133 - E)), 0, 127); return (m int8, E uint8)",
)
def quantize_mxint8(w: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    return _quantize_mxint8(w, group_size)


# ------------------------------------------------------------------------------------------------
# lab4.mxint8_decode: the sheet's bit assembly to bf16
# ------------------------------------------------------------------------------------------------

def _bf16_bits_equal(expected, got) -> str | None:
    why = differs(expected, got)   # shape, dtype, values
    if why is not None:
        return why
    bad = bits_of(expected) != bits_of(got)
    if bool(bad.any()):
        i = int(bad.flatten().nonzero()[0])
        return (f"{int(bad.sum())} of {expected.numel()} bf16 bit patterns differ; first at flat index {i}: "
                f"expected 0x{int(bits_of(expected).flatten()[i]):04X}, got 0x{int(bits_of(got).flatten()[i]):04X}")
    return None


_bf16_bits_equal.tolerance = "exact (bf16 bit patterns)"


def _pair(mantissas, exponents, shape=None):
    m = torch.tensor(mantissas, dtype=torch.int8)
    e = torch.tensor(exponents, dtype=torch.uint8)
    return (m if shape is None else m.reshape(shape)), e


def _decode_cases() -> list[Case]:
    return [
        Case("m = 0 decodes to 0 (bias cancels the implicit 1)", (*_pair([0, 0, 0, 0], [127]), 4),
             hint="for |m| < 64, out = bits(sign|exp|frac) reads 1.frac x 2^(E-127): subtract bias = bits(sign|exp)"),
        Case("|m| = 64: bit 6 set, out is already right", (*_pair([64, -64, 65, -65], [127]), 4),
             hint="when |m| & 0x40 the leading 1 is real: y = out, no subtraction"),
        Case("|m| = 127, the largest", (*_pair([127, -127, 1, -1], [127]), 4),
             hint="frac = (|m| & 0x3F) << 1: the low 6 bits of |m| go to bf16 fraction bits 6..1"),
        Case("small mantissas: out - bias", (*_pair([1, 2, 32, 63, -1, -33, 17, -63], [130]), 8),
             hint="|m| < 64 has no leading 1: y = out - bias, computed in float and rounded to bf16"),
        Case("E = 254, the largest scale (near bf16's max)", (*_pair([127, -127, 64, 3], [254]), 4),
             hint="exp = E << 7 fills bf16's exponent bits 14..7; 127/64 x 2^127 still fits in bf16"),
        Case("E = 1, the smallest normal scale (results go subnormal)", (*_pair([1, 64, -127, 5], [1]), 4),
             hint="out - bias can be a bf16 subnormal here; subtract in float32 and convert to bf16 once"),
        Case("an all-zero group (E = 0) beside another group", (*_pair([0, 0, 0, 0, 3, -100, 64, 127], [0, 127]), 4),
             hint="each group of group_size mantissas uses its own exponent (repeat_interleave along the last dim)"),
        Case("group_size 1: an exponent per mantissa (128 of them)", (*_pair(
                 [[(7 * i) % 255 - 127 for i in range(128)]], [[120 + i % 9 for i in range(128)]]), 1),
             hint="with group_size 1 each mantissa has its own exponent: repeat_interleave(1) changes nothing"),
        Case("the lab's groups of 32: four of them in a row", (*_pair(
                 [[(5 * i) % 255 - 127 for i in range(128)]], [[125, 131, 127, 3]]), 32),
             hint="exponent[..., j] scales mantissas j * group_size .. (j + 1) * group_size - 1"),
        Case("the lab's groups of 128: two of them", (*_pair(
                 [[(3 * i) % 255 - 127 for i in range(256)]], [[129, 118]]), 128),
             hint="exponent has shape (*mantissa.shape[:-1], K // group_size): here (1, 2)"),
        Case("several groups of a 2-D tensor", (*_pair([[1, -2, 100, -128 + 1, 64, 0, 5, -64],
                                                        [33, -33, 127, 0, -7, 90, 12, 1]], [[120, 135], [127, 3]]), 4),
             hint="exponent has shape (*mantissa.shape[:-1], K // group_size); return bf16 of mantissa's shape"),
    ]


def _decode_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        g = rng.choice([1, 2, 4, 8, 16, 32, 128])
        rows, groups = rng.randint(1, 3), rng.randint(1, 4)
        m = [[rng.randint(-127, 127) for _ in range(groups * g)] for _ in range(rows)]
        e = [[rng.randint(1, 254) for _ in range(groups)] for _ in range(rows)]
        if rng.random() < 0.5:   # an all-zero group, as the quantizer writes it
            r, c = rng.randrange(rows), rng.randrange(groups)
            m[r][c * g:(c + 1) * g] = [0] * g
            e[r][c] = 0
        cases.append(Case(f"random {i}: {rows} x {groups * g}, group_size {g}", (*_pair(m, e), g)))
    return cases


def _assemble(mantissa, exponent, group_size, sign_on=True, frac_shift=1, subtract=True):
    x = mantissa.to(torch.int32)
    e = exponent.to(torch.int32).repeat_interleave(group_size, dim=-1)
    a = x.abs()
    sign = ((x & 0x80) << 8) if sign_on else torch.zeros_like(x)
    exp = e << 7
    frac = (a & 0x3F) << frac_shift

    def bf16(bits):
        return torch.where(bits >= 0x8000, bits - 0x10000, bits).to(torch.int16).view(torch.bfloat16)

    out, bias = bf16(sign | exp | frac), bf16(sign | exp)
    if not subtract:
        return out
    return torch.where((a & 0x40) != 0, out, (out.float() - bias.float()).to(torch.bfloat16))


def _dec_no_bias(mantissa, exponent, group_size):
    return _assemble(mantissa, exponent, group_size, subtract=False)


def _dec_shift0(mantissa, exponent, group_size):
    return _assemble(mantissa, exponent, group_size, frac_shift=0)


def _dec_no_sign(mantissa, exponent, group_size):
    return _assemble(mantissa, exponent, group_size, sign_on=False)


@exercise(
    id="lab4.mxint8_decode", on_device=True, notebook="lab4_mxint8", points=3,
    title="decode MXINT8 to bf16 by the sheet's bit assembly",
    task="Lab 4, part 3 (3b): the kernel's decode of (mantissa, exponent) to bf16 by bit assembly",
    cases=_decode_cases, hidden=_decode_hidden, compare=_bf16_bits_equal,
    mutants={"no bias subtraction": _dec_no_bias, "frac not shifted (<< 0)": _dec_shift0,
             "sign dropped": _dec_no_sign},
    hint="x = m as int32, a = |x|: sign = (x & 0x80) << 8, exp = E << 7, frac = (a & 0x3F) << 1; out = bf16 of "
         "sign|exp|frac, bias = bf16 of sign|exp; y = out where a & 0x40 else out - bias",
)
def decode_mxint8(mantissa: torch.Tensor, exponent: torch.Tensor, group_size: int) -> torch.Tensor:
    return dequantize_mxint8(mantissa, exponent, group_size, dtype=torch.bfloat16)
