"""Lab 5's exercises (notebook ``lab5_llm``): a block's mean next-token NLL from a causal LM's logits, group-wise
symmetric integer RTN of a weight, and AWQ's per-channel scale search for one Linear."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..llm.awq import SCALE_FLOOR, search_layer
from ..llm.group_quant import group_spec
from ..llm.perplexity import logits_nll
from .core import Case, exercise


def _w(seed: int, rows: int, cols: int, scale: float = 0.05) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=g) * scale


def _cases() -> list[Case]:
    outlier = _w(1, 2, 64)
    outlier[0, 5] = 1.0  # one large weight sets its group's step, not the others'
    zeros = _w(2, 2, 64)
    zeros[1, :32] = 0.0
    ties = torch.tensor([[0.5, 1.5, 2.5, -0.5, 7.0, 3.5, -2.5, 1.0]])  # steps of 1: halves round to even
    return [
        Case("int4, groups of 32 (the lab's first point)", (_w(0, 4, 64), 4, 32),
             hint="per group: s = max|w| / (2^(b-1) - 1), stored as fp16; q = clamp(round(w / s), -2^(b-1), "
                  "2^(b-1) - 1); return q * s"),
        Case("one outlier: only its own group coarsens", (outlier, 4, 32),
             hint="groups run along the last (input) dimension: row r, columns g*G .. g*G+G-1"),
        Case("an all-zero group comes back as zeros", (zeros, 3, 32),
             hint="max|w| = 0 gives s = 0: return zeros for that group, not NaN (0 / 0)"),
        Case("ties round half to even", (ties, 4, 8),
             hint="torch.round rounds half to even (0.5 -> 0, 2.5 -> 2); floor(x + 0.5) does not"),
        Case("the scale is stored in fp16", (_w(3, 3, 96, scale=0.0123), 2, 96),
             hint="round the scale to fp16 (s.half().float()) before dividing: the stored scale is the one used"),
        Case("int8, groups of 64", (_w(4, 2, 128), 8, 64)),
    ]


def _hidden(rng) -> list[Case]:
    out = []
    for i in range(4):
        width, group = rng.choice([2, 3, 4, 8]), rng.choice([8, 16, 32, 64])
        out.append(Case(f"random {i}", (_w(rng.randrange(10 ** 6), rng.randint(1, 4), group * rng.randint(1, 3),
                                           scale=rng.choice([0.01, 0.05, 0.3])), width, group)))
    return out


def _no_fp16(w, width, group_size):
    g = w.reshape(*w.shape[:-1], -1, group_size)
    qmax = 2 ** (width - 1) - 1
    s = g.abs().amax(-1, keepdim=True) / qmax
    s = torch.where(s == 0, torch.ones_like(s), s)
    q = torch.clamp(torch.round(g / s), -qmax - 1, qmax)
    return (q * s * (g.abs().amax(-1, keepdim=True) > 0)).reshape(w.shape)


def _per_row(w, width, group_size):
    return group_spec("integer", width, w.shape[-1]).quantize(w)


def _half_up(w, width, group_size):
    g = w.reshape(*w.shape[:-1], -1, group_size)
    qmax = 2 ** (width - 1) - 1
    s = (g.abs().amax(-1, keepdim=True) / qmax).half().float()
    safe = torch.where(s == 0, torch.ones_like(s), s)
    return (torch.clamp(torch.floor(g / safe + 0.5), -qmax - 1, qmax) * s).reshape(w.shape)


@exercise(
    id="lab5.group_rtn", notebook="lab5_llm", points=3, spans=("width", "group_size"),
    title="group-wise symmetric integer round-to-nearest of a weight (fp16 scale per group)",
    task="Lab 5, PTQ: quantize each Linear's weight in groups of group_size along its input dimension",
    cases=_cases, hidden=_hidden, atol=1e-7, rtol=1e-6,
    mutants={"scale not rounded to fp16": _no_fp16, "one group per row": _per_row, "rounds half up": _half_up},
    hint="g = w.reshape(rows, -1, G); s = (g.abs().amax(-1, keepdim=True) / (2^(b-1) - 1)).half().float(); "
         "q = clamp(round(g / s), -2^(b-1), 2^(b-1) - 1) (0 where s is 0); return (q * s).reshape(w.shape)",
)
def group_rtn(w: torch.Tensor, width: int, group_size: int) -> torch.Tensor:
    return group_spec("integer", width, group_size).quantize(w)


# ------------------------------------------------------------------------------------------------
# lab5.token_nll: the shift by one, log-softmax in float32, one mean per block
# ------------------------------------------------------------------------------------------------

def _logits(seed: int, n: int, length: int, vocab: int, scale: float = 1.0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(n, length, vocab, generator=g) * scale).to(dtype)
    return logits, torch.randint(0, vocab, (n, length), generator=g)


def _nll_case(name, logits, ids, hint=None) -> Case:
    return Case(name, (logits, ids), hint=hint, show=f"logits {tuple(logits.shape)} "
                f"{str(logits.dtype).removeprefix('torch.')}, ids {tuple(ids.shape)}")


def _nll_cases() -> list[Case]:
    # the logits at t put a margin of 4 on token t+1: the shift scores near 0, no shift scores ~ 4 nats
    ids = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    sharp = torch.zeros(1, 8, 10)
    sharp[0, torch.arange(7), ids[0, 1:]] = 4.0
    sharp[0, 7, 0] = 50.0  # the last position predicts nothing: its logits must not count
    big, big_ids = _logits(3, 2, 5, 7, scale=60.0)  # logit gaps over 100: float32's softmax underflows to 0
    return [
        _nll_case("a batch of blocks: one mean per block", *_logits(0, 3, 6, 11),
                  hint="return (n,) float64: each block's mean over its L - 1 predictions, not one mean over all"),
        _nll_case("the shift: the logits at t predict token t+1", sharp, ids,
                  hint="score logits[:, :-1] against ids[:, 1:]; the last position's logits predict nothing"),
        _nll_case("logit gaps over 100: log-softmax, not log(softmax)", big, big_ids,
                  hint="softmax underflows to 0 for an unlikely token and log(0) = -inf: use log_softmax (or "
                       "F.cross_entropy), which subtracts the log-sum-exp"),
        _nll_case("bf16 logits (a bf16 model's): log-softmax in float32", *_logits(4, 2, 9, 50, 3.0, torch.bfloat16),
                  hint="convert the logits to float32 first: a log-softmax in bf16 keeps 3 significant digits"),
        _nll_case("one block of two tokens: a single prediction", *_logits(5, 1, 2, 6)),
        _nll_case("fp16 logits, a longer block", *_logits(6, 2, 33, 40, 2.0, torch.float16)),
    ]


def _nll_hidden(rng) -> list[Case]:
    return [_nll_case(f"random {i}", *_logits(rng.randrange(10 ** 6), rng.randint(1, 4), rng.randint(2, 12),
                                              rng.randint(5, 60), rng.choice([1.0, 4.0, 40.0]),
                                              rng.choice([torch.float32, torch.bfloat16, torch.float16])))
            for i in range(4)]


def _per_row_mean(nll, n):
    return nll.reshape(n, -1).double().mean(dim=1)


def _nll_no_shift(logits, ids):
    nll = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), ids.reshape(-1), reduction="none")
    return _per_row_mean(nll, ids.shape[0])


def _nll_wrong_shift(logits, ids):
    x = logits[:, 1:].float()
    return _per_row_mean(F.cross_entropy(x.reshape(-1, x.shape[-1]), ids[:, :-1].reshape(-1), reduction="none"),
                         ids.shape[0])


def _nll_log_of_softmax(logits, ids):
    p = torch.softmax(logits[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    return -p.log().double().mean(dim=1)


def _nll_in_dtype(logits, ids):
    x = logits[:, :-1]
    nll = F.cross_entropy(x.reshape(-1, x.shape[-1]), ids[:, 1:].reshape(-1), reduction="none")
    return _per_row_mean(nll, ids.shape[0])


def _nll_one_mean(logits, ids):
    return logits_nll(logits, ids).mean()


@exercise(
    id="lab5.token_nll", notebook="lab5_llm", points=3, on_device=True,
    title="a block's mean next-token NLL from a causal LM's logits (shift by one, log-softmax in float32)",
    task="Lab 5, perplexity: each block's NLL, the mean over its next-token predictions, from the model's logits",
    cases=_nll_cases, hidden=_nll_hidden, atol=1e-6, rtol=1e-6,
    mutants={"no shift (position t scored on token t)": _nll_no_shift,
             "shifted the wrong way (logits t+1 score token t)": _nll_wrong_shift,
             "log of softmax (underflows to -inf)": _nll_log_of_softmax,
             "log-softmax in the logits' dtype": _nll_in_dtype, "one mean over every block": _nll_one_mean},
    hint="x = logits[:, :-1].float(); nll = -log_softmax(x, -1).gather(-1, ids[:, 1:, None]).squeeze(-1); "
         "return nll.double().mean(dim=1)",
)
def token_nll(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return logits_nll(logits, ids)


# ------------------------------------------------------------------------------------------------
# lab5.awq_scales: s = mean|x|^alpha (normalised), the alpha whose quantized layer's outputs err least
# ------------------------------------------------------------------------------------------------

GRID = [0.0, 0.25, 0.5, 0.75, 1.0]  # the quick and full profiles' alphas


def _awq_inputs(seed: int, rows: int, cols: int, tokens: int, salient: int = 2, boost: float = 20.0):
    """A weight (rows, cols) and inputs (tokens, cols) whose first ``salient`` channels run ``boost`` x larger."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, cols, generator=g) * 0.05
    x = torch.randn(tokens, cols, generator=g)
    x[:, :salient] *= boost
    return w, x


