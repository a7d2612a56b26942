"""Launch one fused MXINT8 linear configuration a few times on one shape: a target for Nsight Compute.

    ncu -k regex:_dq_kernel --launch-skip 2 --launch-count 1 --section SpeedOfLight \
        python benchmarks/mxint8/fused_linear_one.py --shape 14336x4096 --batch 16 --config '{"kind": "dq", ...}'

The first launches compile and warm up; profile a later one (``--launch-skip``). ``--config cublas``
launches F.linear on the dequantized bf16 weight instead (the comparison).
"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="14336x4096", help="N x K (nn.Linear's weight layout)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--group", type=int, default=32)
    p.add_argument("--config", default="picked", help="JSON launch config, 'picked' or 'cublas'")
    p.add_argument("--reps", type=int, default=4)
    p.add_argument("--time-batches", type=int, nargs="*", default=None,
                   help="instead: graph-time the config at these batches, interleaved over 3 rounds "
                        "(rotating weight copies, as the sweep)")
    args = p.parse_args(argv)
    if args.time_batches:
        return _time(args)

    import torch
    import torch.nn.functional as F

    from labkit.kernels import fused_triton
    from labkit.kernels.timing import weight_copies

    N, K = map(int, args.shape.lower().split("x"))
    gen = torch.Generator(device="cuda").manual_seed(0)
    (m, e, w), = weight_copies(N, K, args.group, 1, gen)
    x = torch.randn(args.batch, K, device="cuda", generator=gen).bfloat16()
    cfg = None if args.config in ("picked", "cublas") else json.loads(args.config)
    for _ in range(args.reps):
        if args.config == "cublas":
            F.linear(x, w)
        else:
            fused_triton.launch(x, m, e, None, args.group, cfg)
    torch.cuda.synchronize()
    print(f"{args.shape} batch {args.batch}: {args.config} x{args.reps}")
    return 0


def _time(args) -> int:
    import torch
    import torch.nn.functional as F

    from labkit.kernels import fused_triton
    from labkit.kernels.timing import weight_copies
    from labkit.perf.timing import graph_ms, rotation

    N, K = map(int, args.shape.lower().split("x"))
    gen = torch.Generator(device="cuda").manual_seed(0)
    copies = rotation(N * K, torch.cuda.get_device_properties(0).L2_cache_size)
    weights = weight_copies(N, K, args.group, copies, gen)
    cfg = None if args.config == "picked" else json.loads(args.config)
    xs = {M: torch.randn(M, K, device="cuda", generator=gen).bfloat16() for M in args.time_batches}
    for r in range(3):
        line = []
        for M, x in xs.items():
            us = 1e3 * graph_ms([lambda m=m, e=e: fused_triton.launch(x, m, e, None, args.group, cfg)
                                 for m, e, _ in weights])
            bf = 1e3 * graph_ms([lambda w=w: F.linear(x, w) for _, _, w in weights])
            line.append(f"M={M}: {us:.1f} us (bf16 {bf:.1f}, {bf / us:.2f}x)")
        print(f"round {r}: " + " | ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
