"""Lab 1's exercises: a fixed-point quantizer and the average-bits analysis (lab1_quantize), the L1-norm
weight mask (lab1_prune)."""
from __future__ import annotations

import torch

from ..prune import PruneConfig, _exact_mask, _scores
from ..quant.bits import mean_bits as _mean_bits
from ..quant.formats.integer import IntegerFormat
from ..quant.formats.integer import quantize_fixed_point as _fixed_point
from .core import Case, differs, exercise


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
        Case("frac_width above width: Lab 1's calibration gives up to 14 at width 4",
             (t([1e-4, -3e-4, 5e-4, 1.0]), 4, 14),
             hint="nothing special: the grid step is 2^-14 and the integer still saturates at [-8, 7]; do not "
                  "refuse or clip frac_width"),
        Case("a 3-D activation (batch, tokens, features) at width 16, frac_width 26 (calibrated to tiny values)",
             (t([[[3e-5, -1e-6], [4.8e-4, -5e-4]], [[0.0, 2 ** -26], [-3 * 2 ** -27, 1e-3]]]), 16, 26),
             hint="the same rule on any shape; 2^-26 steps, saturating at +-2^15 steps (+-0.000488...)"),
        Case("width 32, the sweep's widest (frac_width 20)", (t([1000.5, -2047.999, 3.0e-7, 4096.0]), 32, 20),
             hint="2^31 - 1 steps at the top: compute the clamp bounds as numbers (2 ** (width - 1)), not in int32"),
        Case("zeros stay zero", (t([0.0, -0.0]), 8, 4)),
        Case("empty input", (torch.zeros(0), 8, 4), hint="an empty tensor in, an empty tensor out"),
        Case("a 2-D float64 tensor (a tie at -1.5 steps too) keeps its shape and dtype",
             (t([[0.25, -0.375], [1.5, -2.0]], dtype=torch.float64), 4, 2),
             hint="return x's dtype and shape; a negative tie rounds to even too (-1.5 -> -2)"),
    ]


def _fixed_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        width = rng.randint(2, 32)
        frac = rng.randint(-2, width + 12)  # calibration gives frac_width above width to small tensors
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
    id="lab1.fixed_point", on_device=True, notebook="lab1_quantize", points=3,
    title="a fixed-point quantizer (round half to even, saturation)",
    task="Lab 1, quantization: quantize every Linear's input, weight and bias to signed fixed point "
         "(width, frac_width)",
    cases=_fixed_cases, hidden=_fixed_hidden,
    mutants={"round half away from zero": _half_away, "no clamp": _no_clamp,
             "symmetric clamp": _symmetric_clamp},
    hint="q = clamp(round(x * 2^f), -2^(w-1), 2^(w-1) - 1) / 2^f with torch.round (half to even)",
    install="labkit.quant.formats.integer:quantize_fixed_point",
)
def fixed_point(x: torch.Tensor, width: int, frac_width: int) -> torch.Tensor:
    return _fixed_point(x, width, frac_width)


# --- lab1.l1_mask: the L1-norm weight mask (notebook lab1_prune) ---------------------------------------------

