"""``MXINT8Linear``: a Linear layer stored as MXINT8 (int8 mantissas + uint8 exponents), dequantized on the fly.

The weight lives only in packed form (buffers ``mantissa`` (out, in) int8 and ``exponent``
(out, in / group_size) uint8, 8 + 8/group_size bits per weight); each forward dequantizes it to a bf16
temporary (the CUDA extension on CUDA tensors, else the reference), casts it to the compute dtype
(autocast's, else the input's) and calls ``F.linear``. The bias keeps its original dtype.
``convert_to_mxint8`` swaps a model's ``nn.Linear`` layers for these, in place.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .dequant import check_backend, dequantize
from .mxint8_ref import check_group_size, quantize_mxint8


class MXINT8Linear(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True, group_size: int = 32,
                 device=None, dtype: torch.dtype = torch.float32, backend: str = "auto"):
        super().__init__()
        check_group_size((out_features, in_features), group_size, "the weight (out_features, in_features)")
        self.in_features, self.out_features, self.group_size = in_features, out_features, group_size
        self.backend = check_backend(backend)
        self.register_buffer("mantissa", torch.zeros(out_features, in_features, dtype=torch.int8, device=device))
        self.register_buffer("exponent", torch.zeros(out_features, in_features // group_size, dtype=torch.uint8,
                                                     device=device))
        self.bias = nn.Parameter(torch.zeros(out_features, dtype=dtype, device=device)) if bias else None

    @classmethod
    def from_linear(cls, linear: nn.Linear, group_size: int = 32, backend: str = "auto") -> "MXINT8Linear":
        """Quantize ``linear``'s weight (groups along in_features); the bias is copied as is."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"from_linear needs an nn.Linear, got {type(linear).__name__}")
        w = linear.weight.detach()
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, group_size,
                    device=w.device, dtype=(linear.bias.dtype if linear.bias is not None else w.dtype),
                    backend=backend)
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.dequantized_weight()
        dev = x.device.type
        dtype = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else x.dtype
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
                f"bias={self.bias is not None}, group_size={self.group_size}, backend={self.backend!r}")

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
                      filter_fn: Callable[[str, nn.Module], bool] | None = None, backend: str = "auto") -> dict:
    """Replace, in place, every ``nn.Linear`` of ``model`` that ``filter_fn(name, module)`` accepts (all by
    default) by an ``MXINT8Linear``; returns a report of what changed and what did not, and why.

    A layer whose in_features ``group_size`` does not divide is left as it is and listed under ``skipped``.
    """
    check_backend(backend)
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
        new = MXINT8Linear.from_linear(module, group_size, backend=backend)
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
