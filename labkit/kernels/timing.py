"""What the MXINT8 kernels are timed on: rotated weight copies and the error each output is checked against.

The clocks are ``labkit.perf.timing``'s (``graph_ms``, ``graph_time``, ``MedianTimer``, ``rotation``): this
module only builds the MXINT8 inputs they cycle through (``rotation(...)`` copies, so that no call reads its
weight from L2) and checks each timed output against a float64 product.
"""
from __future__ import annotations

import torch

from .dequant import dequantize
from ..quant.formats.mxint import quantize_mxint8


def weight_copies(N: int, K: int, group_size: int, copies: int, generator: torch.Generator) -> list[tuple]:
    """``copies`` random (N, K) weights as (int8 mantissa, exponent (N, K / group), exact bf16 weight)."""
    out = []
    for _ in range(copies):
        w = torch.randn(N, K, device=generator.device, generator=generator) * 0.02
        m, e = quantize_mxint8(w, group_size)
        out.append((m, e.reshape(N, K // group_size), dequantize(m, e, group_size).to(torch.bfloat16)))
    return out


def rel_error(y: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> float:
    """Relative Frobenius error of ``y`` against ``x @ w^T`` in float64."""
    ref = x.double() @ w.double().T
    return float(torch.linalg.vector_norm(y.double() - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-300))
