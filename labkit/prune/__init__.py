"""Unstructured pruning of Linear weights and activations: ``prune(model, config, filter_fn)``.

- Weights: a fixed 0/1 mask applied through ``torch.nn.utils.parametrize``, so the effective weight is
  ``original * mask`` in every forward: pruned weights stay zero through any amount of training.
- Activations: a mask on each selected Linear's input. ``l1-norm`` keeps the largest-magnitude inputs of
  every token vector (it depends on the input, deterministically); ``random`` draws one feature mask per
  layer, once, with a seeded generator, so evaluation is repeatable (the course's reference re-drew it on
  every forward).
- ``scope``: ``local`` ranks within each layer, ``global`` ranks weights across all selected layers
  (activations are ranked per token, so only ``local`` applies to them).

Config: ``{"weight": {"sparsity": 0.5, "method": "l1-norm", "scope": "local"}, "activation": {...}}``, or
``PruneConfig`` objects, optionally inside a selection spec ``{"by": ..., "default": ..., key: ...}``.
"""
from __future__ import annotations

import copy
import warnings
import weakref
import zlib
from dataclasses import dataclass, fields
from typing import Callable, NamedTuple

import torch
from torch.nn.utils import parametrize

from ..select import select
from . import mask_kernel

METHODS = ("random", "l1-norm")
SCOPES = ("local", "global")


def check_scope(scope: str) -> str:
    """``scope`` if it is one of ``SCOPES``, else a ValueError naming the allowed values."""
    if scope not in SCOPES:
        raise ValueError(f"allowed values are {', '.join(map(repr, SCOPES))}, got {scope!r}")
    return scope


TARGETS = ("weight", "activation")


