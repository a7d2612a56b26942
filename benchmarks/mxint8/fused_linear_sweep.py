"""The fused MXINT8 linear's launch configurations: the measured basis of ``fused_triton.pick_config``,
``fused_gemv.ONE_ROW`` and ``fused_triton.PDL_DEFAULT``.

    python benchmarks/mxint8/fused_linear_sweep.py [--kinds gemv,dq] [--batches 1 4 16 64] [--quick]
        [--shapes 4096x4096 ...] [--configs JSON] [--compile-workers N] [--out FILE]
    python benchmarks/mxint8/fused_linear_sweep.py --kinds gemv_split --batches 1 [--out FILE]   # the one-row kernel
    python benchmarks/mxint8/fused_linear_sweep.py --pdl [--prefetch 1024] [--triggers start end] [--rounds 2]
    python benchmarks/mxint8/fused_linear_sweep.py --offline --configs JSON --batches 64 --out FILE   # no GPU
    python benchmarks/mxint8/fused_linear_sweep.py --dry-run   # CPU, Triton's interpreter, a tiny shape

Shapes are N x K (nn.Linear's weight layout); x is (batch, K) bf16. Four modes:

- the sweep (default): for every shape and batch, every candidate configuration of the kernels named by
  ``--kinds`` (``gemv`` for up to 4 rows, ``dq`` with optional split-K, ``tma``, ``gemv_split`` the one-row
  split-K kernel of fused_gemv.py; or the ``--configs`` list) is checked against a float64 reference and timed,
  and so are cuBLAS bf16 (``F.linear`` on the dequantized weight) and ``pick_config``'s own choice
  (``fused_triton.picked``). Each case prints the best launch, bf16/best and picked's time.
- ``--pdl``: programmatic dependent launch (sm_90+). ``pick_config``'s launch with PDL off and on at each
  ``--triggers`` point (``start``: the next kernel may launch once every program passed its wait; ``end``: once
  every program finished its main loop), without prefetch and with each ``--prefetch`` size (bytes of each W row
  fetched to L2 before the wait), in ``--rounds`` interleaved rounds with bf16. Two call sequences: independent
  calls on the same x, and (square shapes) a chain, each call's x the previous call's output, so a PDL launch
  really waits for its predecessor; every variant's bits must equal PDL off's, eager and replayed.
- ``--offline`` (no GPU): each ``--configs`` launch compiled by Triton for sm_90 (N, K, strides divisible by 16,
  as Triton specializes them at 4096x4096); the ptxas/cuobjdump bundled with Triton's wheel report registers,
  spills, shared memory and the SASS opcode histogram, so configurations are screened before a device run.
- ``--dry-run``: the sweep's code path on the CPU, the first candidates in Triton's interpreter: times nothing.

Timing (``labkit.perf.timing.graph_ms``): the calls are captured in a CUDA graph and replayed, so the times are
the GPU's, without Python launch overhead; each call reads a different copy of the weight, enough copies to
exceed the L2 cache several times over, so no call finds its weight in L2 (as in a model, whose layers each read
their own weights once per token). Median of several replays. ``--compile-workers N`` compiles every
configuration first in N processes (Triton's disk cache then serves the timing process).
"""
from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DRY_SHAPES = ("40x256",)
DRY_CONFIGS = 4  # the dry run launches the first few candidates (the interpreter takes seconds each)
DEFAULT_OUT = {"sweep": HERE / "fused_linear_sweep.json", "pdl": HERE / "fused_linear_pdl.json"}


# ---- candidates -------------------------------------------------------------------------------------------

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
    if "gemv_split" in kinds:
        out += one_row_candidates()
    return out


def tma_candidates(M: int, N: int, quick: bool) -> list[dict]:
    """The tma kernel: W as the MMA's row side (its decoded tile from registers, 64+ features) or x; 32-256
    features, K tiles 64-512, split-K 1-8, 3-5 stages in flight; pruned to 64..2048 programs and 200 KB of
    stages (screen these with ``--offline`` first)."""
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


