"""Sweep the fused MXINT8 linear's launch configurations on a CUDA GPU: the measured basis of
``fused_triton.pick_config``.

    python benchmarks/mxint8/fused_linear_sweep.py [--out benchmarks/mxint8/fused_linear_sweep.json] [--quick]

For every shape (N x K, nn.Linear's weight layout) and batch, every candidate configuration of the kernels named by
``--kinds`` (``gemv`` for up to 4 rows, ``dq`` with optional split-K, ``tma``; or the ``--configs`` list) is checked
against a float64 reference and timed, and so are cuBLAS bf16 (``F.linear`` on the dequantized weight) and
``pick_config``'s own choice (``fused_triton.picked``).
``--compile-workers N`` compiles every configuration first in N processes (minutes saved on a 16-core host).

Timing (``labkit.perf.timing.graph_ms``): the calls are captured in a CUDA graph and replayed, so the
times are the GPU's, without Python launch overhead; each call reads a different copy of the weight,
enough copies to exceed the L2 cache several times over, so no call finds its weight in L2 (as in a
model, whose layers each read their own weights once per token). Median of several replays.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SHAPES = ("4096x4096", "14336x4096", "28672x8192")
REL_TOL = 2.0 ** -7


def candidates(M: int, N: int, quick: bool, kinds: tuple) -> list[dict]:
    """Configurations to time for M rows and N features; the dq ones pruned to between 100 and 4096
    programs (fewer leave SMs idle, more only add split-K traffic)."""
    out = []
    if M <= 4 and "gemv" in kinds:
        bns, bks, ws = ((4, 8), (1024,), ((4, 3),)) if quick else ((4, 8), (512, 1024), ((2, 3), (4, 3)))
        out += [{"kind": "gemv", "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": s}
                for bn, bk, (w, s) in itertools.product(bns, bks, ws)]
    if "dq" in kinds:
        # the leaders of an earlier sweep (wider tiles and more splits did not win) plus narrow tiles; the PTX
        # decode (ASM, the launch default) won every case by 2-4% (the dq kernel's steps in MXINT8_NOTES.md)
        if quick:
            tiles, ws = [(16, 256, 1), (64, 256, 2)], ((4, 3),)
        elif M <= 16:
            tiles = [(16, 512, 1), (16, 1024, 1), (32, 256, 1), (32, 512, 1), (32, 512, 2), (32, 1024, 1),
                     (64, 256, 2), (64, 512, 2)]
            ws = ((2, 3), (4, 3), (4, 4))
        else:
            tiles = [(32, 128, 1), (32, 256, 1), (64, 64, 4), (64, 128, 2), (64, 128, 1), (128, 64, 4),
                     (128, 128, 1), (128, 128, 2), (128, 128, 4)]
            ws = ((4, 3), (4, 4))
        for (bn, bk, sk), (w, s) in itertools.product(tiles, ws):
            programs = -(-N // bn) * sk
            if quick or 100 <= programs <= 4096:
                out.append({"kind": "dq", "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk, "num_warps": w,
                            "num_stages": s})
    if "tma" in kinds:
        out += tma_candidates(M, N, quick)
    return out


def tma_candidates(M: int, N: int, quick: bool) -> list[dict]:
    """The tma kernel (``--kinds tma``): W as the MMA's row side (its decoded tile from registers, 64+ features)
    or x; 32-256 features, K tiles 64-512, split-K 1-8, 3-5 stages in flight; pruned to 64..2048 programs and
    200 KB of stages (screen these offline first: fused_linear_sass.py --offline)."""
    if quick:
        return [{"kind": "tma", "BLOCK_N": 64, "BLOCK_K": 128, "SPLIT_K": 2, "W_LEFT": True, "num_warps": 4,
                 "num_stages": 3}]
    out = []
    bks = (128, 256, 512) if M <= 16 else (64, 128, 256)
    for w_left, bn, bk, sk, stages in itertools.product((True, False), (32, 64, 128, 256), bks, (1, 2, 4, 8),
                                                        (3, 4, 5)):
        if w_left and bn < 64:  # one warpgroup's MMA has 64 rows
            continue
        programs = -(-N // bn) * sk
        stage_bytes = bn * bk + min(64, max(16, M)) * bk * 2
        if not 64 <= programs <= 2048 or stage_bytes * stages > 200 * 1024:
            continue
        for warps in ((4, 8) if bn >= 128 else (4,)):
            out.append({"kind": "tma", "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk, "W_LEFT": w_left,
                        "num_warps": warps, "num_stages": stages})
    return out


def _configs(args, M: int, N: int) -> list[dict]:
    """``--configs`` (one list for every case) or the built-in candidates."""
    if args.configs:
        return json.loads(args.configs)
    return candidates(M, N, args.quick, tuple(args.kinds.split(",")))


def _precompile(args) -> int:
    from labkit.kernels.precompile import precompile

    jobs, seen = [], set()
    for shape in args.shapes:
        N = int(shape.lower().split("x")[0])
        for M in args.batches:
            for cfg in _configs(args, M, N):
                key = (M, tuple(sorted(cfg.items())))  # Triton specializes M (== 1, % 16)
                if key not in seen:
                    seen.add(key)
                    jobs.append((M, cfg, args.group))
    return precompile(jobs, args.compile_workers, K=1024)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "mxint8" / "fused_linear_sweep.json"))
    p.add_argument("--shapes", nargs="+", default=list(SHAPES))
    p.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--group", type=int, default=32)
    p.add_argument("--quick", action="store_true", help="a few configs per case (a smoke run)")
    p.add_argument("--kinds", default="gemv,dq", help="kernels to sweep (comma-separated)")
    p.add_argument("--configs", default=None,
                   help="JSON list of launch configs to time instead of the built-in candidates (every case)")
    p.add_argument("--compile-workers", type=int, default=0,
                   help="compile every configuration first in this many processes (Triton's disk cache then "
                        "serves the timing process; 0: compile as timed)")
    args = p.parse_args(argv)
    if args.compile_workers:
        t0 = time.perf_counter()
        n = _precompile(args)
        print(f"compiled {n} kernels in {args.compile_workers} processes: {time.perf_counter() - t0:.0f} s", flush=True)

    import torch
    import torch.nn.functional as F

    from labkit import results
    from labkit.kernels import fused_triton
    from labkit.kernels.timing import rel_error, weight_copies
    from labkit.perf import timing
    from labkit.perf.timing import graph_ms, rotation

    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU")
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    g = args.group
    rows = []
    t_start = time.perf_counter()
    for shape in args.shapes:
        N, K = map(int, shape.lower().split("x"))
        packed = N * K + N * K // g
        copies = rotation(packed, props.L2_cache_size)
        weights = weight_copies(N, K, g, copies, gen)
        copy_ms = timing.copy_ms(packed, copies, dev)
        for M in args.batches:
            x = torch.randn(M, K, device=dev, generator=gen).to(torch.bfloat16)
            m0, e0, w0 = weights[0]
            bf16_ms = graph_ms([lambda w=w: F.linear(x, w) for _, _, w in weights])
            picked = fused_triton.picked(x, m0, g)
            case = {"N": N, "K": K, "batch": M, "group_size": g, "packed_bytes": packed, "copies": copies,
                    "copy_ms": copy_ms, "bf16_ms": bf16_ms, "picked": picked, "configs": []}
            for cfg in _configs(args, M, N) + [dict(picked, picked=True)]:
                c = {k: v for k, v in cfg.items() if k != "picked"}
                try:
                    y = fused_triton.launch(x, m0, e0, None, g, c)
                    err = rel_error(y, x, w0)
                    ms = graph_ms([lambda m=m, e=e: fused_triton.launch(x, m, e, None, g, c) for m, e, _ in weights])
                    r = {**cfg, "ms": ms, "rel_err": err, "ok": err <= REL_TOL, "bf16_over": bf16_ms / ms}
                except Exception as exc:  # a config the compiler rejects (shared memory, registers): recorded
                    r = {**cfg, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}
                case["configs"].append(r)
            good = sorted((r for r in case["configs"] if r.get("ok")), key=lambda r: r["ms"])
            case["best"] = good[0] if good else None
            pick = next(r for r in case["configs"] if r.get("picked"))
            rows.append(case)
            best = case["best"]
            print(f"{N}x{K} M={M:>2}: copies {copies} bf16 {1e3 * bf16_ms:7.1f} us | best "
                  f"{best['kind'] if best else '-'} {1e3 * best['ms'] if best else float('nan'):7.1f} us "
                  f"({bf16_ms / best['ms'] if best else 0:.2f}x) {({k: v for k, v in best.items() if k.isupper() or k.startswith('num')} if best else '')} | "
                  f"picked {1e3 * pick.get('ms', float('nan')):7.1f} us ({pick.get('bf16_over', 0):.2f}x) | "
                  f"copy-rate read {packed / copy_ms / 1e6 * 2:.0f} GB/s; fused reads at "
                  f"{packed / best['ms'] / 1e6 if best else 0:.0f} GB/s  [{time.perf_counter() - t_start:.0f} s]",
                  flush=True)
            del x
            _write(args, rows, props, partial=True)
        del weights
        torch.cuda.empty_cache()
    _write(args, rows, props, partial=False)
    return 0


def _write(args, rows, props, partial: bool) -> None:
    """The JSON so far (after every case, so a run cut off at its time limit keeps what it measured)."""
    import triton

    from labkit import results

    out = {"what": "fused MXINT8 linear launch configurations vs cuBLAS bf16, CUDA-graph replay, rotating weights",
           "rows": rows, "partial": partial, "rel_tol": REL_TOL, "sm_count": props.multi_processor_count,
           "l2_bytes": props.L2_cache_size, "triton": triton.__version__, "provenance": results.provenance(),
           "method": __doc__.split("Timing")[1].strip(), "args": vars(args)}
    results.write_json(args.out, out)
    if not partial:
        print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