def _tie_canonical(weight: torch.Tensor, mask) -> torch.Tensor:
    """``mask`` with its choice among equal magnitudes made canonical: within each group of entries of equal
    |w| (labkit's score, ``|w|`` in float32) the same number stays pruned, the lowest positions first. Two
    masks that prune the same number of entries of every magnitude come out equal; which of several tied
    weights is pruned is free (labkit's ``torch.topk`` picks among ties in no documented order)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != weight.shape:
        return mask  # compared as it is: the check reports the type, dtype or shape
    scores = weight.detach().abs().float().flatten()
    order = torch.argsort(scores, stable=True)
    s = scores[order]
    pruned = ~mask.flatten().cpu()[order]
    new_group = torch.ones(s.numel(), dtype=torch.bool)
    new_group[1:] = s[1:] != s[:-1]
    group = torch.cumsum(new_group.long(), 0) - 1
    start = torch.nonzero(new_group).flatten()
    rank = torch.arange(s.numel()) - start[group]
    count = torch.zeros(int(group[-1]) + 1 if s.numel() else 0, dtype=torch.long).index_add_(0, group, pruned.long())
    keep = torch.ones(s.numel(), dtype=torch.bool)
    keep[order] = ~(rank < count[group])
    return keep.view(weight.shape)


RAISES_VALUE_ERROR = "raises ValueError"


def _l1_finish(case: Case, mask):
    """The mask with its choice among ties made canonical against the case's weight (before the call: the
    harness gave the function a copy)."""
    return mask if mask == RAISES_VALUE_ERROR else _tie_canonical(case.args[0], mask)


def _same_up_to_ties(expected, got):
    return differs(expected, got)


_same_up_to_ties.tolerance = "exact, except which of several equal |w| is pruned (free)"


def _l1_cases() -> list[Case]:
    t = torch.tensor
    ramp = torch.linspace(-1.0, 1.0, 100) * torch.tensor([1.0, -1.0]).repeat(50)
    return [
        Case("ties at the cut: exactly k pruned", (t([0.5, -0.5, 0.5, 0.1, 2.0, -0.5]), 0.5),
             hint="prune exactly round(sparsity * numel) entries: a threshold |w| <= t prunes every tied entry; "
                  "rank (torch.topk / argsort) and prune the first k instead (which of the tied ones is free)"),
        Case("negative weights: rank by magnitude", (t([-3.0, 0.2, -0.1, 1.5, -2.0, 0.05]), 0.5),
             hint="rank |w|, not w: a large negative weight matters as much as a large positive one"),
        Case("sparsity 0 keeps everything", (t([0.3, -0.0, 1.0, -2.0]), 0.0),
             hint="k = 0: every entry kept (torch.topk with k = 0 is fine, but check your indexing)"),
        Case("the count rounds: 0.29 * 100 = 28.999999999999996 -> 29", (ramp, 0.29),
             hint="k = round(sparsity * numel), Python's round: int() truncates 28.999999999999996 to 28"),
        Case("a 2-D weight: one ranking over the whole tensor, shape kept",
             (t([[0.9, -0.01, 0.4], [0.02, -0.7, 0.03]]), 0.5),
             hint="flatten to rank over every entry (not per row), then reshape the mask to the weight's shape"),
        Case("a single element at 0.5: round(0.5) = 0, nothing pruned", (t([-4.0]), 0.5),
             hint="Python's round is half to even: round(0.5) = 0, round(2.5) = 2, round(3.5) = 4"),
        Case("sparsity 0.9: the 18 smallest of 20", (t([float((-1) ** i * (i * 7 % 20)) for i in range(20)]), 0.9),
             hint="at high sparsity the kept entries are the largest |w|; topk(largest=False) of k = 18"),
        Case("half to even in the count: 0.5 * 5 = 2.5 -> 2", (t([0.4, -0.3, 0.2, -0.1, 0.5]), 0.5),
             hint="Python's round(2.5) is 2 (half to even), as labkit's count; floor(x + 0.5) gives 3"),
        Case("sparsity 1 is not allowed: ValueError", (t([1.0, 2.0]), 1.0),
             hint="labkit accepts a sparsity in [0, 1) and raises ValueError otherwise"),
    ]


def _l1_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        gen = torch.Generator().manual_seed(rng.getrandbits(31))
        shape = (rng.randint(1, 40),) if rng.random() < 0.5 else (rng.randint(1, 8), rng.randint(1, 8))
        levels = rng.randint(2, 12)  # few magnitudes: many ties
        w = torch.randint(0, levels, shape, generator=gen).float() / levels
        w = w * (torch.randint(0, 2, shape, generator=gen).float() * 2 - 1)
        sparsity = rng.choice([0.0, 0.1, 0.29, 0.5, 0.57, 0.9, round(rng.random() * 0.99, 3)])
        cases.append(Case(f"random {i}: shape {shape}, sparsity {sparsity}", (w, sparsity)))
    return cases


def _l1_floor(weight, sparsity):
    k = int(sparsity * weight.numel())
    keep = torch.ones(weight.numel(), dtype=torch.bool)
    if k:
        keep[torch.topk(weight.abs().flatten(), k, largest=False).indices] = False
    return keep.view_as(weight)


def _l1_largest(weight, sparsity):
    k = round(sparsity * weight.numel())
    keep = torch.ones(weight.numel(), dtype=torch.bool)
    if k:
        keep[torch.topk(weight.abs().flatten(), k, largest=True).indices] = False
    return keep.view_as(weight)


def _l1_signed(weight, sparsity):
    k = round(sparsity * weight.numel())
    keep = torch.ones(weight.numel(), dtype=torch.bool)
    if k:
        keep[torch.topk(weight.flatten(), k, largest=False).indices] = False
    return keep.view_as(weight)


@exercise(
    id="lab1.l1_mask", on_device=True, notebook="lab1_prune", points=3,
    title="the L1-norm weight mask (exactly round(sparsity * numel) smallest-magnitude weights pruned)",
    task="Lab 1, pruning: prune each Linear's weights by L1 norm (magnitude) to the requested sparsity",
    cases=_l1_cases, hidden=_l1_hidden, expect_raises=("ValueError",), finish=_l1_finish, compare=_same_up_to_ties,
    mutants={"floor in the count": _l1_floor, "prunes the largest": _l1_largest, "ranks w, not |w|": _l1_signed},
    hint="k = round(sparsity * numel); keep = all True, then False at torch.topk(|w|.flatten(), k, "
         "largest=False).indices; reshape to the weight's shape",
)
def l1_mask(weight: torch.Tensor, sparsity: float) -> torch.Tensor:
    cfg = PruneConfig(sparsity=sparsity, method="l1-norm")  # labkit's validation: a sparsity in [0, 1)
    return _exact_mask(_scores(weight, cfg, None), round(cfg.sparsity * weight.numel()))


# --- lab1.average_bits: the average-bits analysis (notebook lab1_quantize) -------------------------------------

def _tensor_bits(t: dict) -> float:
    """Stored bits per element of one tensor: signed fixed point stores ``width`` bits (its fractional bits are
    among them); an unquantized tensor (``frac_width`` None) its float width."""
    if t.get("frac_width") is None:
        return float(t["width"])
    return IntegerFormat(width=t["width"], frac_width=t["frac_width"]).bits_per_element((t["numel"],))


def _bits_shown(layers: list[dict]) -> str:
    """A case's tensors as ``numel x width/frac_width`` (``fp`` + width for frac_width None)."""
    parts = [f"{t['numel']} x " + (f"fp{t['width']}" if t["frac_width"] is None else f"{t['width']}/{t['frac_width']}")
             for t in layers]
    return "[" + ", ".join(parts) + "] (numel x width/frac_width)"