def _awq_case(name, w, x, width, group_size, alphas=GRID, hint=None) -> Case:
    return Case(name, (w, x, width, group_size, list(alphas)), hint=hint,
                show=f"w {tuple(w.shape)}, x {tuple(x.shape)}, width={width}, group_size={group_size}, "
                     f"alphas={list(alphas)}")


def _awq_cases() -> list[Case]:
    w, x = _awq_inputs(0, 8, 32, 48)
    signs = torch.randint(0, 2, (40, 32), generator=torch.Generator().manual_seed(1)) * 2.0 - 1.0
    uniform = (_awq_inputs(1, 8, 32, 40)[0], signs * 0.7)  # every channel's mean |x| is 0.7
    dead_w, dead_x = _awq_inputs(2, 8, 32, 48, salient=3)
    dead_x[:, 7] = 0.0
    signed_w, signed_x = _awq_inputs(3, 8, 32, 64, salient=0)
    signed_x[:, 4:8] = -signed_x[:, 4:8].abs() * 15 - 5  # large and negative: mean x < 0, mean |x| > 0
    return [
        _awq_case("salient channels: two inputs run 20x larger", w, x, 3, 16,
                  hint="s = mean|x| ** alpha over the rows of x, divided by sqrt(max(s) * min(s)); the error is "
                       "mean((x / s) @ Q(w * s).T - x @ w.T) ** 2, Q the group RTN (fp16 scale per group)"),
        _awq_case("every channel alike: s = 1 at every alpha, and a tie goes to the smaller alpha", *uniform, 4, 16,
                  hint="equal errors: keep the first (smallest) alpha; update the best only on a strictly smaller "
                       "error"),
        _awq_case("a dead input channel (x = 0) keeps a finite scale", dead_w, dead_x, 3, 16,
                  hint="clamp s at 1e-4 before normalising: mean|x| = 0 gives s = 0, and x / 0 is NaN"),
        _awq_case("large negative activations: the scale is from mean |x|", signed_w, signed_x, 3, 32,
                  hint="mean|x|, not mean x: a negative mean to a fractional power is NaN"),
        _awq_case("the lab's int4, groups of 64", *_awq_inputs(4, 16, 128, 96, salient=4), 4, 64),
        _awq_case("the smoke profile's alphas [0, 0.5, 1]", *_awq_inputs(5, 8, 64, 32, boost=8.0), 4, 32,
                  [0.0, 0.5, 1.0]),
    ]


