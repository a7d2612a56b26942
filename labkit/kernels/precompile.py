"""Warm Triton's disk cache for the fused MXINT8 benchmarks: every (rows, launch config) compiled once in a
pool of processes, so the timing process then only loads kernels (minutes saved on a 16-core GPU host)."""
from __future__ import annotations


def _compile_some(args: tuple[list, int]) -> int:
    """Launch each (M, config, group) once on a small weight of the timed specialization (N, K multiples of 16,
    K a multiple of every BLOCK_K, M as timed). Runs in a pool process; returns how many compiled."""
    import torch

    from . import fused_triton

    jobs, K = args
    gen = torch.Generator().manual_seed(0)
    N, g = 256, jobs[0][2] if jobs else 32
    m = torch.randint(-127, 128, (N, K), dtype=torch.int8, generator=gen).cuda()
    e = torch.randint(120, 130, (N, K // g), dtype=torch.uint8, generator=gen).cuda()
    done = 0
    for M, config, _ in jobs:
        try:
            fused_triton.launch(torch.randn(M, K, device="cuda").bfloat16(), m, e, None, g, config)
            done += 1
        except Exception:  # recorded when the timing process meets it
            pass
    torch.cuda.synchronize()
    return done


def precompile(jobs: list, workers: int, K: int) -> int:
    """Compile ``jobs`` ((M, config, group) triples) in ``workers`` spawned processes on a K-wide weight."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(workers) as pool:
        return sum(pool.map(_compile_some, [(jobs[i::workers], K) for i in range(workers)]))
