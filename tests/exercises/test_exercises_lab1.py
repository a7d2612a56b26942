"""Lab 1's exercises beyond the generic self-test: each reference agrees with the library path the lab runs
(prune()'s mask, quant.average_bits), and the L1 check leaves the choice among tied magnitudes free."""
import pytest
import torch

from labkit import quant
from labkit.quant import fixed_point
from labkit.exercises import evaluate, get
from labkit.prune import prune
from labkit.quant.bits import mean_bits


def test_l1_mask_reference_is_prunes_mask():
    torch.manual_seed(0)
    layer = torch.nn.Linear(13, 11)
    ref = get("lab1.l1_mask").reference
    for sparsity in (0.0, 0.29, 0.5, 0.9):
        res = prune(torch.nn.ModuleDict({"layer": layer}), {"weight": {"sparsity": sparsity, "method": "l1-norm"}})
        assert torch.equal(ref(layer.weight, sparsity), res.model["layer"].parametrizations.weight[0].mask)


def _by_position(weight, sparsity, reverse=False):
    if not 0 <= sparsity < 1:
        raise ValueError("sparsity")
    scores = weight.abs().flatten()
    n, k = scores.numel(), round(sparsity * weight.numel())
    order = torch.argsort(scores.flip(0) if reverse else scores, stable=True)[:k]
    keep = torch.ones(n, dtype=torch.bool, device=weight.device)
    keep[n - 1 - order if reverse else order] = False
    return keep.view_as(weight)


def test_l1_mask_ties_are_free_but_the_count_is_not():
    for reverse in (False, True):  # first or last of the tied entries pruned: both right
        assert evaluate("lab1.l1_mask", lambda w, s: _by_position(w, s, reverse), hidden_seed=1).ok

    def threshold(weight, sparsity):  # prunes every entry tied at the cut
        if not 0 <= sparsity < 1:
            raise ValueError("sparsity")
        k = round(sparsity * weight.numel())
        if not k:
            return torch.ones_like(weight, dtype=torch.bool)
        return weight.abs() > weight.abs().flatten().kthvalue(k).values

    r = evaluate("lab1.l1_mask", threshold)
    assert not r.ok and not next(c for c in r.cases if c.name.startswith("ties")).ok


def _stored(model):
    weights, inputs = [], []
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            cfg = getattr(m, "config", None)
            for role, t in (("weight", m.weight), ("bias", m.bias)):
                fmt = getattr(cfg, role, None)
                if t is not None:
                    weights.append({"numel": t.numel(), "width": fmt.width if fmt else 32,
                                    "frac_width": fmt.frac_width if fmt else None})
            fmt = getattr(cfg, "data_in", None)
            inputs.append({"numel": m.in_features, "width": fmt.width if fmt else 32,
                           "frac_width": fmt.frac_width if fmt else None})
    return weights, inputs


def test_average_bits_reference_matches_the_model_level_function():
    net = torch.nn.Sequential(torch.nn.Linear(37, 53), torch.nn.Linear(53, 19, bias=False), torch.nn.Linear(19, 7))
    spec = {"by": "name", "default": {"config": {"name": None}}, "0": {"config": fixed_point(8, 12)},
            "1": {"config": fixed_point(4, -2)}}
    model = quant.quantize(net, spec).model
    ref = get("lab1.average_bits").reference
    weights, inputs = _stored(model)
    bits = quant.average_bits(model)
    assert ref(weights) == bits["weight_bits"] and ref(inputs) == bits["data_in_bits"]
    with pytest.raises(ValueError, match="no elements"):
        mean_bits([])
