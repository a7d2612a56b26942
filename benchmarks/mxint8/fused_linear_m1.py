"""One-row (M = 1) fused MXINT8 linear on a CUDA GPU: candidate launches of the ``gemv_split`` kernel
(labkit/kernels/fused_gemv.py) against cuBLAS bf16, the current pick (``fused_triton.picked``) and gemlite's
A16W8, on the shapes of benchmarks/mxint8/fused_linear.py.

    python benchmarks/mxint8/fused_linear_m1.py --out benchmarks/mxint8/fused_linear_m1.json --compile-workers 12
        [--shapes 4096x4096 14336x4096 28672x8192] [--batches 1 [2 4]] [--configs JSON] [--no-gemlite]
    python benchmarks/mxint8/fused_linear_m1.py --dry-run   # CPU, Triton's interpreter, a tiny shape: code path only

Shapes are N x K (nn.Linear's weight layout); x is (batch, K) bf16. Every launch is checked against the float64
product first (relative Frobenius error <= 2^-7, as fused_linear.py) and timed as fused_linear.py times
(``labkit.perf.timing.graph_ms``: one CUDA graph over rotated weight copies exceeding the L2 cache, so no
call finds its weight in L2). gemlite (``A16W8_INT8``, built as fused_linear.py builds it) is timed after every
fused case, as there. Per shape and batch it prints the fastest correct candidate and the ratios gemlite/best and
bf16/best (> 1: the candidate is faster), and its packed-weight rate against a device copy's (read + write,
``labkit.perf.timing.copy_ms``, as fused_linear_sweep.py counts it). ``--compile-workers N`` compiles the
candidates first in N processes (Triton's disk cache then serves the timing process).
"""
from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SHAPES = ("4096x4096", "14336x4096", "28672x8192")
DRY_SHAPES = ("40x256",)
DRY_CONFIGS = 4  # the dry run launches the first few candidates (the interpreter takes seconds each)
_spec = importlib.util.spec_from_file_location("fused_linear_bench", Path(__file__).with_name("fused_linear.py"))
peer = importlib.util.module_from_spec(_spec)  # fused_linear.py: the gemlite peer, REL_TOL
_spec.loader.exec_module(peer)


def cfg(bn: int, bk: int, split: int = 1, warps: int = 4, ahead: bool = False, x_row: bool = False,
        e_asm: bool = False) -> dict:
    return {"kind": "gemv_split", "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split, "AHEAD": ahead,
            "X_PER_ROW": x_row, "E_ASM": e_asm, "num_warps": warps, "num_stages": 1}


def candidates() -> list[dict]:
    """The gemv_split launches timed on every shape (one list: one compilation each). Tiles giving each thread
    16-64 W bytes a tile, plus gemlite's own A16W8 choice (8 features, K tiles of 1024, 4 warps: 64 bytes a
    thread) and a one-feature variant (its 14336x4096 choice); split-K 2 and 4 for the wider feature blocks
    (4096 features at 16 a block are 256 programs); two tiles in flight (AHEAD); the loop without shared-memory
    layout conversions (X_PER_ROW, E_ASM). (num_stages is left at 1: Triton's pipeliner leaves these loads
    alone, offline sm_90 compiles of 2-3 stages gave the same code.)"""
    out = []
    for bn, bk, warps in itertools.product((1, 2, 4, 8, 16), (256, 512, 1024, 2048), (2, 4, 8)):
        if bn * bk // (32 * warps) in (16, 32, 64):
            out.append(cfg(bn, bk, warps=warps))
    out += [cfg(1, 1024, warps=4)]
    # one warp a program: the layout conversions inside the loop synchronise one warp, not four
    out += [cfg(bn, bk, split, warps=1) for bn, bk, split in
            ((1, 512, 1), (1, 1024, 1), (2, 512, 1), (2, 1024, 1), (4, 512, 1), (8, 256, 1), (4, 512, 2))]
    out += [cfg(bn, bk, split, warps) for (bn, bk, warps), split in
            itertools.product(((8, 512, 4), (16, 512, 4), (16, 1024, 8), (4, 1024, 4)), (2, 4))]
    out += [cfg(bn, bk, split, warps, ahead=True) for bn, bk, split, warps in
            ((8, 512, 1, 4), (4, 1024, 1, 4), (8, 1024, 1, 8), (2, 1024, 1, 2), (16, 256, 1, 4), (8, 512, 2, 4))]
    # no shared-memory layout conversion in the loop (offline sm_90 compiles: no barrier left in it): x loaded
    # per W row in W's layout, exponents by PTX loads in the sums' layout; and the exponents alone
    core = ((8, 1024, 4), (8, 512, 4), (4, 1024, 4), (4, 512, 2), (2, 1024, 2), (16, 512, 8), (8, 512, 2),
            (4, 1024, 2), (2, 512, 1), (16, 1024, 8))
    out += [cfg(bn, bk, 1, warps, x_row=True, e_asm=True) for bn, bk, warps in core]
    out += [cfg(bn, bk, 1, warps, e_asm=True) for bn, bk, warps in core[:4]]
    out += [cfg(bn, bk, split, warps, x_row=True, e_asm=True) for bn, bk, warps in core[:2] for split in (2, 4)]
    out += [cfg(bn, bk, 1, warps, ahead=True, x_row=True, e_asm=True) for bn, bk, warps in core[1:4]]
    return out


