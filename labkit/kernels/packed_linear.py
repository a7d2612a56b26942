"""``MXINT8Linear``: a Linear layer stored as MXINT8 (int8 mantissas + uint8 exponents), dequantized on the fly.

The weight lives only in packed form (buffers ``mantissa`` (out, in) int8 and ``exponent``
(out, in / group_size) uint8, 8 + 8/group_size bits per weight). The compute dtype is autocast's, else the
input's. Two forward paths (``impl``), named by ``describe()`` and logged once per process, never silent:

- ``fused`` (``fused_linear.mxint8_linear``): one Triton kernel reads the packed weight and multiplies, no
  bf16 copy; where it can run (CUDA, Triton, up to ``fused_linear.MAX_FUSED_ROWS`` rows, see there).
- ``dequant``: dequantize to a bf16 temporary (the CUDA extension on CUDA tensors, else the reference),
  cast to the compute dtype, ``F.linear``.

``impl="auto"`` takes ``fused`` where it can run, else ``dequant`` (with a one-time
``MXINT8FusedFallbackWarning`` when CUDA tensors miss the kernel for a reason other than the row count);
``backend="reference"`` means pure PyTorch throughout (``dequant`` with the reference). The bias keeps its
original dtype. ``convert_to_mxint8`` swaps a model's ``nn.Linear`` layers for these, in place.
"""
from __future__ import annotations

import logging
import warnings
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from . import fused_linear
from .dequant import check_backend, dequantize
from ..quant.formats.mxint import check_group_size, quantize_mxint8

IMPLS = ("auto", "fused", "dequant")
log = logging.getLogger(__name__)
_announced: set = set()


class MXINT8FusedFallbackWarning(UserWarning):
    """CUDA tensors went through dequantize-then-matmul because the fused kernel cannot run."""


def check_impl(impl: str) -> str:
    if impl not in IMPLS:
        raise ValueError(f"impl={impl!r}: allowed values are {', '.join(map(repr, IMPLS))}")
    return impl


def _announce(path: str, reason: str | None, cuda: bool) -> None:
    key = (path, reason)
    if key in _announced:
        return
    _announced.add(key)
    message = f"MXINT8Linear: {path} path" + (f" ({reason})" if reason else " (fused Triton kernel)")
    log.info(message)
    # a GPU that could have run the kernel but did not (no Triton, old GPU, dtype): say so once
    if path == "dequant" and cuda and reason and "rows" not in reason:
        warnings.warn(message, MXINT8FusedFallbackWarning, stacklevel=3)


