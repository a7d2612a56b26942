"""What the MXINT8 kernels are timed on: rotated weight copies and the error each output is checked against.

The clocks are ``labkit.perf.timing``'s (``graph_ms``, ``graph_time``, ``MedianTimer``, ``rotation``): this
module only builds the MXINT8 inputs they cycle through (``rotation(...)`` copies, so that no call reads its
weight from L2) and checks each timed output against a float64 product. The fused-linear benchmarks
(benchmarks/mxint8/) share its shapes and tolerance.
"""
from __future__ import annotations

import torch

from .dequant import dequantize
from ..quant.formats.mxint import quantize_mxint8

# N x K (nn.Linear's weight layout: out_features x in_features) of the fused-linear benchmarks
SHAPES = ("4096x4096", "14336x4096", "28672x8192")
REL_TOL = 2.0 ** -7  # relative Frobenius error vs float64: bf16 output rounding is 2^-8 per element


def parse_shape(text: str) -> tuple[int, int]:
    """An ``N x K`` shape as (N, K): "28672x8192" -> (28672, 8192)."""
    n, _, k = text.lower().partition("x")
    return int(n), int(k)


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