def _awq_margin(case: Case) -> float:
    """The relative gap between the best and second-best alpha's output MSE (small: a near tie)."""
    w, x, width, group, alphas = case.args
    mse = sorted(search_layer(w, x, x.abs().double().mean(0), group_spec("integer", width, group), alphas).mse.values())
    return (mse[1] - mse[0]) / max(mse[0], 1e-30)


def _awq_hidden(rng) -> list[Case]:
    out = []
    while len(out) < 4:
        group = rng.choice([16, 32, 64])
        w, x = _awq_inputs(rng.randrange(10 ** 6), rng.randint(2, 12), group * rng.randint(1, 3), rng.randint(16, 80),
                           rng.randint(0, 4), rng.choice([1.0, 5.0, 20.0]))
        alphas = rng.choice([GRID, [0.0, 0.5, 1.0]])
        case = _awq_case(f"random {len(out)}", w, x, rng.choice([2, 3, 4, 8]), group, alphas)
        if _awq_margin(case) > 1e-3:  # a near tie could go either way on float32 rounding: draw again
            out.append(case)
    return out


def _awq_mistake(w, x, width, group_size, alphas, mean=None, divide=True, weights=False, last_tie=False,
                 floor=SCALE_FLOOR):
    """The reference's search with one of its pieces wrong."""
    q = group_spec("integer", width, group_size).quantize
    m = (x.abs().double().mean(0) if mean is None else mean).double()

    def scales(alpha):
        s = m.pow(alpha).clamp(min=floor)
        return (s / (s.max() * s.min()).sqrt()).float()

    def error(s):
        if weights:
            return (q(w * s) / s - w).double().pow(2).mean().item()
        xin = x / s if divide else x
        return (xin.double() @ q(w * s).double().T - x.double() @ w.double().T).pow(2).mean().item()

    best = None
    for alpha in alphas:
        e = error(scales(alpha))
        if best is None or e < best[0] or (last_tie and e == best[0]):
            best = (e, alpha)
    return best[1], scales(best[1])