@dataclass(frozen=True)
class PruneConfig:
    sparsity: float
    method: str = "l1-norm"
    scope: str = "local"
    seed: int = 0

    def __post_init__(self):
        if isinstance(self.sparsity, bool) or not isinstance(self.sparsity, (int, float)) \
                or not 0 <= self.sparsity < 1:
            raise ValueError(f"sparsity must be a number in [0, 1), got {self.sparsity!r}")
        if self.method not in METHODS:
            raise ValueError(f"method={self.method!r}: allowed values are {', '.join(map(repr, METHODS))}")
        if self.scope not in SCOPES:
            raise ValueError(f"scope={self.scope!r}: allowed values are {', '.join(map(repr, SCOPES))}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"seed must be an int, got {self.seed!r}")

    @classmethod
    def from_dict(cls, cfg) -> "PruneConfig":
        if isinstance(cfg, PruneConfig):
            return cfg
        allowed = [f.name for f in fields(cls)]
        if not isinstance(cfg, dict):
            raise TypeError(f"a prune config is a dict with keys from {allowed} (or a PruneConfig), "
                            f"got {cfg!r}")
        unknown = sorted(set(cfg) - set(allowed))
        if unknown:
            raise KeyError(f"prune config key(s) {unknown} unknown; allowed: {allowed}")
        if "sparsity" not in cfg:
            raise KeyError("prune config needs 'sparsity'")
        return cls(**cfg)


class SparsityWarning(UserWarning):
    """The achieved sparsity is not the requested one: masks prune whole elements, so a small layer gets
    the nearest multiple of 1/numel (a request near 1 can zero every element)."""


# Achieved within this of requested is rounding nobody needs to hear about: a layer of 64+ elements
# is always within 1/128 (BERT's Linear layers hold thousands).
SPARSITY_TOLERANCE = 0.01


def _off_target(rows: list[tuple[str, str, float, int, int]]) -> list[str]:
    """Descriptions of the (layer(s), target, requested, zeroed, elements) rows whose achieved sparsity
    is off the request by more than the tolerance, or that zero everything."""
    out = []
    for where, target, requested, zeroed, n in rows:
        if n == 0:
            continue
        achieved = zeroed / n
        if abs(achieved - requested) > SPARSITY_TOLERANCE or (zeroed == n and requested < 1):
            out.append(f"{where}: {target} sparsity requested {requested:g}, achieved {achieved:g} "
                       f"({zeroed} of {n} zeroed" + ("; every one is zero" if zeroed == n else "") + ")")
    return out


def _sparsity_rows(layers, masks: dict, groups: dict) -> list[tuple[str, str, float, int, int]]:
    """(layer(s), target, requested, zeroed, elements): a global group as one row (its layers differ from
    the request by design), each local layer's weights, each layer's activations."""
    rows = []
    for w, members in groups.items():
        n = sum(m.weight.numel() for _, m in members)
        rows.append((f"layers {', '.join(repr(name) for name, _ in members)} (global)", "weight", w.sparsity,
                     round(w.sparsity * n), n))
    for name, module, cfgs in layers:
        w, a = cfgs.get("weight"), cfgs.get("activation")
        if name in masks and w.scope == "local":
            rows.append((f"layer {name!r}", "weight", w.sparsity, int((~masks[name]).sum()), masks[name].numel()))
        if a is not None:  # both methods zero round(sparsity * in_features) inputs (per token for l1-norm)
            rows.append((f"layer {name!r}", "activation", a.sparsity, round(a.sparsity * module.in_features),
                         module.in_features))
    return rows


def _warn_off_target(rows) -> None:
    off = _off_target(rows)
    if off:
        warnings.warn("prune: the achieved sparsity is not the requested one (whole elements are pruned, "
                      "in steps of 1/elements): " + "; ".join(off), SparsityWarning, stacklevel=3)


class WeightMask(torch.nn.Module):
    """Parametrization ``W -> W * mask`` with the mask stored as a buffer (saved with the model)."""

    def __init__(self, mask: torch.Tensor):
        super().__init__()
        self.register_buffer("mask", mask.to(torch.bool))

    def forward(self, weight):
        return weight * self.mask


class _Shared:
    """The last l1-norm activation mask computed: BERT's query, key and value read the same input tensor,
    and its mask depends only on that tensor and k, so the second and third layers reuse the first's
    result instead of ranking the same vectors again. The result is held only while its input lives."""
    x = None    # weak reference to the input
    out = None
    key = None


def _forget(ref) -> None:
    if _Shared.x is ref:  # an older input's reference dying must not clear a newer entry
        _Shared.x = _Shared.out = _Shared.key = None


def _key(x: torch.Tensor, k: int, out: torch.Tensor) -> tuple:
    return x._version, k, torch.is_grad_enabled(), out._version  # which tensor: the weak reference says


def _same_input(x: torch.Tensor, k: int):
    out = _Shared.out
    if out is None or _Shared.x() is not x or _Shared.key != _key(x, k, out):
        return None
    return out


def _remember(x: torch.Tensor, k: int, out: torch.Tensor) -> None:
    _Shared.x, _Shared.out, _Shared.key = weakref.ref(x, _forget), out, _key(x, k, out)


class ActivationMask(torch.nn.Module):
    """Forward pre-hook state: zero a fixed (random) or magnitude-ranked (l1-norm) share of the input."""

    def __init__(self, features: int, sparsity: float, method: str, seed: int):
        super().__init__()
        self.sparsity, self.method = sparsity, method
        keep = torch.ones(features, dtype=torch.bool)
        if method == "random":
            gen = torch.Generator().manual_seed(seed)
            keep[torch.randperm(features, generator=gen)[:round(sparsity * features)]] = False
        self.register_buffer("keep", keep)

    def forward(self, x):
        if self.method == "random":
            return x * self.keep.to(x.device)
        k = round(self.sparsity * x.shape[-1])
        if k == 0:
            return x
        done = _same_input(x, k)
        if done is not None:
            return done
        # zero the k smallest |x| of each token vector (exactly k): one Triton pass on a GPU, NumPy's selection
        # on a CPU (mask_kernel). The reference (LABKIT_PRUNE_KERNEL=0) is topk, whose cost grows with the
        # entries it returns, so above 50% sparsity it finds the n - k kept ones instead
        n = x.shape[-1]
        if k < n and mask_kernel.supported(x):
            out = mask_kernel.prune_smallest(x, k)
        elif k < n and mask_kernel.cpu_supported(x):
            out = mask_kernel.prune_smallest_cpu(x, k)
        elif k <= n - k:
            out = x.scatter(-1, x.abs().topk(k, dim=-1, largest=False).indices, 0.0)
        else:
            keep = x.abs().topk(n - k, dim=-1).indices
            out = torch.zeros_like(x).scatter(-1, keep, x.gather(-1, keep))
        _remember(x, k, out)
        return out


def _activation_hook(module, args):
    return (module.activation_mask(args[0]),) + tuple(args[1:])


# a function of the input alone, with no per-call record: a CUDA-graphed step may replay it
# (labkit.training.cuda_graphs.why_not)
_activation_hook.graph_safe = True


def _stable(name: str) -> int:
    """A per-layer seed offset that is the same in every process (``hash`` of a str is not)."""
    return zlib.crc32(name.encode()) % 100_000


def _exact_mask(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Keep-mask with exactly ``k`` zeros at the lowest ``scores``; among equal scores at the cut,
    ``torch.topk`` chooses (in no documented order)."""
    keep = torch.ones(scores.numel(), dtype=torch.bool, device=scores.device)
    if k:
        keep[torch.topk(scores.flatten(), k, largest=False).indices] = False
    return keep.view_as(scores)


def _scores(weight: torch.Tensor, cfg: PruneConfig, gen: torch.Generator) -> torch.Tensor:
    if cfg.method == "l1-norm":
        return weight.detach().abs().float()
    return torch.rand(weight.shape, generator=gen).to(weight.device)


class PruneResult(NamedTuple):
    model: torch.nn.Module
    changed: dict  # layer name -> {"weight": achieved sparsity, "activation": requested}
    report: dict   # requested vs achieved weight sparsity overall


def _split(cfg) -> dict[str, PruneConfig]:
    if not isinstance(cfg, dict):
        raise TypeError(f"prune config must be a dict, got {type(cfg).__name__}")
    unknown = sorted(set(cfg) - set(TARGETS))
    if unknown:
        raise KeyError(f"prune config key(s) {unknown} unknown; allowed: {list(TARGETS)}")
    out = {}
    for t, c in cfg.items():
        if c is not None:
            try:
                out[t] = PruneConfig.from_dict(c)
            except (KeyError, TypeError, ValueError) as err:
                raise type(err)(f"{t}: {err.args[0] if err.args else err}") from None
    if not out:
        raise ValueError(f"prune config {cfg} prunes nothing: give 'weight' and/or 'activation', e.g. "
                         "{'weight': {'sparsity': 0.5}}; to leave a layer alone, give it None")
    if "activation" in out and out["activation"].scope != "local":
        raise ValueError("activation pruning ranks each token vector, so scope must be 'local'; "
                         f"got {out['activation'].scope!r}")
    return out


def prune(model: torch.nn.Module, config: dict, filter_fn: Callable[[str, torch.nn.Module], bool] | None = None,
          inplace: bool = False) -> PruneResult:
    """Prune the selected Linear layers' weights and/or inputs (a copy of ``model`` unless ``inplace``)."""
    if not isinstance(config, dict):
        raise TypeError(f"prune config must be a dict ({{'weight': ..., 'activation': ...}} or a selection "
                        f"spec), got {type(config).__name__}")
    # a flat config is parsed once here, so a mistake is reported once and before any layer is touched
    spec = config if "by" in config else {"by": "type", "linear": _split(config)}
    target = model if inplace else copy.deepcopy(model)
    layers = [(name, module, _split(cfg)) for name, module, cfg in select(target, spec, filter_fn=filter_fn)]
    if any(parametrize.is_parametrized(m, "weight") for _, m, _ in layers):
        raise ValueError("a selected layer is already pruned; prune the unpruned model")
    changed = {name: {} for name, _, _ in layers}
    # weights: local layers one by one; global layers ranked together, per (method, seed, sparsity)
    masks = {}
    groups: dict[PruneConfig, list] = {}
    for name, module, cfgs in layers:
        w = cfgs.get("weight")
        if w is None:
            continue
        gen = torch.Generator().manual_seed(w.seed + _stable(name) if w.scope == "local" else w.seed)
        if w.scope == "local":
            masks[name] = _exact_mask(_scores(module.weight, w, gen), round(w.sparsity * module.weight.numel()))
        else:
            groups.setdefault(w, []).append((name, module))
    for w, members in groups.items():
        gen = torch.Generator().manual_seed(w.seed)
        scores = [_scores(m.weight, w, gen) for _, m in members]
        flat = torch.cat([s.flatten() for s in scores])
        keep = _exact_mask(flat, round(w.sparsity * flat.numel()))
        offset = 0
        for (name, m), s in zip(members, scores):
            masks[name] = keep[offset:offset + s.numel()].view_as(s)
            offset += s.numel()
    zeros = total = 0
    for name, module, cfgs in layers:
        if name in masks:
            parametrize.register_parametrization(module, "weight", WeightMask(masks[name]))
            pruned = int((~masks[name]).sum())
            zeros, total = zeros + pruned, total + masks[name].numel()
            changed[name]["weight"] = pruned / masks[name].numel()
        a = cfgs.get("activation")
        if a is not None:
            module.activation_mask = ActivationMask(module.in_features, a.sparsity, a.method,
                                                    a.seed + _stable(name))
            module.register_forward_pre_hook(_activation_hook)
            changed[name]["activation"] = a.sparsity
    _warn_off_target(_sparsity_rows(layers, masks, groups))
    requested = {t: c.sparsity for _, _, cfgs in layers[:1] for t, c in cfgs.items()}
    report = {"layers": len(layers), "requested": requested,
              "achieved_weight_sparsity": zeros / total if total else None}
    return PruneResult(target, changed, report)


def weight_sparsity(model: torch.nn.Module) -> float:
    """Fraction of zeros in the effective weights of all Linear layers (what the forward uses)."""
    zeros = total = 0
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            w = m.weight  # parametrized: the masked weight
            zeros += int((w == 0).sum())
            total += w.numel()
    return zeros / total


def activation_sparsity(model: torch.nn.Module, inputs: dict) -> float:
    """Fraction of zeros in the (masked) inputs of pruned Linear layers on one batch."""
    seen = []

    def record(module, args):
        x = args[0]  # runs after the masking pre-hook registered by prune(): already masked
        seen.append((int((x == 0).sum()), x.numel()))

    hooks = [m.register_forward_pre_hook(record) for m in model.modules() if hasattr(m, "activation_mask")]
    # the probe batch may live where the loaders keep their tensors (the GPU), the model elsewhere
    dev = next(model.parameters()).device
    try:
        with torch.no_grad():
            model(**{k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()})
    finally:
        for h in hooks:
            h.remove()
    if not seen:
        raise ValueError("no layer of the model has an activation mask")
    return sum(z for z, _ in seen) / sum(n for _, n in seen)
