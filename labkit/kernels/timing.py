"""GPU time of small kernels without the host in it: CUDA-graph replay over rotating inputs.

A weight-only matmul at batch 1 takes microseconds on the GPU while its Python launch can take longer, so
timing eager calls measures the host. ``graph_ms`` captures the calls in one CUDA graph and replays it
(no launch gaps, no Python), each call on its own copy of the weight (``rotation`` copies: several times
the L2 cache, so no call reads its weight from L2), and reports the median over replays per call.
"""
from __future__ import annotations

import math
import statistics

import torch

from .dequant import dequantize
from .mxint8_ref import quantize_mxint8


def rotation(nbytes: int, l2_bytes: int, factor: int = 3, most: int = 64) -> int:
    """How many copies of an ``nbytes`` operand make a cycle ``factor`` times the L2 size (at least 2)."""
    return max(2, min(most, -(-factor * l2_bytes // max(nbytes, 1))))


def capture(fn):
    """``fn`` captured in a CUDA graph after one warm-up call on a side stream (as torch.cuda.graphs asks):
    (graph, the output tensor of the captured call, which each replay rewrites)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def graph_time(fns, reps: int | None = None, replays: int = 7, target_ms: float = 10.0) -> tuple[float, int]:
    """(median milliseconds per call, reps) of the ``fns`` (one per rotated input) captured ``reps`` times over in
    one CUDA graph. Without ``reps``: enough passes for ``target_ms`` of GPU time per replay, sized from one
    graphed pass, so a replay's fixed cost (launch, first kernel) is under a percent of it. Sizing from an eager
    pass counted the host's launch cost too: paths with more Python per call got shorter graphs, each call
    carrying more of that fixed cost (14 us a call at 28672x8192, one row, on an H100:
    benchmarks/mxint8/fused_linear_probe.json)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture stream, as torch.cuda.graphs asks
        for fn in fns:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    if reps is None:
        one = _graph(fns, 1)
        pass_ms = min(_replay_ms(one) for _ in range(3))
        del one
        reps = max(1, min(1000, math.ceil(target_ms / max(pass_ms, 1e-3))))
    graph = _graph(fns, reps)
    graph.replay()
    torch.cuda.synchronize()
    times = [_replay_ms(graph) / (reps * len(fns)) for _ in range(replays)]
    del graph
    return statistics.median(times), reps


def graph_ms(fns, reps: int | None = None, replays: int = 7) -> float:
    """Median milliseconds per call of the ``fns`` (one per rotated input), captured in one CUDA graph
    (``graph_time``)."""
    return graph_time(fns, reps, replays)[0]


def copy_ms(nbytes: int, copies: int, device) -> float:
    """``graph_ms`` of a device copy of ``nbytes`` into each of ``copies`` destinations: the bandwidth roofline
    the weight-streaming kernels are read against (its rate counts read + write)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dsts = [torch.empty_like(src) for _ in range(copies)]
    return graph_ms([lambda d=d: d.copy_(src) for d in dsts])


def _graph(fns, reps: int):
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            for fn in fns:
                fn()
    return graph


def _replay_ms(graph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


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