def _awq_undivided(w, x, width, group_size, alphas):
    return _awq_mistake(w, x, width, group_size, alphas, divide=False)


def _awq_rtn(w, x, width, group_size, alphas):
    return 0.0, torch.ones(w.shape[1])


def _awq_signed_mean(w, x, width, group_size, alphas):
    return _awq_mistake(w, x, width, group_size, alphas, mean=x.double().mean(0))


def _awq_weight_error(w, x, width, group_size, alphas):
    return _awq_mistake(w, x, width, group_size, alphas, weights=True)


def _awq_unnormalised(w, x, width, group_size, alphas):
    alpha, _ = awq_scales.reference(w, x, width, group_size, alphas)
    return alpha, x.abs().double().mean(0).pow(alpha).clamp(min=1e-4).float()


def _awq_no_floor(w, x, width, group_size, alphas):
    return _awq_mistake(w, x, width, group_size, alphas, floor=0.0)


def _awq_last_tie(w, x, width, group_size, alphas):
    return _awq_mistake(w, x, width, group_size, alphas, last_tie=True)


@exercise(
    id="lab5.awq_scales", notebook="lab5_llm", points=3, spans=("width", "group_size", "alphas"),
    title="AWQ's per-input-channel scale for one Linear: the alpha whose quantized outputs err least",
    task="Lab 5, AWQ: search alpha per layer for s = mean|x|^alpha, quantizing W diag(s) and feeding x / s",
    cases=_awq_cases, hidden=_awq_hidden, atol=0.0, rtol=1e-5,
    mutants={"input not divided by s": _awq_undivided, "plain RTN (alpha fixed at 0)": _awq_rtn,
             "scale from mean x, not mean |x|": _awq_signed_mean,
             "error measured on the weights, not the outputs": _awq_weight_error,
             "scale not normalised by sqrt(max * min)": _awq_unnormalised,
             "s not clamped at 1e-4 (a dead channel's s is 0)": _awq_no_floor,
             "a tie goes to the larger alpha": _awq_last_tie},
    hint="m = x.abs().mean(0); per alpha: s = m ** alpha clamped at 1e-4, s = s / sqrt(s.max() * s.min()); "
         "err = mean(((x / s) @ group_rtn(w * s).T - x @ w.T) ** 2); keep the first alpha of least err; "
         "return (alpha, s) with s float32",
)
def awq_scales(w: torch.Tensor, x: torch.Tensor, width: int, group_size: int, alphas) -> tuple:
    # mean |x| over the given rows, in float64 as awq.activation_stats sums it
    found = search_layer(w, x, x.abs().double().mean(0), group_spec("integer", width, group_size), alphas)
    return found.alpha, found.scale
