"""Activation-aware weight quantization (AWQ-style scaling) on top of group-wise RTN (``group_quant``).

A few input channels of an LLM's Linear layers carry activations far larger than the rest; the weights that
multiply them matter most, and plain rounding treats them like any other. AWQ (Lin et al., 2024) scales each
input channel j of the weight by s_j before quantizing and divides the input by s_j, so the product is
unchanged in exact arithmetic while the salient channels' weights get a finer grid relative to their group:
``y = Q(W diag(s)) (x / s)``. Here, for each selected Linear:

1. calibration blocks run through the unquantized model, and forward hooks collect each layer's per-input-
   channel mean |x| over every calibration token (``activation_stats``) and a fixed random sample of its input
   rows (the same tokens for every layer);
2. ``s = mean|x| ** alpha`` (clamped at 1e-4, normalised by sqrt(max s * min s), as AWQ's reference code does)
   for each alpha of a grid over [0, 1] (``ALPHAS``: 0, 0.1, ..., 1), and the alpha whose output MSE on the
   sampled inputs, ``mean((x / s) Q(W diag(s))^T - x W^T)^2``, is least wins (ties: the smaller alpha; alpha = 0
   is s = 1, plain RTN, so the search never does worse than RTN on its own samples);
3. the layer becomes ``ScaledLinear``: the quantized ``W diag(s)`` and an explicit input scale (x / s). Deployed, 1/s
   folds into the op before (an RMSNorm's weight, the previous Linear's rows); kept here as a buffer it is
   counted in the stored bits (``scale_dtype`` bits per input channel, ``bits / out_features`` per weight). A
   layer whose best alpha is 0 stays a plain Linear with the RTN weight.

Left out of AWQ's recipe: its search of weight clipping ranges, and the joint scale that q/k/v (and gate/up)
share there because one RMSNorm feeds them; here each layer searches its own s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from ..select import set_submodule
from .group_quant import (MARK, GroupSpec, LayerQuant, QuantReport, group_spec, plan_layers, rel_error,
                          report_bits, untie_output)
from .perplexity import _check_blocks, _check_int, _device

ALPHAS = tuple(i / 10 for i in range(11))
SCALE_FLOOR = 1e-4  # AWQ's clamp of s: a dead channel (mean |x| = 0) keeps a finite scale


class ScaledLinear(torch.nn.Module):
    """``linear(x / scale)``: a Linear whose input is divided per channel first (AWQ's 1/s, kept explicit); its
    weight holds the quantized ``W diag(scale)``."""

    def __init__(self, linear: torch.nn.Linear, scale: torch.Tensor):
        super().__init__()
        if scale.shape != (linear.in_features,):
            raise ValueError(f"scale of shape {tuple(scale.shape)}: needs ({linear.in_features},), one per input "
                             "channel")
        self.linear = linear
        self.register_buffer("scale", scale.detach().to(linear.weight.dtype).to(linear.weight.device))

    @property
    def in_features(self) -> int:
        return self.linear.in_features

    @property
    def out_features(self) -> int:
        return self.linear.out_features

    @property
    def weight(self) -> torch.nn.Parameter:
        return self.linear.weight

    def forward(self, x):
        return self.linear(x / self.scale)


@dataclass
class ActStats:
    """One layer's calibration inputs: per-channel mean |x| over all ``tokens`` and a sample of input rows."""

    mean_abs: torch.Tensor  # (in_features,) float64
    samples: torch.Tensor  # (n_samples, in_features) in float32
    tokens: int


@torch.no_grad()
def activation_stats(model: torch.nn.Module, blocks: torch.Tensor, layers, n_samples: int = 512,
                     batch_size: int = 4, seed: int = 0) -> dict[str, ActStats]:
    """``{name: ActStats}`` for ``layers`` (``[(name, linear)]``) from ``blocks`` (calibration token ids, e.g.
    ``text_blocks(..., split="train")``) run through ``model``: forward pre-hooks read each layer's input. The
    sampled rows are the same ``n_samples`` tokens (drawn with ``seed``) for every layer."""
    blocks = _check_blocks(blocks)
    _check_int("n_samples", n_samples, 1)
    _check_int("batch_size", batch_size, 1)
    total = blocks.numel()
    gen = torch.Generator().manual_seed(seed)
    chosen = torch.randperm(total, generator=gen)[:min(n_samples, total)].sort().values
    sums = {name: torch.zeros(m.in_features, dtype=torch.float64) for name, m in layers}
    picked = {name: [] for name, _ in layers}
    offset = [0]  # first token of the running batch, in the flattened blocks

    def hook_for(name):
        def hook(module, args):
            x = args[0].detach()
            rows = x.reshape(-1, x.shape[-1])
            sums[name] += rows.abs().sum(dim=0, dtype=torch.float64).cpu()
            lo, hi = offset[0], offset[0] + rows.shape[0]
            sel = chosen[(chosen >= lo) & (chosen < hi)] - lo
            if sel.numel():
                picked[name].append(rows[sel.to(rows.device)].float().cpu())
        return hook

    handles = [m.register_forward_pre_hook(hook_for(name)) for name, m in layers]
    device = _device(model)
    try:
        for chunk in blocks.split(batch_size):
            model(input_ids=chunk.to(device), use_cache=False)
            offset[0] += chunk.numel()
    finally:
        for h in handles:
            h.remove()
    return {name: ActStats(sums[name] / total, torch.cat(picked[name]) if picked[name] else
                           torch.empty(0, m.in_features), total) for name, m in layers}


def scales_for(mean_abs: torch.Tensor, alpha: float) -> torch.Tensor:
    """AWQ's per-channel scale ``mean|x| ** alpha``, clamped at ``SCALE_FLOOR`` and divided by sqrt(max * min)
    (float32); alpha = 0 gives exactly 1 everywhere."""
    s = mean_abs.double().pow(alpha).clamp(min=SCALE_FLOOR)
    return (s / (s.max() * s.min()).sqrt()).float()


@dataclass(frozen=True)
class LayerSearch:
    """The grid search of one layer: the chosen ``alpha`` and its ``scale`` s, and the output MSE at each alpha."""

    alpha: float
    scale: torch.Tensor
    mse: dict[float, float]

    @property
    def mse_rtn(self) -> float:
        return self.mse.get(0.0, math.nan)

    @property
    def mse_best(self) -> float:
        return self.mse[self.alpha]


def output_mse(weight: torch.Tensor, x: torch.Tensor, spec: GroupSpec, scale: torch.Tensor | None = None) -> float:
    """mean((x / s) Q(W diag(s))^T - x W^T)^2 in float64 (``scale`` None: s = 1, plain RTN)."""
    w = weight.detach().float()
    x = x.float()
    ref = x.double() @ w.double().T
    if scale is None:
        out = x.double() @ spec.quantize(w).double().T
    else:
        out = (x / scale).double() @ spec.quantize(w * scale).double().T
    return (out - ref).pow(2).mean().item()


def search_layer(weight: torch.Tensor, x: torch.Tensor, mean_abs: torch.Tensor, spec: GroupSpec,
                 alphas=ALPHAS) -> LayerSearch:
    """The alpha of ``alphas`` whose scale ``scales_for(mean_abs, alpha)`` gives the least output MSE on the input
    rows ``x`` (``(n, in_features)``) when ``weight`` is quantized per ``spec``; ties go to the smaller alpha."""
    alphas = check_alphas(alphas)
    if x.dim() != 2 or x.shape[1] != weight.shape[1] or x.shape[0] < 1:
        raise ValueError(f"x of shape {tuple(x.shape)}: needs (n >= 1, {weight.shape[1]}) input rows")
    mse, best = {}, None
    for alpha in alphas:
        scale = scales_for(mean_abs, alpha).to(weight.device)
        mse[alpha] = output_mse(weight, x.to(weight.device), spec, scale)
        if best is None or mse[alpha] < mse[best]:
            best = alpha
    return LayerSearch(best, scales_for(mean_abs, best), mse)


def check_alphas(alphas) -> tuple[float, ...]:
    try:
        values = tuple(float(a) for a in alphas)
    except TypeError:
        raise TypeError(f"alphas={alphas!r}: must be a sequence of numbers in [0, 1]") from None
    if not values or any(not 0 <= a <= 1 for a in values):
        raise ValueError(f"alphas={alphas!r}: need at least one value, each in [0, 1] (e.g. {ALPHAS})")
    return tuple(sorted(set(values)))


@torch.no_grad()
def awq_quantize(model: torch.nn.Module, calib_blocks: torch.Tensor, fmt_name: str, width: int, group_size: int,
                 filter_fn: Callable[[str, torch.nn.Module], bool] | None = None, *, alphas=ALPHAS,
                 n_samples: int = 512, batch_size: int = 4, seed: int = 0, symmetric: bool = True,
                 scale_dtype: torch.dtype = torch.float16, **params) -> QuantReport:
    """AWQ-style scaled group-wise quantization of ``model``'s Linear layers, in place (see the module docstring):
    the same ``fmt_name``, ``width``, ``group_size``, ``filter_fn`` and format options as
    ``group_quant.quantize_llm_weights``, the statistics from ``calib_blocks``. Each layer's report holds its
    ``alpha``, the output MSE of RTN (alpha 0) and of the chosen alpha on the calibration samples, and the bits of
    its input scale (included in its ``bits_per_weight``)."""
    spec = group_spec(fmt_name, width, group_size, symmetric, scale_dtype, **params)
    alphas = check_alphas(alphas)
    selected, skipped = plan_layers(model, spec, filter_fn)
    stats = activation_stats(model, calib_blocks, selected, n_samples, batch_size, seed)
    untied = untie_output(model, selected)
    scale_bits = torch.finfo(scale_dtype).bits
    layers = {}
    for name, module in selected:
        st = stats[name]
        found = search_layer(module.weight, st.samples, st.mean_abs, spec, alphas)
        shape = tuple(module.weight.shape)
        bits = spec.bits_per_weight(shape)
        if found.alpha == 0:
            w_hat = spec.quantize(module.weight)
            err = rel_error(module.weight, w_hat)
            module.weight.copy_(w_hat)
            setattr(module, MARK, spec.describe())
            extra_bits = 0.0
        else:
            scale = found.scale.to(module.weight.device)
            w_hat = spec.quantize(module.weight * scale.to(module.weight.dtype))
            err = rel_error(module.weight, w_hat / scale)  # the weight the layer now applies, against the original
            module.weight.copy_(w_hat)
            setattr(module, MARK, f"{spec.describe()}, AWQ alpha {found.alpha:g}")
            set_submodule(model, name, ScaledLinear(module, scale))
            extra_bits = scale_bits / shape[0]
        layers[name] = LayerQuant(shape, bits + extra_bits, err,
                                  {"alpha": found.alpha, "mse_rtn": found.mse_rtn, "mse_awq": found.mse_best,
                                   "input_scale_bits": extra_bits})
    weight_bits, linear_bits = report_bits(model, layers, skipped)
    return QuantReport("awq", spec.describe(), layers, skipped, weight_bits, linear_bits, untied)