def _bits_cases() -> list[Case]:
    def L(numel, width, frac_width=None):
        return {"numel": numel, "width": width, "frac_width": frac_width}

    cases = [
        Case("one layer: its width", ([L(1000, 8, 4)],),
             hint="int8 with 4 fractional bits stores 8 bits per element: the fractional bits are among the 8"),
        Case("unequal sizes: weighted by numel", ([L(1, 4, 2), L(2, 8, 4)],),
             hint="sum(numel * width) / sum(numel) = (1*4 + 2*8) / 3, not the mean of the widths"),
        Case("quantized beside unquantized fp32", ([L(300, 8, 4), L(100, 32)],),
             hint="an unquantized tensor (frac_width None) counts its float width, 32"),
        Case("frac_width larger than width, or negative: still width bits", ([L(5, 8, 12), L(3, 4, -2)],),
             hint="frac_width only places the binary point; the stored bits are width"),
        Case("a zero-size layer counts nothing", ([L(0, 16, 8), L(7, 4, 0), L(2, 6, 3)],),
             hint="a layer of 0 elements adds 0 bits and 0 elements"),
        Case("an empty list: ValueError", ([],),
             hint="with nothing to count there is no average: raise ValueError (not ZeroDivisionError)"),
        Case("only zero-size layers: ValueError", ([L(0, 8, 4), L(0, 32)],),
             hint="no element to count: raise ValueError, as for an empty list"),
        Case("a real-sized mix: a 768 x 768 layer and its bias at 6 bits, 2 * 768 at fp32",
             ([L(768 * 768, 6, 3), L(768, 6, 3), L(2 * 768, 32)],),
             hint="weighted by numel: sum(numel * width) / sum(numel), a float"),
    ]
    for c in cases:
        c.show = _bits_shown(c.args[0])
    return cases


def _bits_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        layers = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.25:
                layers.append({"numel": rng.randint(0, 5000), "width": rng.choice([16, 32]), "frac_width": None})
            else:
                w = rng.randint(1, 16)
                layers.append({"numel": rng.randint(0, 5000), "width": w, "frac_width": rng.randint(-4, w + 4)})
        layers[rng.randrange(len(layers))]["numel"] = rng.randint(1, 5000)  # at least one element
        cases.append(Case(f"random {i}: {len(layers)} tensors", (layers,), show=_bits_shown(layers)))
    return cases


def _bits_frac_added(layers):
    total = sum(t["numel"] for t in layers)
    if not total:
        raise ValueError("nothing to count")
    return sum(t["numel"] * (t["width"] + (t["frac_width"] or 0)) for t in layers) / total


def _bits_unweighted(layers):
    if not sum(t["numel"] for t in layers):
        raise ValueError("nothing to count")
    return sum(float(t["width"]) for t in layers) / len(layers)


def _bits_int_division(layers):
    total = sum(t["numel"] for t in layers)
    if not total:
        raise ValueError("nothing to count")
    return sum(t["numel"] * t["width"] for t in layers) // total


@exercise(
    id="lab1.average_bits", notebook="lab1_quantize", points=2,
    title="average stored bits (weighted by element count, frac width not added)",
    task="Lab 1, quantization: the average-bits analysis of the quantized model",
    cases=_bits_cases, hidden=_bits_hidden, expect_raises=("ValueError",), rtol=1e-12,
    mutants={"width + frac_width (the course reference's bug)": _bits_frac_added,
             "unweighted mean of widths": _bits_unweighted, "integer division": _bits_int_division},
    hint="sum(numel * width) / sum(numel) over the tensors, as a float; ValueError when there is no element",
)
def average_bits(layers: list[dict]) -> float:
    return _mean_bits([(_tensor_bits(t), t["numel"]) for t in layers])