def _configs(args) -> list[dict]:
    cands = json.loads(args.configs) if args.configs else candidates()
    return cands[:DRY_CONFIGS] if args.dry_run else cands


def _precompile(args) -> int:
    from labkit.kernels.precompile import precompile

    jobs = [(M, c, args.group) for M in args.batches for c in _configs(args)]
    return precompile(jobs, args.compile_workers, K=8192)


def _measure(launch, graphed, check, timer, dry_run: bool) -> dict:
    """{ms, rel_err, ok} of one launch (``check``: its relative error), or {error} if it fails to compile/run."""
    from labkit.perf.timing import graph_ms

    try:
        err = check(launch())
        ms = timer(launch) if dry_run else graph_ms(graphed)
        return {"ms": ms, "rel_err": err, "ok": err <= peer.REL_TOL}
    except Exception as exc:  # a launch the compiler rejects (registers, shared memory): recorded, not fatal
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}


def time_case(N: int, K: int, M: int, sets: list, args, timer, gen, dev) -> dict:
    """bf16, the current pick and every candidate at (M, N, K) on the weight copies ``sets``."""
    import torch
    import torch.nn.functional as F

    from labkit.kernels import fused_triton
    from labkit.kernels.timing import rel_error

    g = args.group
    x = torch.randn(M, K, device=dev, generator=gen).to(torch.bfloat16)
    m0, e0, w0 = sets[0]

    def check(y):
        return rel_error(y, x, w0)

    row = {"N": N, "K": K, "batch": M, "group_size": g, "packed_bytes": N * K + N * K // g, "copies": len(sets),
           "x": x}
    row["bf16"] = _measure(lambda: F.linear(x, w0), [lambda w=w: F.linear(x, w) for _, _, w in sets], check, timer,
                           args.dry_run)
    row["picked"] = {"config": fused_triton.picked(x, m0, g), **_measure(
        lambda: fused_triton.launch(x, m0, e0, None, g),
        [lambda m=m, e=e: fused_triton.launch(x, m, e, None, g) for m, e, _ in sets], check, timer, args.dry_run)}
    row["configs"] = [{"config": c, **_measure(
        lambda c=c: fused_triton.launch(x, m0, e0, None, g, c),
        [lambda m=m, e=e, c=c: fused_triton.launch(x, m, e, None, g, c) for m, e, _ in sets], check, timer,
        args.dry_run)} for c in _configs(args)]
    good = sorted((r for r in row["configs"] if r.get("ok")), key=lambda r: r["ms"])
    row["best"] = good[0] if good else None
    return row


def time_gemlite(row: dict, sets: list, dev, timer, dry_run: bool) -> None:
    """gemlite's A16W8 layer on the same bf16 weights (one layer per copy), checked against its own int8 weight."""
    from labkit.kernels.timing import rel_error

    x = row["x"]
    layers = [peer.gemlite_layer(w, dev) for _, _, w in sets]
    q, scales = peer.channelwise_int8(sets[0][2])
    row["gemlite"] = _measure(lambda: layers[0](x), [lambda layer=layer: layer(x) for layer in layers],
                              lambda y: rel_error(y, x, q.float() * scales), timer, dry_run)


def summarize(row: dict) -> str:
    """One line: the best candidate and the ratios (> 1: the candidate is faster)."""
    best = row["best"]
    head = f"{row['N']}x{row['K']} M={row['batch']}:"
    if best is None:
        return f"{head} no candidate ran correctly"
    ms = best["ms"]
    for name in ("bf16", "picked", "gemlite"):
        if row.get(name, {}).get("ms"):
            row[f"{name}_over_best"] = row[name]["ms"] / ms
    knobs = {k: v for k, v in best["config"].items() if k != "kind"}
    rate = row["packed_bytes"] / ms / 1e6
    copy_rate = 2 * row["packed_bytes"] / row["copy_ms"] / 1e6 if row.get("copy_ms") else None  # read + write
    copy = f", {100 * rate / copy_rate:.0f}% of copy" if copy_rate else ""
    parts = [f"best {1e3 * ms:7.2f} us ({rate:6.0f} GB/s{copy}) {knobs}"]
    parts += [f"{name}/best {row[f'{name}_over_best']:.3f}" for name in ("gemlite", "bf16", "picked")
              if f"{name}_over_best" in row]
    return f"{head} " + "  ".join(parts)