def one_row(bn: int, bk: int, split: int = 1, warps: int = 4, ahead: bool = False, x_row: bool = False,
            e_asm: bool = False) -> dict:
    """A ``gemv_split`` launch (fused_gemv.py)."""
    return {"kind": "gemv_split", "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split, "AHEAD": ahead,
            "X_PER_ROW": x_row, "E_ASM": e_asm, "num_warps": warps, "num_stages": 1}


def one_row_candidates() -> list[dict]:
    """The gemv_split launches (one list: one compilation each). Tiles giving each thread 16-64 W bytes a tile,
    plus gemlite's own A16W8 choice (8 features, K tiles of 1024, 4 warps: 64 bytes a thread) and a one-feature
    variant; split-K 2 and 4 for the wider feature blocks (4096 features at 16 a block are 256 programs); two
    tiles in flight (AHEAD); the loop without shared-memory layout conversions (X_PER_ROW, E_ASM). (num_stages
    is left at 1: Triton's pipeliner leaves these loads alone, offline sm_90 compiles of 2-3 stages gave the
    same code.)"""
    out = []
    for bn, bk, warps in itertools.product((1, 2, 4, 8, 16), (256, 512, 1024, 2048), (2, 4, 8)):
        if bn * bk // (32 * warps) in (16, 32, 64):
            out.append(one_row(bn, bk, warps=warps))
    out += [one_row(1, 1024, warps=4)]
    # one warp a program: the layout conversions inside the loop synchronise one warp, not four
    out += [one_row(bn, bk, split, warps=1) for bn, bk, split in
            ((1, 512, 1), (1, 1024, 1), (2, 512, 1), (2, 1024, 1), (4, 512, 1), (8, 256, 1), (4, 512, 2))]
    out += [one_row(bn, bk, split, warps) for (bn, bk, warps), split in
            itertools.product(((8, 512, 4), (16, 512, 4), (16, 1024, 8), (4, 1024, 4)), (2, 4))]
    out += [one_row(bn, bk, split, warps, ahead=True) for bn, bk, split, warps in
            ((8, 512, 1, 4), (4, 1024, 1, 4), (8, 1024, 1, 8), (2, 1024, 1, 2), (16, 256, 1, 4), (8, 512, 2, 4))]
    # no shared-memory layout conversion in the loop (offline sm_90 compiles: no barrier left in it): x loaded
    # per W row in W's layout, exponents by PTX loads in the sums' layout; and the exponents alone
    core = ((8, 1024, 4), (8, 512, 4), (4, 1024, 4), (4, 512, 2), (2, 1024, 2), (16, 512, 8), (8, 512, 2),
            (4, 1024, 2), (2, 512, 1), (16, 1024, 8))
    out += [one_row(bn, bk, 1, warps, x_row=True, e_asm=True) for bn, bk, warps in core]
    out += [one_row(bn, bk, 1, warps, e_asm=True) for bn, bk, warps in core[:4]]
    out += [one_row(bn, bk, split, warps, x_row=True, e_asm=True) for bn, bk, warps in core[:2] for split in (2, 4)]
    out += [one_row(bn, bk, 1, warps, ahead=True, x_row=True, e_asm=True) for bn, bk, warps in core[1:4]]
    return out


def _configs(args, M: int, N: int) -> list[dict]:
    """``--configs`` (one list for every case) or the built-in candidates; the dry run's first few."""
    cands = json.loads(args.configs) if args.configs else candidates(M, N, args.quick, tuple(args.kinds.split(",")))
    return cands[:DRY_CONFIGS] if args.dry_run else cands


def _precompile(args) -> int:
    from labkit.kernels.precompile import precompile
    from labkit.kernels.timing import parse_shape

    jobs, seen = [], set()
    for shape in args.shapes:
        N = parse_shape(shape)[0]
        for M in args.batches:
            for cfg in _configs(args, M, N):
                key = (M, tuple(sorted(cfg.items())))  # Triton specializes M (== 1, % 16)
                if key not in seen:
                    seen.add(key)
                    jobs.append((M, cfg, args.group))
    # K a multiple of every BLOCK_K
    return precompile(jobs, args.compile_workers, K=max([1024] + [int(c.get("BLOCK_K", 0)) for _, c, _ in jobs]))


