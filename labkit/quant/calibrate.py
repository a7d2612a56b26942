"""Range calibration for fixed point: per layer and per tensor, the most fractional bits that still
cover the tensor's largest magnitude, ``frac = width - 1 - ceil(log2(max|x|))``.

A single frac width for every tensor (e.g. the sheet's int8 with 4 fractional bits) wastes bits: BERT
weights are mostly below 0.1 (a 1/16 grid rounds most of them to zero) while LayerNorm outputs and GELU
inputs reach beyond +-8. Inputs are measured on a calibration batch; weights and biases directly.
"""
from __future__ import annotations

import math

import torch

from .formats.integer import MAX_FRAC_WIDTH, IntegerFormat  # noqa: F401  (the format the configs name)


def _frac(width: int, maxabs: float) -> int:
    if maxabs == 0 or not math.isfinite(maxabs):
        return width - 1
    # tiny (or huge) values would ask for a frac width beyond the format's bounds: clamped, a tiny tensor's
    # largest value still fits (only steps finer than 2^-64 are lost); only values beyond 2^(width+63) saturate
    return max(-MAX_FRAC_WIDTH, min(MAX_FRAC_WIDTH, width - 1 - math.ceil(math.log2(maxabs))))


@torch.no_grad()
def input_ranges(model: torch.nn.Module, batch: dict, filter_fn=None) -> dict[str, float]:
    """max |input| of every Linear on one forward of ``batch``."""
    ranges, hooks = {}, []
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear) and (filter_fn is None or filter_fn(name, m)):
            def hook(mod, args, name=name):
                ranges[name] = max(ranges.get(name, 0.0), args[0].detach().abs().max().item())
            hooks.append(m.register_forward_pre_hook(hook))
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        model(**{k: v.to(device) for k, v in batch.items() if k != "labels"})
    finally:
        model.train(was_training)
        for h in hooks:
            h.remove()
    return ranges


def calibrated_fixed_point(model: torch.nn.Module, width: int, ranges: dict[str, float]) -> dict:
    """A by-name selection spec: every calibrated Linear gets fixed point of ``width`` bits for input,
    weight and bias, each with its own range-covering frac width."""
    spec = {"by": "name"}
    for name, m in model.named_modules():
        if name not in ranges:
            continue
        fracs = {"data_in": _frac(width, ranges[name]), "weight": _frac(width, m.weight.abs().max().item())}
        if m.bias is not None:
            fracs["bias"] = _frac(width, m.bias.abs().max().item())
        spec[name] = {"name": "integer", **{f"{role}_width": width for role in fracs},
                      **{f"{role}_frac_width": f for role, f in fracs.items()}}
    return spec
