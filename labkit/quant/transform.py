"""``quantize(model, config, filter_fn)``: swap selected Linear layers for ``QuantLinear``.

``config`` is one ``LinearQuantConfig`` (every Linear that ``filter_fn`` accepts), a flat course dict
(the same), or a selection spec ``{"by": ..., "default": ..., key: ...}`` (see ``labkit.select``).
"""
from __future__ import annotations

import copy
import warnings
from typing import Callable, NamedTuple

import torch

from ..select import is_skip, select, set_submodule
from . import fast
from .config import ROLES, LinearQuantConfig
from .linear import QuantLinear


class TransformResult(NamedTuple):
    model: torch.nn.Module
    changed: dict  # layer name -> what was done to it


def _is_flat(config: dict) -> bool:
    """A flat course config (``name`` and/or ``<role>_...`` keys), not a selection spec."""
    return "by" not in config and any(k == "name" or k.startswith(tuple(r + "_" for r in ROLES))
                                      for k in config)


def _as_spec(config) -> dict:
    if isinstance(config, LinearQuantConfig):
        return {"by": "type", "linear": config}
    if isinstance(config, dict) and _is_flat(config):
        # one flat config for every Linear, parsed once here so a mistake is reported once, not per layer
        return {"by": "type", "linear": config if is_skip(config) else LinearQuantConfig.from_dict(config)}
    if isinstance(config, dict):
        return config
    raise TypeError(f"quantize config must be a LinearQuantConfig or dict, got {type(config).__name__}")


def quantize(model: torch.nn.Module, config, filter_fn: Callable[[str, torch.nn.Module], bool] | None = None,
             inplace: bool = False, qat_matmul: str = "fp32", compile: bool = True) -> TransformResult:
    """Return a model whose selected Linear layers quantize per ``config`` (a copy unless ``inplace``).

    Every layer config is parsed and validated before any layer is replaced, so a bad config leaves the
    model untouched. ``qat_matmul="bf16"``: see ``set_qat_matmul``. ``compile=False``: every fake
    quantization runs eagerly (the bf16 path's fused one and, on CUDA, the inference path's).
    """
    fast.check_mode(qat_matmul)
    spec = _as_spec(config)
    target = model if inplace else copy.deepcopy(model)
    plan = []
    for name, module, cfg in select(target, spec, kinds=(torch.nn.Linear,), filter_fn=filter_fn):
        if isinstance(module, QuantLinear):
            raise ValueError(f"layer {name!r} is already quantized")
        try:
            plan.append((name, module, LinearQuantConfig.from_dict(cfg)))
        except (KeyError, TypeError, ValueError) as err:
            raise type(err)(f"layer {name!r}: {err.args[0] if err.args else err}") from None
    changed = {}
    for name, module, qcfg in plan:
        set_submodule(target, name, QuantLinear.from_linear(module, qcfg, compile=compile))
        changed[name] = qcfg.describe()
    if qat_matmul != "fp32":
        set_qat_matmul(target, qat_matmul, compile)
    return TransformResult(target, changed)


def set_qat_matmul(model: torch.nn.Module, mode: str = "bf16", compile: bool = True) -> dict[str, str]:
    """Set every ``QuantLinear``'s ``qat_matmul``; returns, per layer, the path it takes under bf16
    autocast: "bf16", or "fp32: <why>" (warned once when some layers cannot take the bf16 path)."""
    fast.check_mode(mode)
    report = {}
    for name, m in model.named_modules():
        if isinstance(m, QuantLinear):
            m.qat_matmul, m.compile = mode, compile
            reason = "qat_matmul='fp32'" if mode == "fp32" else fast.why_not(m)
            report[name] = f"fp32: {reason}" if reason else "bf16"
    stuck = {k: v for k, v in report.items() if v != "bf16"}
    if mode == "bf16" and stuck:
        warnings.warn(f"qat_matmul='bf16': {len(stuck)} of {len(report)} QuantLinear layers keep the fp32 path: "
                      + "; ".join(f"{k} ({v[6:]})" for k, v in list(stuck.items())[:5])
                      + (" ..." if len(stuck) > 5 else ""), stacklevel=2)
    return report
