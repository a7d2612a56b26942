"""Weight-only post-training quantization of an LLM's Linear layers, group-wise, in labkit's number formats.

A weight ``(out, in)`` is cut into groups of ``group_size`` consecutive weights along its input dimension (the
matmul's reduction dimension), and each group is quantized with its own scale, as GPTQ, AWQ and llama.cpp's
Q4_x do. How a format of the registry (``labkit.quant.make_format``) meets a group (``GROUP_FORMATS``):

- ``integer``: per group a scale ``s`` (stored in ``scale_dtype``, fp16 by default), then labkit's integer format
  at ``frac_width=0`` rounds ``w / s`` (half to even) and saturates it to ``[-2^(b-1), 2^(b-1) - 1]``:
  symmetric, ``s = max|w| / (2^(b-1) - 1)``. ``symmetric=False``: the unsigned grid ``0 .. 2^b - 1`` with a
  b-bit zero point ``z`` per group, ``s = (max - min) / (2^b - 1)`` over the group's range widened to hold 0,
  ``z = round(-min / s)``, ``q = clamp(round(w / s) + z, 0, 2^b - 1)``, ``w_hat = (q - z) * s`` (labkit's
  integer format is two's complement, without a zero point, so this one grid is written out here).
- ``minifloat_ieee``, ``minifloat_denorm``, ``log``: per group a scale that puts the group's max|w| at the
  format's largest value, then the format itself.
- ``block_fp``, ``block_minifloat``, ``block_log``: the format's own shared exponent (or bias) per block, with
  ``block_size = group_size``; ``mxint8``: its ``group_size`` (width 8 only).
- ``binary_scaling``: one mean-|w| scale per group (fp32) and a sign per weight (width 1 only).

Stored bits per weight count the element bits and each group's shared fields: the scale (``scale_dtype``'s
width) and the zero point (b bits) over ``group_size`` weights, or the format's own shared exponents
(``bits_per_element``). ``quantize_llm_weights`` fake-quantizes every selected Linear in place (its weight is
replaced by the dequantized values), in the manner of torchao's ``quantize_(model, config, filter_fn)``, and
returns what it changed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..quant import FORMATS, make_format
from ..quant.bits import mean_bits

# How each supported format of the registry meets a group (see the module docstring)
GROUP_FORMATS = {
    "integer": "per-group scale (symmetric, or asymmetric with a zero point), then integer rounding",
    "minifloat_ieee": "per-group scale (group max at the format's max), then the minifloat",
    "minifloat_denorm": "per-group scale (group max at the format's max), then the minifloat",
    "log": "per-group scale (group max at the top power of two), then the log format",
    "block_fp": "the format's shared exponent per group (block_size = group_size)",
    "block_minifloat": "the format's shared exponent bias per group (block_size = group_size)",
    "block_log": "the format's shared exponent per group (block_size = group_size)",
    "mxint8": "MXINT8's group (group_size), width 8",
    "binary_scaling": "a mean-|w| scale per group and a sign per weight, width 1",
}
SCALED = ("integer", "minifloat_ieee", "minifloat_denorm", "log")  # a per-group scale, then the format
BLOCKED = {"block_fp": "block_size", "block_minifloat": "block_size", "block_log": "block_size",
           "mxint8": "group_size"}  # the format's own blocks are the groups
FIXED_WIDTH = {"mxint8": 8, "binary_scaling": 1}
SCALE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MARK = "_labkit_group_quant"  # set on a Linear whose weight this module replaced: never quantized twice


def _exponent_width(width: int) -> int:
    """A minifloat's default exponent bits at ``width``: E1 up to 3 bits, E2M1 (FP4), E2M2, E2M3 (FP6), E3M3, E4M3
    (FP8) at 8, E5 beyond."""
    return 1 if width <= 3 else 2 if width <= 6 else 3 if width == 7 else 4 if width == 8 else 5


def _default_params(name: str, width: int, group_size: int) -> dict:
    if name == "integer":
        return {"width": width, "frac_width": 0}
    if name == "minifloat_ieee":
        return {"width": width, "exponent_width": _exponent_width(width)}
    if name == "minifloat_denorm":
        return {"width": width, "exponent_width": max(1, min(_exponent_width(width), width - 2))}
    if name == "log":
        return {"width": width}
    if name == "block_fp":
        return {"width": width, "exponent_width": 8, "block_size": group_size}
    if name == "block_minifloat":
        return {"width": width, "exponent_width": max(1, min(_exponent_width(width), width - 1)),
                "exponent_bias_width": 8, "block_size": group_size}
    if name == "block_log":
        return {"width": width, "exponent_bias_width": 8, "block_size": group_size}
    if name == "mxint8":
        return {"group_size": group_size}
    return {"per_channel": True}  # binary_scaling, applied to rows of one group each


def _check_int(key: str, value, lo: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"{key}={value!r}: must be an int >= {lo} ({what})")


@dataclass(frozen=True)
class GroupSpec:
    """One group-wise weight quantization: a labkit format (``fmt``), the group size along the input dimension,
    and, for the scaled formats, the scale's dtype and (integer) whether the grid is symmetric. Build it with
    ``group_spec``."""

    fmt_name: str
    width: int
    group_size: int
    fmt: object  # the labkit NumberFormat that rounds each group
    symmetric: bool = True
    scale_dtype: torch.dtype = torch.float16

    @property
    def scale_bits(self) -> int:
        """Bits of one stored per-group scale (0 where the format's own shared fields are the scale)."""
        return torch.finfo(self.scale_dtype).bits if self.fmt_name in SCALED else 0

    @property
    def zero_bits(self) -> int:
        """Bits of one stored per-group zero point (asymmetric integer only)."""
        return self.width if self.fmt_name == "integer" and not self.symmetric else 0

    @property
    def max_value(self) -> float:
        """The value a group's max|w| / scale lands on (the scaled formats)."""
        if self.fmt_name == "integer":
            return float(2 ** (self.width - 1) - 1) if self.symmetric else float(2 ** self.width - 1)
        if self.fmt_name == "log":
            return 2.0 ** self.fmt.emax
        return float(self.fmt.max_value)

    def bits_per_weight(self, shape: tuple[int, ...]) -> float:
        """Stored bits per weight of a weight of ``shape``: element bits plus each group's shared fields."""
        check_groups(tuple(shape), self.group_size)
        if self.fmt_name in SCALED:
            return self.fmt.bits_per_element(tuple(shape)) + (self.scale_bits + self.zero_bits) / self.group_size
        if self.fmt_name == "binary_scaling":
            return self.fmt.bits_per_element((math.prod(shape) // self.group_size, self.group_size))
        return self.fmt.bits_per_element(tuple(shape))

    def quantize(self, w: torch.Tensor) -> torch.Tensor:
        """``w`` (``(..., in)``, ``in`` a multiple of ``group_size``) quantized group-wise and dequantized, in
        ``w``'s dtype (computed in float32, float64 for a float64 ``w``)."""
        if not isinstance(w, torch.Tensor) or not w.is_floating_point():
            raise TypeError(f"w must be a floating-point tensor, got "
                            f"{w.dtype if isinstance(w, torch.Tensor) else type(w).__name__}")
        check_groups(tuple(w.shape), self.group_size)
        work = w.detach().to(torch.promote_types(w.dtype, torch.float32))
        if self.fmt_name in BLOCKED:
            out = self.fmt.quantize_values(work)
        else:
            groups = work.reshape(*work.shape[:-1], work.shape[-1] // self.group_size, self.group_size)
            if self.fmt_name == "binary_scaling":
                out = self.fmt.quantize_values(groups)  # per_channel: one alpha per group (its last dimension)
            elif self.fmt_name == "integer" and not self.symmetric:
                out = self._asymmetric(groups)
            else:
                out = self._scaled(groups)
            out = out.reshape(work.shape)
        return out.to(w.dtype)

    def _scale(self, span: torch.Tensor) -> torch.Tensor:
        """``span / max_value`` as stored (rounded to ``scale_dtype``), in the working dtype."""
        return (span / self.max_value).to(self.scale_dtype).to(span.dtype)

    def _scaled(self, groups: torch.Tensor) -> torch.Tensor:
        scale = self._scale(groups.abs().amax(dim=-1, keepdim=True))
        safe = torch.where(scale == 0, torch.ones_like(scale), scale)  # an all-zero group (or one below the
        # scale dtype's range) comes back as zeros: q = round(w) = 0 for |w| < 1/2, times a zero scale
        return self.fmt.quantize_values(groups / safe) * scale

    def _asymmetric(self, groups: torch.Tensor) -> torch.Tensor:
        qmax = 2 ** self.width - 1
        lo = groups.amin(dim=-1, keepdim=True).clamp(max=0)
        hi = groups.amax(dim=-1, keepdim=True).clamp(min=0)
        scale = self._scale(hi - lo)
        safe = torch.where(scale == 0, torch.ones_like(scale), scale)
        zero = torch.round(-lo / safe).clamp(0, qmax)
        q = torch.clamp(torch.round(groups / safe) + zero, 0, qmax)
        return (q - zero) * scale

    def describe(self) -> str:
        parts = [f"{self.fmt.describe()} per group of {self.group_size}"]
        if self.fmt_name == "integer":
            parts.append("symmetric" if self.symmetric else "asymmetric")
        if self.fmt_name in SCALED:
            parts.append(f"{str(self.scale_dtype).removeprefix('torch.')} scale")
        return ", ".join(parts)


def group_spec(fmt_name: str, width: int, group_size: int, symmetric: bool = True,
               scale_dtype: torch.dtype = torch.float16, **params) -> GroupSpec:
    """A validated ``GroupSpec``: ``fmt_name`` one of ``GROUP_FORMATS``, ``width`` its element bits, ``group_size``
    weights per group; ``params`` override the format's defaults (e.g. ``exponent_width=3``). Errors name the value
    and what is allowed."""
    if fmt_name not in GROUP_FORMATS:
        other = f" ({fmt_name!r} is a labkit format without a group-wise weight mapping)" if fmt_name in FORMATS else ""
        raise KeyError(f"unknown group-quantization format {fmt_name!r}{other}; allowed: {', '.join(GROUP_FORMATS)}")
    _check_int("width", width, 1, "element bits")
    _check_int("group_size", group_size, 1, "weights per group along the input dimension")
    if fmt_name in FIXED_WIDTH and width != FIXED_WIDTH[fmt_name]:
        raise ValueError(f"{fmt_name}: width={width}; its width is fixed: allowed {FIXED_WIDTH[fmt_name]}")
    if fmt_name == "integer" and symmetric and width < 2:
        raise ValueError(f"integer: width={width} symmetric has no positive level; allowed: width >= 2, or "
                         "symmetric=False for width 1")
    if not isinstance(symmetric, bool):
        raise TypeError(f"symmetric={symmetric!r}: must be True or False")
    if fmt_name != "integer" and not symmetric:
        raise ValueError(f"{fmt_name}: symmetric=False (a zero point) is for the integer format only")
    if scale_dtype not in SCALE_DTYPES:
        raise ValueError(f"scale_dtype={scale_dtype!r}: allowed {', '.join(map(str, SCALE_DTYPES))}")
    fixed = {"width", "block_size", "group_size"} & set(params)
    if fixed:
        raise KeyError(f"{sorted(fixed)}: set by width and group_size, not as a format parameter")
    fmt = make_format(fmt_name, **{**_default_params(fmt_name, width, group_size), **params})
    return GroupSpec(fmt_name, width, group_size, fmt, symmetric, scale_dtype)


def _divisors(n: int, limit: int = 12) -> str:
    divs = [d for d in range(1, n + 1) if n % d == 0]
    return ", ".join(map(str, divs[:limit])) + (", ..." if len(divs) > limit else "")


def check_groups(shape: tuple[int, ...], group_size: int, name: str = "w") -> None:
    """``group_size`` divides the last dimension of ``shape``; else a ValueError listing the sizes that do."""
    if not shape:
        raise ValueError(f"{name} is a scalar; groups run along the last (input) dimension, so it needs one")
    if shape[-1] % group_size:
        raise ValueError(f"group_size={group_size} does not divide the input dimension of {name} (shape "
                         f"{tuple(shape)}); allowed: divisors of {shape[-1]}: {_divisors(shape[-1])}")


@dataclass
class LayerQuant:
    """What quantization did to one Linear: its weight's shape, stored bits per weight, and the relative
    error ``||W - W_hat|| / ||W||`` of the weight."""

    shape: tuple[int, int]
    bits_per_weight: float
    weight_rel_error: float
    extra: dict = field(default_factory=dict)  # method-specific (AWQ: alpha, output MSEs, input-scale bits)


@dataclass
class QuantReport:
    """What ``quantize_llm_weights`` (or ``awq.awq_quantize``) changed: each quantized layer, the layers left in
    their dtype, and the average stored bits per weight, over the quantized weights (``weight_bits``) and over
    every Linear's weight, unquantized ones at their dtype's width (``linear_bits``)."""

    method: str
    spec: str
    layers: dict[str, LayerQuant]
    skipped: list[str]
    weight_bits: float
    linear_bits: float
    untied_output: bool = False  # the output layer was tied to the input embedding and got its own copy

    def summary(self) -> dict:
        return {"method": self.method, "spec": self.spec, "layers": len(self.layers), "skipped": list(self.skipped),
                "weight_bits": self.weight_bits, "linear_bits": self.linear_bits,
                "quantized_weights": sum(math.prod(l.shape) for l in self.layers.values()),
                "untied_output": self.untied_output}


def _float_bits(t: torch.Tensor) -> int:
    return torch.finfo(t.dtype).bits


def plan_layers(model: torch.nn.Module, spec: GroupSpec,
                filter_fn: Callable[[str, torch.nn.Module], bool] | None = None):
    """``(selected, skipped)``: ``[(name, linear)]`` of the Linear layers to quantize, every one checked (group
    size dividing its input dimension, not quantized before), and the names of the other Linear layers.
    ``filter_fn(name, module)`` picks among all Linear layers; without it, every Linear but the output layer
    (``model.get_output_embeddings()``, the LM head)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if filter_fn is not None and not callable(filter_fn):
        raise TypeError(f"filter_fn must be a callable (name, module) -> bool or None, got {filter_fn!r}")
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    selected, skipped = [], []
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        keep = filter_fn(name, module) if filter_fn is not None else module is not head
        if not keep:
            skipped.append(name)
            continue
        if getattr(module, MARK, None):
            raise ValueError(f"layer {name!r} is already quantized ({getattr(module, MARK)}); load the model "
                             "again (or deep-copy it before quantizing) to quantize it another way")
        selected.append((name, module))
    if not selected:
        raise ValueError("no Linear layer selected: filter_fn accepted none" if filter_fn is not None
                         else "the model has no Linear layer to quantize")
    bad = [(name, m.in_features) for name, m in selected if m.in_features % spec.group_size]
    if bad:
        common = math.gcd(*{m.in_features for _, m in selected})
        widths = sorted({f for _, f in bad})
        raise ValueError(f"group_size={spec.group_size} does not divide the input dimension of {len(bad)} selected "
                         f"layer(s) (in_features {', '.join(map(str, widths))}; e.g. {bad[0][0]!r}); allowed here: "
                         f"{', '.join(str(d) for d in range(1, common + 1) if common % d == 0)} (the divisors of "
                         f"{common}, the greatest common divisor of the selected layers' in_features)")
    return selected, skipped


def untie_output(model: torch.nn.Module, selected) -> bool:
    """Give the output layer its own copy of the weight where it is selected and tied to the input embedding,
    so quantizing it leaves the embedding as it was; True when it did."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    inputs = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if head is None or inputs is None or head.weight is not inputs.weight or all(m is not head for _, m in selected):
        return False
    head.weight = torch.nn.Parameter(head.weight.detach().clone(), requires_grad=head.weight.requires_grad)
    if hasattr(model, "config"):
        model.config.tie_word_embeddings = False
    return True


def rel_error(w: torch.Tensor, w_hat: torch.Tensor) -> float:
    w64 = w.detach().double()
    norm = w64.norm().item()
    return (w64 - w_hat.detach().double()).norm().item() / norm if norm else 0.0


def report_bits(model: torch.nn.Module, layers: dict[str, LayerQuant], skipped: list[str]) -> tuple[float, float]:
    """(mean stored bits over the quantized weights, over every Linear weight with unquantized ones at their
    dtype's width), weighted by element count (``labkit.quant.bits.mean_bits``)."""
    quantized = [(l.bits_per_weight, math.prod(l.shape)) for l in layers.values()]
    others = [(_float_bits(model.get_submodule(n).weight), model.get_submodule(n).weight.numel()) for n in skipped]
    return mean_bits(quantized), mean_bits(quantized + others)


@torch.no_grad()
def quantize_llm_weights(model: torch.nn.Module, fmt_name: str, width: int, group_size: int,
                         filter_fn: Callable[[str, torch.nn.Module], bool] | None = None, *, symmetric: bool = True,
                         scale_dtype: torch.dtype = torch.float16, **params) -> QuantReport:
    """Round-to-nearest (RTN) group-wise weight quantization of ``model``'s Linear layers, in place: each selected
    layer's weight becomes its quantized-then-dequantized values (``group_spec(fmt_name, width, group_size,
    symmetric, scale_dtype, **params)``), so the model runs as before, with the rounding error in its weights.

    ``filter_fn(name, module) -> bool`` picks the layers (default: every Linear but the LM head; an LM head tied to
    the input embedding is given its own copy first). Every layer is checked before any is changed, so a bad
    argument leaves the model as it was. Deep-copy the model first to keep the original."""
    spec = group_spec(fmt_name, width, group_size, symmetric, scale_dtype, **params)
    selected, skipped = plan_layers(model, spec, filter_fn)
    untied = untie_output(model, selected)
    layers = {}
    for name, module in selected:
        w_hat = spec.quantize(module.weight)
        layers[name] = LayerQuant(tuple(module.weight.shape), spec.bits_per_weight(tuple(module.weight.shape)),
                                  rel_error(module.weight, w_hat))
        module.weight.copy_(w_hat)
        setattr(module, MARK, spec.describe())
    weight_bits, linear_bits = report_bits(model, layers, skipped)
    return QuantReport("rtn", spec.describe(), layers, skipped, weight_bits, linear_bits, untied)