# ---- the sweep --------------------------------------------------------------------------------------------

def sweep(args, dev) -> list[dict]:
    import torch
    import torch.nn.functional as F

    from labkit.kernels import fused_triton
    from labkit.kernels.timing import REL_TOL, parse_shape, rel_error, weight_copies
    from labkit.perf import timing
    from labkit.perf.timing import MedianTimer, graph_ms, rotation

    dry = args.dry_run
    timer = MedianTimer("cpu", reps=3, warmup=1)  # the dry run's clock; GPU times come from graph_ms
    l2 = 0 if dry else torch.cuda.get_device_properties(dev).L2_cache_size
    gen = torch.Generator(device=dev).manual_seed(0)
    g = args.group
    rows, t_start = [], time.perf_counter()

    def clock(fns):
        return timer(fns[0]) if dry else graph_ms(fns)

    for shape in args.shapes:
        N, K = parse_shape(shape)
        packed = N * K + N * K // g
        copies = 1 if dry else rotation(packed, l2)
        weights = weight_copies(N, K, g, copies, gen)
        copy_ms = None if dry else timing.copy_ms(packed, copies, dev)
        for M in args.batches:
            x = torch.randn(M, K, device=dev, generator=gen).to(torch.bfloat16)
            m0, e0, w0 = weights[0]
            bf16_ms = clock([lambda w=w: F.linear(x, w) for _, _, w in weights])
            picked = fused_triton.picked(x, m0, g)
            case = {"N": N, "K": K, "batch": M, "group_size": g, "packed_bytes": packed, "copies": copies,
                    "copy_ms": copy_ms, "bf16_ms": bf16_ms, "bf16_ok": rel_error(F.linear(x, w0), x, w0) <= REL_TOL,
                    "picked": picked, "configs": []}
            for cfg in _configs(args, M, N) + [dict(picked, picked=True)]:
                c = {k: v for k, v in cfg.items() if k != "picked"}
                try:
                    err = rel_error(fused_triton.launch(x, m0, e0, None, g, c), x, w0)
                    ms = clock([lambda m=m, e=e: fused_triton.launch(x, m, e, None, g, c) for m, e, _ in weights])
                    r = {**cfg, "ms": ms, "rel_err": err, "ok": err <= REL_TOL, "bf16_over": bf16_ms / ms}
                except Exception as exc:  # a config the compiler rejects (shared memory, registers): recorded
                    r = {**cfg, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"}
                case["configs"].append(r)
            good = sorted((r for r in case["configs"] if r.get("ok")), key=lambda r: r["ms"])
            case["best"] = good[0] if good else None
            rows.append(case)
            print(summarize(case) + f"  [{time.perf_counter() - t_start:.0f} s]", flush=True)
            _write(args, "sweep", {"rows": rows}, partial=True)
        del weights
        if not dry:
            torch.cuda.empty_cache()
    return rows


def summarize(case: dict) -> str:
    """One line: the best launch, bf16/best (> 1: the fused kernel is faster), the pick, the weight's read rate."""
    best, packed = case["best"], case["packed_bytes"]
    pick = next(r for r in case["configs"] if r.get("picked"))
    head = f"{case['N']}x{case['K']} M={case['batch']:>2}: copies {case['copies']} bf16 {1e3 * case['bf16_ms']:7.1f} us"
    if best is None:
        return f"{head} | no candidate ran correctly"
    knobs = {k: v for k, v in best.items() if k.isupper() or k.startswith("num")}
    line = (f"{head} | best {best['kind']} {1e3 * best['ms']:7.1f} us ({case['bf16_ms'] / best['ms']:.2f}x) {knobs} | "
            f"picked {1e3 * pick.get('ms', float('nan')):7.1f} us ({pick.get('bf16_over', 0):.2f}x) | "
            f"fused reads at {packed / best['ms'] / 1e6:.0f} GB/s")
    if case["copy_ms"]:
        line += f", copy-rate read {packed / case['copy_ms'] / 1e6 * 2:.0f} GB/s"
    return line


# ---- programmatic dependent launch ------------------------------------------------------------------------

def pdl_variants(prefetch: list[int], triggers: list[str]) -> dict:
    """off, and PDL with each trigger point (``TRIGGER``) and prefetch size (0 = none)."""
    out = {"off": {"PDL": False}}
    out.update({f"{t}_pf{p}": {"PDL": True, "TRIGGER": t, "PREFETCH": p} for t in triggers for p in [0, *prefetch]})
    return out


def _chain(f, x, weights):
    h = x
    for w in weights:
        h = f(h, w)
    return h


def _replayed(fn):
    """fn's result computed by a CUDA-graph replay, its output poisoned first (the replay must write every element)."""
    import torch

    from labkit.perf.timing import capture

    graph, out = capture(fn)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    return out.clone()


def pdl(args, dev) -> list[dict]:
    import torch
    import torch.nn.functional as F

    from labkit.kernels import fused_triton
    from labkit.kernels.timing import parse_shape, rel_error, weight_copies
    from labkit.perf.timing import graph_ms, rotation

    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    gen = torch.Generator(device=dev).manual_seed(0)
    vs = pdl_variants(args.prefetch, args.triggers)
    g, rows = args.group, []
    for shape in args.shapes:
        N, K = parse_shape(shape)
        sets = weight_copies(N, K, g, rotation(N * K + N * K // g, l2), gen)
        for M in args.batches:
            x = torch.randn(M, K, device=dev, generator=gen).to(torch.bfloat16)
            base = {k: v for k, v in fused_triton.picked(x, sets[0][0], g).items()
                    if k not in ("PDL", "PREFETCH", "TRIGGER")}
            cfgs = {name: {**base, **v} for name, v in vs.items()}
            row = {"N": N, "K": K, "batch": M, "group_size": g, "copies": len(sets), "config": base, "rounds": {}}
            ref = fused_triton.launch(x, sets[0][0], sets[0][1], None, g, cfgs["off"])
            for name, c in cfgs.items():
                y = fused_triton.launch(x, sets[0][0], sets[0][1], None, g, c)
                row[f"{name}_rel_err"] = rel_error(y, x, sets[0][2])
                row[f"{name}_same_bits_as_off"] = bool(torch.equal(y, ref))

            def fused(c):
                return lambda h, w: fused_triton.launch(h, w[0], w[1], None, g, c)

            makers = {name: fused(c) for name, c in cfgs.items()}
            makers["bf16"] = lambda h, w: F.linear(h, w[2])
            square = N == K
            if square:  # dependent chains: PDL on must give PDL off's bits, eager and replayed
                plain = _chain(makers["off"], x, sets)
                for name in cfgs:
                    eager = _chain(makers[name], x, sets)
                    replay = _replayed(lambda f=makers[name]: _chain(f, x, sets))
                    row[f"{name}_chain_same_bits"] = bool(torch.equal(eager, plain) and torch.equal(replay, plain))
            for _ in range(args.rounds):
                for name, f in makers.items():
                    row["rounds"].setdefault(f"{name}_us", []).append(
                        1e3 * graph_ms([lambda w=w, f=f: f(x, w) for w in sets]))
                    if square:
                        row["rounds"].setdefault(f"{name}_chain_us", []).append(
                            1e3 * graph_ms([lambda f=f: _chain(f, x, sets)]) / len(sets))
            for key, vals in row["rounds"].items():
                row[key] = statistics.median(vals)
            for name in cfgs:
                row[f"bf16_over_{name}"] = row["bf16_us"] / row[f"{name}_us"]
                if square:
                    row[f"bf16_over_{name}_chain"] = row["bf16_chain_us"] / row[f"{name}_chain_us"]
            rows.append(row)
            cells = "  ".join(f"{n} {row[f'{n}_us']:6.1f}" for n in cfgs)
            print(f"{N}x{K} M={M:>2}: bf16 {row['bf16_us']:6.1f} | {cells} us | bf16/off "
                  f"{row['bf16_over_off']:.2f}x best-pdl {max(row[f'bf16_over_{n}'] for n in cfgs if n != 'off'):.2f}x"
                  + (f" | chain bf16 {row['bf16_chain_us']:.1f} off {row['off_chain_us']:.1f} "
                     + " ".join(f"{n} {row[f'{n}_chain_us']:.1f}" for n in cfgs if n != "off") if square else ""),
                  flush=True)
    return rows


# ---- offline compiles (no GPU) ----------------------------------------------------------------------------

def _tool(name: str) -> str:
    """Triton's bundled CUDA tool (the offline path), else the one on PATH."""
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    return str(bundled) if bundled.exists() else name


def opcodes(cubin: bytes) -> tuple[collections.Counter, str]:
    """The SASS opcode histogram of a cubin, and its SASS."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([_tool("cuobjdump"), "-sass", f.name], capture_output=True, text=True,
                              check=True).stdout
    ops = collections.Counter()
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            ops[m.group(1).split(".")[0]] += 1
    return ops, sass


def offline_compile(cfg: dict, M: int, group: int = 32, capability: int = 90):
    """``cfg`` (kind dq, tma or gemv_split, bf16 x) compiled for sm_``capability`` without a GPU: (kernel,
    registers, local memory bytes a thread, i.e. spills)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from labkit.kernels import fused_triton

    kind, bm = cfg["kind"], int(cfg.get("BLOCK_M", fused_triton.block_m(M, "dq")))
    bn, bk, split = cfg["BLOCK_N"], cfg["BLOCK_K"], int(cfg.get("SPLIT_K", 1))
    tail = {"e_ptr": "*u8", "b_ptr": "*bf16", "y_ptr": "*bf16", "ws_ptr": "*fp32", "count_ptr": "*i32",
            "M": "i32", "N": "i32", "K": "i32"}
    common = {"GROUP": group, "HAS_BIAS": False, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split,
              "ASM": bool(cfg.get("ASM", True)), "PDL": bool(cfg.get("PDL", False)),
              "PREFETCH": int(cfg.get("PREFETCH", 0)), "EARLY": cfg.get("TRIGGER", "end") == "start"}
    if kind == "tma":
        sig = {"x_desc": f"tensordesc<bf16[{bm}, {bk}]>", "m_desc": f"tensordesc<i8[{bn}, {bk}]>", "m_ptr": "*i8",
               **tail, "stride_mn": "i32", "stride_en": "i32", "stride_eg": "constexpr"}
        const = {**common, "stride_eg": 1, "W_LEFT": bool(cfg.get("W_LEFT", True)), "DOT_F32": False,
                 "E_AHEAD": bool(cfg.get("E_AHEAD", True)), "BF16_SCALE": bool(cfg.get("BF16_SCALE", True))}
    elif kind == "dq":
        sig = {"x_ptr": "*bf16", "m_ptr": "*i8", **tail, "stride_xm": "i32", "stride_xk": "constexpr",
               "stride_mn": "i32", "stride_mk": "constexpr", "stride_en": "i32", "stride_eg": "constexpr"}
        const = {**common, "stride_xk": 1, "stride_mk": 1, "stride_eg": 1, "W_BF16": True, "DOT_F32": False,
                 "INPUT_PRECISION": "tf32", "EVEN_K": True, "X_ROWS": min(bm, max(2, triton.next_power_of_2(M))),
                 "E_AHEAD": bool(cfg.get("E_AHEAD", False)), "BF16_SCALE": bool(cfg.get("BF16_SCALE", False))}
    elif kind == "gemv_split":  # one row: M is the constexpr 1 Triton specializes it to
        sig = {"x_ptr": "*bf16", "m_ptr": "*i8", **tail, "M": "constexpr", "stride_xm": "i32",
               "stride_xk": "constexpr", "stride_mn": "i32", "stride_mk": "constexpr", "stride_en": "i32",
               "stride_eg": "constexpr"}
        const = {**{k: v for k, v in common.items() if k != "BLOCK_M"}, "M": 1, "stride_xk": 1, "stride_mk": 1,
                 "stride_eg": 1, "EVEN_K": True, "AHEAD": bool(cfg.get("AHEAD", False)),
                 "X_PER_ROW": bool(cfg.get("X_PER_ROW", False)), "E_ASM": bool(cfg.get("E_ASM", False))}
    else:
        raise ValueError(f"--offline config kind={kind!r}: allowed values are 'dq', 'tma', 'gemv_split'")
    names = list(sig)
    divisible = [n for n in names if sig[n] != "constexpr" and not sig[n].startswith("tensordesc")
                 and (n != "M" or M % 16 == 0)]
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    src = ASTSource(fused_triton.kernels()[kind], sig, const, attrs=attrs)
    kern = triton.compile(src, target=GPUTarget("cuda", capability, 32),
                          options={"num_warps": cfg.get("num_warps", 4), "num_stages": cfg.get("num_stages", 3)})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:  # the cubin Triton's own ptxas made
        f.write(kern.asm["cubin"])
        f.flush()
        usage = subprocess.run([_tool("cuobjdump"), "-res-usage", f.name], capture_output=True, text=True,
                               check=True).stdout
    regs, local = re.search(r"REG:(\d+).*?LOCAL:(\d+)", usage).groups()
    return kern, int(regs), int(local)


def offline(args) -> list[dict]:
    rows = []
    for M in args.batches:
        for cfg in json.loads(args.configs):
            kern, regs, spills = offline_compile(cfg, M, args.group)
            ops, _ = opcodes(kern.asm["cubin"])
            rows.append({"config": cfg, "batch": M, "registers": regs, "local_bytes": spills,
                         "shared_bytes": kern.metadata.shared, "total": sum(ops.values()),
                         "opcodes": dict(ops.most_common())})
            print(f"M={M} {cfg} regs {regs} local {spills} smem {kern.metadata.shared} total {sum(ops.values())} "
                  f"{dict(ops.most_common(10))}", flush=True)
    return rows


# ---- the JSON ---------------------------------------------------------------------------------------------

def _write(args, mode: str, payload: dict, partial: bool = False) -> dict:
    """The JSON so far (the sweep writes after every case, so a run cut off at its time limit keeps what it
    measured)."""
    import torch

    from labkit import results
    from labkit.kernels.timing import REL_TOL

    versions = results.versions()
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        versions["triton"] = None
    what = {"sweep": "fused MXINT8 linear launch configurations vs cuBLAS bf16 and the pick",
            "pdl": "programmatic dependent launch for the fused MXINT8 linear's picked launches",
            "offline": "registers, spills, shared memory and SASS opcodes of launch configurations, sm_90, no GPU"}
    out = {"what": what[mode], **payload, "partial": partial, "dry_run": args.dry_run, "rel_tol": REL_TOL,
           "method": ("CPU perf_counter median, Triton interpreter: NOT a measurement" if args.dry_run else
                      "ms: CUDA-graph replay over rotated weight copies exceeding L2 (labkit.perf.timing.graph_ms)"
                      if mode != "offline" else "compiled by Triton for sm_90, cuobjdump -res-usage / -sass"),
           "shape_convention": "N x K = out_features x in_features (nn.Linear weight layout); x is (batch, K) bf16",
           "versions": versions, "provenance": results.provenance(), "command": " ".join(sys.argv),
           "args": vars(args)}
    if mode != "offline" and not args.dry_run:
        props = torch.cuda.get_device_properties(0)
        out.update(device=props.name, sm_count=props.multi_processor_count, l2_bytes=props.L2_cache_size)
    results.write_json(args.out, out)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="JSON path (default: fused_linear_sweep.json, with --pdl fused_linear_pdl.json, "
                                 "beside this script; --offline and --dry-run: a temp file)")
    p.add_argument("--shapes", nargs="+", default=None, help="N x K, e.g. 4096x4096")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64], help="rows of x")
    p.add_argument("--group", type=int, default=32)
    p.add_argument("--kinds", default="gemv,dq", help="kernels to sweep (comma-separated: gemv, dq, tma, gemv_split)")
    p.add_argument("--quick", action="store_true", help="a few configs per case (a smoke run)")
    p.add_argument("--configs", default=None,
                   help="JSON list of launch configs to time instead of the built-in candidates (every case)")
    p.add_argument("--compile-workers", type=int, default=0,
                   help="compile every configuration first in this many processes (Triton's disk cache then "
                        "serves the timing process; 0: compile as timed)")
    p.add_argument("--pdl", action="store_true", help="time the picked launches with PDL off and on (sm_90+)")
    p.add_argument("--prefetch", type=int, nargs="*", default=[1024],
                   help="--pdl: bytes of each W row to prefetch to L2 before the wait (powers of two >= 128)")
    p.add_argument("--triggers", nargs="+", default=["start", "end"], choices=["start", "end"],
                   help="--pdl: where a program lets the next kernel launch: after its wait, or after its main loop")
    p.add_argument("--rounds", type=int, default=2, help="--pdl: interleaved rounds (each time the median)")
    p.add_argument("--offline", action="store_true",
                   help="compile --configs for sm_90 without a GPU: registers, spills, shared memory, SASS opcodes")
    p.add_argument("--dry-run", action="store_true",
                   help="CPU, a tiny shape, the first candidates in Triton's interpreter: exercises the code only")
    args = p.parse_args(argv)
    mode = "offline" if args.offline else "pdl" if args.pdl else "sweep"
    if args.dry_run and mode != "sweep":
        p.error("--dry-run runs the sweep's code path only (not with --pdl or --offline)")
    if args.offline and not args.configs:
        p.error("--offline compiles the --configs list: give one")
    bad_kinds = set(args.kinds.split(",")) - {"gemv", "dq", "tma", "gemv_split"}
    if bad_kinds:
        p.error(f"--kinds {args.kinds}: unknown {sorted(bad_kinds)}; allowed: gemv, dq, tma, gemv_split")
    if args.dry_run:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton
        args.compile_workers = 0

    from labkit.kernels.timing import SHAPES, parse_shape

    args.shapes = args.shapes or list(DRY_SHAPES if args.dry_run else SHAPES)
    for s in args.shapes:
        if parse_shape(s)[1] % args.group:
            p.error(f"--group {args.group} does not divide K of --shapes {s}")
    temp = Path(tempfile.gettempdir()) / f"labkit_fused_linear_{'dry_run' if args.dry_run else mode}.json"
    args.out = str(args.out or (temp if args.dry_run or mode == "offline" else DEFAULT_OUT[mode]))
    if mode == "offline":
        rows = offline(args)
        _write(args, mode, {"rows": rows})
        print(f"wrote {args.out}")
        return 0

    import torch

    if not args.dry_run and not torch.cuda.is_available():
        p.error("needs a CUDA GPU (use --offline to compile without one, --dry-run to check the code path on CPU)")
    if mode == "pdl" and torch.cuda.get_device_capability()[0] < 9:
        p.error(f"--pdl needs sm_90 or newer (programmatic dependent launch); this GPU is "
                f"sm_{''.join(map(str, torch.cuda.get_device_capability()))}")
    if args.compile_workers:
        t0 = time.perf_counter()
        n = _precompile(args)
        print(f"compiled {n} launches in {args.compile_workers} processes: {time.perf_counter() - t0:.0f} s",
              flush=True)
    dev = torch.device("cpu" if args.dry_run else "cuda")
    from labkit.kernels.timing import REL_TOL

    if mode == "pdl":
        rows = pdl(args, dev)
        _write(args, mode, {"rows": rows, "variants": pdl_variants(args.prefetch, args.triggers)})
        bad = [(r["N"], r["K"], r["batch"], k) for r in rows for k, v in r.items()
               if (k.endswith("_rel_err") and not v <= REL_TOL)
               or (k.endswith(("same_bits", "_as_off")) and v is False)]
    else:
        rows = sweep(args, dev)
        _write(args, mode, {"rows": rows})
        bad = [(r["N"], r["K"], r["batch"], "bf16" if not r["bf16_ok"] else "no launch ran correctly") for r in rows
               if not r["bf16_ok"] or r["best"] is None]
        errors = sum("error" in c for r in rows for c in r["configs"])
        print(f"launches failing to compile or run: {errors}")
    print(f"wrote {args.out}" + ("  (dry run: interpreter times, not measurements)" if args.dry_run else ""))
    if bad:
        print("FAILED checks:", bad)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