def run(args) -> dict:
    import torch

    from labkit.kernels.timing import weight_copies
    from labkit.perf import timing
    from labkit.perf.timing import rotation

    dev = torch.device("cpu" if args.dry_run else "cuda")
    timer = timing.MedianTimer("cpu", reps=3, warmup=1)  # the dry run's; GPU times come from graph_ms
    l2 = 0 if args.dry_run else torch.cuda.get_device_properties(dev).L2_cache_size
    gen = torch.Generator(device=dev).manual_seed(0)
    gl = peer.gemlite_peer(dev, args.no_gemlite)
    if not gl["timed"]:
        print(f"gemlite A16W8 peer: not timed: {gl['reason']}", flush=True)
    rows, kept, t0 = [], [], time.perf_counter()
    for shape in args.shapes:
        N, K = peer.parse_shape(shape)
        packed = N * K + N * K // args.group
        sets = weight_copies(N, K, args.group, 1 if args.dry_run else rotation(packed, l2), gen)
        copy_ms = None if args.dry_run else timing.copy_ms(packed, len(sets), dev)
        for M in args.batches:
            row = time_case(N, K, M, sets, args, timer, gen, dev)
            row["copy_ms"] = copy_ms
            rows.append(row)
            print(f"{summarize(row)}  [{time.perf_counter() - t0:.0f} s]", flush=True)
        kept.append(sets)
        _write(args, rows, gl, partial=True)
    if gl["timed"]:  # after every fused case (see fused_linear.py: the peer's first calls are full-load work)
        for row in rows:
            time_gemlite(row, kept[args.shapes.index(f"{row['N']}x{row['K']}")], dev, timer, args.dry_run)
            print(f"{summarize(row)}  [{time.perf_counter() - t0:.0f} s]", flush=True)
    return _write(args, rows, gl, partial=False)


def _write(args, rows: list, gl: dict, partial: bool) -> dict:
    """The JSON so far (after every shape, so a run cut off at its time limit keeps what it measured)."""
    import torch

    from labkit import results

    versions = results.versions()
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        versions["triton"] = None
    out = {"what": "one-row fused MXINT8 linear: gemv_split candidates vs cuBLAS bf16, the current pick, gemlite A16W8",
           "rows": [{k: v for k, v in r.items() if k != "x"} for r in rows], "partial": partial,
           "dry_run": args.dry_run, "rel_tol": peer.REL_TOL, "gemlite": gl,
           "method": ("CPU perf_counter median, Triton interpreter: NOT a measurement" if args.dry_run else
                      "ms: CUDA-graph replay over rotated weight copies exceeding L2 (labkit.perf.timing.graph_ms)"),
           "shape_convention": "N x K = out_features x in_features (nn.Linear weight layout); x is (batch, K) bf16",
           "versions": versions, "provenance": results.provenance(), "command": " ".join(sys.argv), "args": vars(args)}
    if not args.dry_run:
        props = torch.cuda.get_device_properties(0)
        out.update(device=props.name, sm_count=props.multi_processor_count, l2_bytes=props.L2_cache_size)
    results.write_json(args.out, out)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="JSON path (default benchmarks/mxint8/fused_linear_m1.json; --dry-run: a temp file)")
    p.add_argument("--shapes", nargs="+", default=None, help="N x K, e.g. 4096x4096")
    p.add_argument("--batches", type=int, nargs="+", default=[1], help="rows of x (the kernel is for 1)")
    p.add_argument("--group", type=int, default=32)
    p.add_argument("--configs", default=None, help="JSON list of gemv_split launches instead of the candidates")
    p.add_argument("--compile-workers", type=int, default=0,
                   help="compile every candidate first in this many processes (0: compile as timed)")
    p.add_argument("--no-gemlite", action="store_true", help="time without the gemlite peer")
    p.add_argument("--dry-run", action="store_true",
                   help="CPU, a tiny shape, the first candidates in Triton's interpreter: exercises the code only")
    args = p.parse_args(argv)
    if args.dry_run:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton
        args.compile_workers = 0
    args.shapes = args.shapes or list(DRY_SHAPES if args.dry_run else SHAPES)
    args.out = args.out or str(Path(tempfile.gettempdir()) / "labkit_fused_linear_m1_dry_run.json" if args.dry_run
                               else ROOT / "benchmarks" / "mxint8" / "fused_linear_m1.json")
    for s in args.shapes:
        if peer.parse_shape(s)[1] % args.group:
            p.error(f"--group {args.group} does not divide K of --shapes {s}")
    if args.compile_workers:
        t0 = time.perf_counter()
        n = _precompile(args)
        print(f"compiled {n} launches in {args.compile_workers} processes: {time.perf_counter() - t0:.0f} s",
              flush=True)

    import torch

    if not args.dry_run and not torch.cuda.is_available():
        p.error("needs a CUDA GPU (use --dry-run to check the code path on CPU)")
    out = run(args)
    bad = [(r["N"], r["K"], r["batch"], name) for r in out["rows"] for name in ("bf16", "picked", "gemlite")
           if name in r and r[name].get("ok") is False]
    errors = sum("error" in c for r in out["rows"] for c in r["configs"])
    print(f"\nwrote {args.out}" + ("  (dry run: interpreter times, not measurements)" if args.dry_run else ""))
    print(f"candidates failing to compile or run: {errors}; reference paths outside rel. error {peer.REL_TOL:.4g}: "
          f"{bad or 'none'}")
    return 1 if bad or any(r["best"] is None for r in out["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
