"""Number formats: a frozen config that validates itself, fake-quantizes with a straight-through
estimator (STE), and counts its stored bits per element.

A format subclass implements ``quantize_values`` (the forward rounding, no autograd) and, where it
saturates, ``pass_mask`` (True where the gradient passes: the clipped STE). Formats with learnable
state override ``quantizer()`` to return their own module.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import torch

FORMATS: dict[str, type["NumberFormat"]] = {}


def register(cls):
    """Class decorator: make a format constructible by its ``name``."""
    if cls.name in FORMATS:
        raise ValueError(f"format {cls.name!r} registered twice")
    FORMATS[cls.name] = cls
    return cls


def make_format(name: str, **params) -> "NumberFormat":
    """Build a registered format by name; unknown names and parameters are errors listing the allowed."""
    if name not in FORMATS:
        raise KeyError(f"unknown number format {name!r}; allowed: {', '.join(sorted(FORMATS))}")
    cls = FORMATS[name]
    fields = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(params) - set(fields))
    if unknown:
        raise KeyError(f"format {name!r} has no parameter(s) {unknown}; allowed: {fields}")
    return cls(**params)


class _STE(torch.autograd.Function):
    """Forward: the format's rounding. Backward: identity where ``pass_mask`` is True, else zero."""

    @staticmethod
    def forward(ctx, x, fmt):
        mask = fmt.pass_mask(x)
        ctx.save_for_backward(mask if mask is not None else torch.empty(0))
        ctx.has_mask = mask is not None
        return fmt.quantize_values(x)

    @staticmethod
    def backward(ctx, grad):
        if not ctx.has_mask:
            return grad, None
        (mask,) = ctx.saved_tensors
        return grad * mask, None


@dataclass(frozen=True)
class NumberFormat:
    name: ClassVar[str] = ""

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:  # subclasses check their fields
        pass

    def quantize_values(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def pass_mask(self, x: torch.Tensor) -> torch.Tensor | None:
        """Where the STE passes gradients (None: everywhere)."""
        return None

    def bits_per_element(self, shape: tuple[int, ...]) -> float:
        """Average stored bits per element of a tensor of ``shape`` (shared exponents included)."""
        raise NotImplementedError

    def why_not_bf16(self, normal_only: bool = False) -> str | None:
        """None when every value the format produces (NaN aside) is a bf16 value, so its fake-quantized
        tensors can feed a bf16 matmul unchanged (``labkit.quant.fast``); else why not. ``normal_only``:
        every value of magnitude >= 2^-126 (see ``_util.why_not_bf16``)."""
        return f"{self.name}: not analysed for bf16 exactness"

    def row_local(self) -> bool:
        """True where ``quantize_values`` rounds each row (the last dimension) on its own: elementwise, or in blocks
        and per-row scales along the last dimension, with no random draws. Such a format may quantize a tensor in
        chunks of rows (``rowwise_values``); a format that reads the whole tensor (a per-tensor scale) says False."""
        return False

    def fake_quantize(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            # integer tensors would come back in mixed dtypes, some formats rounding them, some not
            raise TypeError(f"{self.name}: fake_quantize needs a floating-point tensor, got "
                            + (f"a tensor of dtype {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__))
        if not (torch.is_grad_enabled() and x.requires_grad):
            return rowwise_values(self, x)  # no backward will run: skip computing the STE mask
        return self.differentiable(x)

    def differentiable(self, x: torch.Tensor) -> torch.Tensor:
        """x fake-quantized with autograd: the clipped STE of ``pass_mask``. A format computed by another
        module with its own STE (mxint8) returns that module's result instead, so there is one gradient."""
        return _STE.apply(x, self)

    def quantizer(self) -> torch.nn.Module:
        return Quantizer(self)

    def sign_terms(self, x: torch.Tensor) -> tuple | None:
        """``quantize_values(x)`` as (scales, planes): q = sum_i scales[i] * planes[i], with ``planes`` of shape
        (L, *x.shape), fp16 +-1 (NaN where x is NaN), and each scale one per row (shape (..., 1)) or per
        tensor; None: not of that form. The binary formats' Linear multiplies the planes exactly in fp16
        (``labkit.quant.sign_matmul``).
        """
        return None

    def describe(self) -> str:
        params = ", ".join(f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self))
        return f"{self.name}({params})"


# Elements a CPU rounds at once: a format's 10-20 elementwise passes over 2^18 fp32 values (1 MiB) stay in cache
# instead of streaming a whole activation from memory each pass (64 x 128 x 1536 on 2 cores: minifloat_denorm
# 490 -> 120 ms, block_minifloat 944 -> 300 ms, integer 72 -> 32 ms; the same bits)
CPU_CHUNK = 1 << 18


def rowwise_values(fmt: NumberFormat, x: torch.Tensor) -> torch.Tensor:
    """``fmt.quantize_values(x)``, the same bits: on a CPU, a large tensor of a ``row_local`` format in chunks of
    whole rows of about ``CPU_CHUNK`` elements; elsewhere in one call."""
    if x.device.type != "cpu" or x.dim() < 2 or x.numel() <= 2 * CPU_CHUNK or not fmt.row_local():
        return fmt.quantize_values(x)
    rows = x.reshape(-1, x.shape[-1])
    return torch.cat([fmt.quantize_values(r) for r in rows.split(max(1, CPU_CHUNK // x.shape[-1]))]).reshape(x.shape)


class Quantizer(torch.nn.Module):
    """A module applying a stateless format (so formats with parameters can be modules too)."""

    def __init__(self, fmt: NumberFormat):
        super().__init__()
        self.fmt = fmt

    def forward(self, x):
        return self.fmt.fake_quantize(x)

    def plain(self) -> bool:
        """True when ``forward(x)`` is ``fmt.fake_quantize(x)`` (after ``observe``), so a caller may apply the
        format itself (the bf16 path); False for quantizers whose rule depends on their mode or state."""
        return True

    def has_sign_terms(self) -> bool:
        return self.plain() and type(self.fmt).sign_terms is not NumberFormat.sign_terms

    def sign_terms(self, x):
        return self.fmt.sign_terms(x)

    def observe(self, x) -> None:
        """Look at the tensor about to be quantized (a range check, say); the base quantizer does nothing."""

    def inference(self, x, values=None):
        """``forward(x)``'s values when no gradient is needed. ``values(fmt, x)`` computes
        ``fmt.quantize_values(x)`` (the same bits in fewer passes: the caller passes
        ``labkit.quant.fast.quantize_values``, which sits above the formats); None: the format's own formula."""
        return rowwise_values(self.fmt, x) if values is None else values(self.fmt, x)

    def extra_repr(self):
        return self.fmt.describe()