class MXINT8Linear(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True, group_size: int = 32,
                 device=None, dtype: torch.dtype = torch.float32, backend: str = "auto", impl: str = "auto"):
        super().__init__()
        check_group_size((out_features, in_features), group_size, "the weight (out_features, in_features)")
        self.in_features, self.out_features, self.group_size = in_features, out_features, group_size
        self.backend = check_backend(backend)
        self.impl = check_impl(impl)
        self.register_buffer("mantissa", torch.zeros(out_features, in_features, dtype=torch.int8, device=device))
        self.register_buffer("exponent", torch.zeros(out_features, in_features // group_size, dtype=torch.uint8,
                                                     device=device))
        self.bias = nn.Parameter(torch.zeros(out_features, dtype=dtype, device=device)) if bias else None

    @classmethod
    def from_linear(cls, linear: nn.Linear, group_size: int = 32, backend: str = "auto",
                    impl: str = "auto") -> "MXINT8Linear":
        """Quantize ``linear``'s weight (groups along in_features); the bias is copied as is."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"from_linear needs an nn.Linear, got {type(linear).__name__}")
        w = linear.weight.detach()
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, group_size,
                    device=w.device, dtype=(linear.bias.dtype if linear.bias is not None else w.dtype),
                    backend=backend, impl=impl)
        mantissa, exponent = quantize_mxint8(w, group_size)
        layer.mantissa.copy_(mantissa)
        layer.exponent.copy_(exponent)
        if linear.bias is not None:
            layer.bias.data.copy_(linear.bias.detach())
            layer.bias.requires_grad_(linear.bias.requires_grad)
        return layer

    def dequantized_weight(self) -> torch.Tensor:
        """The weight as bf16 (out, in): exactly the MXINT8 values."""
        return dequantize(self.mantissa, self.exponent, self.group_size, backend=self.backend)

    def _not_fused(self) -> str | None:
        if self.impl == "dequant":
            return "impl='dequant'"
        if self.backend == "reference":
            return "backend='reference': pure PyTorch"
        return None

    def path(self, x: torch.Tensor, dtype: torch.dtype | None = None) -> tuple[str, str | None]:
        """("fused" | "dequant", why not fused) for a forward on ``x`` computed in ``dtype`` (x's)."""
        reason = self._not_fused()
        if reason is None:
            path, reason = fused_linear.path_for(x, self.group_size, dtype)
            if self.impl == "fused" and path != "triton":
                raise RuntimeError(f"impl='fused' but the fused kernel cannot run here: {reason}")
        return ("dequant", reason) if reason else ("fused", None)

    def describe(self, device="cuda") -> str:
        """Which path forwards on ``device`` take, and why (row/dtype rules: ``fused_linear.describe``)."""
        reason = self._not_fused()
        if reason:
            return f"MXINT8Linear on {device}: dequantize-then-matmul ({reason})"
        return f"MXINT8Linear (impl={self.impl!r}): {fused_linear.describe(device)}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dev = x.device.type
        dtype = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else x.dtype
        path, reason = self.path(x, dtype)
        _announce(path, reason, x.is_cuda)
        if path == "fused":
            bias = self.bias.to(dtype) if self.bias is not None else None
            return fused_linear.mxint8_linear(x.to(dtype), self.mantissa, self.exponent, self.group_size, bias)
        w = self.dequantized_weight()
        # MXINT8 values are exact in bf16, float32 and float64, so this cast loses nothing there.
        bias = self.bias
        if bias is not None and bias.dtype != dtype and not torch.is_autocast_enabled(dev):
            bias = bias.to(dtype)
        return F.linear(x, w.to(dtype), bias)

    def packed_bytes(self) -> int:
        return self.mantissa.numel() * self.mantissa.element_size() + \
            self.exponent.numel() * self.exponent.element_size()

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, group_size={self.group_size}, backend={self.backend!r}, "
                f"impl={self.impl!r}")

    # group_size travels with the state_dict, so loading into a layer of another group size fails loudly
    def get_extra_state(self):
        return {"format": "mxint8", "group_size": self.group_size}

    def set_extra_state(self, state):
        if not isinstance(state, dict) or state.get("format") != "mxint8":
            raise ValueError(f"not an MXINT8Linear state: {state!r}")
        if state.get("group_size") != self.group_size:
            raise ValueError(f"state_dict has group_size={state.get('group_size')} but this layer has "
                             f"group_size={self.group_size}")


def _set_submodule(model: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, module)


def convert_to_mxint8(model: nn.Module, group_size: int = 32,
                      filter_fn: Callable[[str, nn.Module], bool] | None = None, backend: str = "auto",
                      impl: str = "auto") -> dict:
    """Replace, in place, every ``nn.Linear`` of ``model`` that ``filter_fn(name, module)`` accepts (all by
    default) by an ``MXINT8Linear``; returns a report of what changed and what did not, and why.

    A layer whose in_features ``group_size`` does not divide is left as it is and listed under ``skipped``.
    """
    check_backend(backend)
    check_impl(impl)
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size={group_size!r}: must be a positive int")
    converted, skipped = [], {}
    fp_bytes = packed_bytes = 0
    for name, module in list(model.named_modules()):
        if not isinstance(module, nn.Linear):
            continue
        if filter_fn is not None and not filter_fn(name, module):
            skipped[name] = "excluded by filter_fn"
            continue
        if module.in_features % group_size:
            skipped[name] = f"in_features={module.in_features} not divisible by group_size={group_size}"
            continue
        new = MXINT8Linear.from_linear(module, group_size, backend=backend, impl=impl)
        fp_bytes += module.weight.numel() * module.weight.element_size()
        packed_bytes += new.packed_bytes()
        _set_submodule(model, name, new)
        converted.append(name)
    return {"group_size": group_size, "converted": converted, "skipped": skipped,
            "weight_bytes_before": fp_bytes, "weight_bytes_after": packed_bytes,
            "weight_saving": (1 - packed_bytes / fp_bytes) if fp_bytes else 0.0}


def exclude(*substrings: str) -> Callable[[str, nn.Module], bool]:
    """A ``filter_fn`` keeping every Linear whose name contains none of ``substrings`` (e.g. "classifier")."""
    return lambda name, module: not any(s in name for s in substrings)
