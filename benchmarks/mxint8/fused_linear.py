"""Fused MXINT8 linear vs bf16 F.linear (cuBLAS) vs dequantize-then-matmul, at small batch, on a CUDA GPU.

    python benchmarks/mxint8/fused_linear.py [--out benchmarks/mxint8/fused_linear.json] [--batches 1 4 16 64]
        [--shapes 4096x4096 14336x4096 28672x8192] [--group 32] [--reps 50] [--rounds 3] [--no-gemlite]
    python benchmarks/mxint8/fused_linear.py --dry-run     # CPU, tiny shapes: checks the code path, times nothing real

Shapes are N x K = out_features x in_features, the nn.Linear weight's (N, K) layout: 28672x8192 is a layer
with 8192 inputs and 28672 outputs. x is (batch, K) bf16; y = x @ W^T is (batch, N).

Timed, each on the same packed weight:
- ``fused``: ``fused_linear.mxint8_linear`` (the Triton kernel at ``pick_config``'s launch, compiled in the warmup);
- ``bf16``: ``F.linear`` with the weight already dequantized to bf16 (cuBLAS; reads 2 bytes per weight);
- ``dequant``: ``dequant.dequantize`` (the CUDA extension where it loads, else the eager reference; the JSON
  says which) then ``F.linear``: what ``MXINT8Linear(impl="dequant")`` does.
- ``copy``: a device copy of the packed bytes, the bandwidth roofline (its GB/s counts read + write);
- ``gemlite``: the peer, gemlite's A16W8 INT8 layer (``gemlite.helper.A16W8_INT8``, a maintained Triton
  low-bit GEMM library; ``pip install 'labkit[bench]'``): the same bf16 weight quantized channel-wise to int8 as
  gemlite does it (scale = row amax / 127), handed to gemlite pre-quantized, run with gemlite's own launch
  choices (its autotune mode and per-GPU config file, recorded). Its output is checked against its own int8
  weight (``gemlite_ok``); ``gemlite_mxint8_rel_err`` is how far that channel-wise format lands from the MXINT8
  weight's product (the formats differ, so no tolerance applies). Its weight GB/s also counts the MXINT8 packed
  bytes (it reads N*K + 4N). Its first timing comes after every fused and bf16 case (its autotuning is a burst
  of full-load work, see below), its later ones in the paired rounds (Method). A GPU run without gemlite is an
  error unless ``--no-gemlite`` says so; the dry run (CPU) records why it was not timed.

Method: the GPU's time per call, from ``labkit.perf.timing.graph_time``: the calls captured in a CUDA graph
and replayed (no Python launch cost; about 10 ms of GPU work a replay, sized from a graphed pass), each call
on its own copy of the weight, enough copies to exceed the L2 cache three times over (no call finds its weight
in L2, as in a model whose layers each read their own weights). ``fused``, ``gemlite`` and ``bf16`` are timed
in ``--rounds`` R paired rounds: the first pass (checks, gemlite's autotune, eager timings) is round one, and
each later round times every cell's three paths back to back (the first pass's callables and graph sizes), in
the order fused, gemlite, bf16 or its reverse in every other round, so the GPU's slow drift over the run (clocks, heat)
falls on all three alike; each ``*_ms`` is the median of its rounds (``*_ms_rounds``), and
``gemlite_over_fused_rounds`` is the ratio within each round. ``*_eager_ms``: per-call CUDA-event times of
ordinary eager calls with L2 flushed before each (``labkit.perf.timing.MedianTimer``): these include the Python
launch cost wherever it exceeds the flush, which at small shapes is the host's time, not the kernel's.
"Weight GB/s" is packed bytes (N*K mantissas + N*K/group exponents) over time for every path, so the paths
compare on the same bytes; the bf16 path actually reads twice that. Outputs are checked against a float64
reference first. The dequantize-then-matmul path is timed once, last, after every round: where it runs the
eager reference (no CUDA extension), its seconds of full-load work came before the next fused timings and left
the 28672x8192 ones ~13% slower than the sweep's (seen on an H100: benchmarks/mxint8/MXINT8_NOTES.md; the
fused kernel is partly instruction-bound, so SM clocks matter to it).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

DRY_SHAPES = ("96x64", "40x160")
ROUND_ORDER = ("fused", "gemlite", "bf16")  # reversed in every other round, so no path always goes first


def run(args) -> dict:
    import torch
    import torch.nn.functional as F

    from labkit.kernels import dequant, extension, fused_linear
    from labkit.kernels.timing import REL_TOL, parse_shape, rel_error, weight_copies
    from labkit.perf.timing import MedianTimer, rotation

    dev = torch.device("cpu" if args.dry_run else "cuda")
    timer = MedianTimer(dev, reps=3, warmup=1) if args.dry_run else MedianTimer(dev, reps=args.reps)
    l2 = 0 if args.dry_run else torch.cuda.get_device_properties(dev).L2_cache_size
    gen = torch.Generator(device=dev).manual_seed(0)
    gl = gemlite_peer(dev, args.no_gemlite)
    if not gl["timed"]:
        print(f"gemlite A16W8 peer: not timed: {gl['reason']}", flush=True)
    rows, cells, later, peer = [], [], [], []  # cells: (row, {path: (graphed callables, reps)}) for the rounds
    for shape in args.shapes:
        N, K = parse_shape(shape)
        g = args.group
        # rotated copies: each graph call reads a weight that is not in L2; the bf16 path's weight is exact
        sets = weight_copies(N, K, g, 1 if args.dry_run else rotation(N * K + N * K // g, l2), gen)
        copies = len(sets)
        m, e, w_bf16 = sets[0]
        packed = m.numel() + e.numel()
        src = torch.empty(packed, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        copy_ms = timer(lambda: dst.copy_(src))
        layers = [gemlite_layer(w, dev) for _, _, w in sets] if gl["timed"] else None  # one per weight copy
        for M in args.batches:
            x = torch.randn(M, K, device=dev, generator=gen).to(torch.bfloat16)
            makers = {  # bound by default arguments: the rounds call them after this loop has moved on
                "fused": lambda m, e, w, x=x, g=g: lambda: fused_linear.mxint8_linear(x, m, e, g),
                "bf16": lambda m, e, w, x=x: lambda: F.linear(x, w),
                "dequant": lambda m, e, w, x=x, g=g: lambda: F.linear(x, dequant.dequantize(m, e, g).to(x.dtype)),
            }
            fns = {name: make(m, e, w_bf16) for name, make in makers.items()}
            before = dict(fused_linear.path_counts)
            errors = {name: rel_error(fn(), x, w_bf16) for name, fn in fns.items()}
            fused_path = "triton" if fused_linear.path_counts["triton"] > before.get("triton", 0) else "dequant"
            row = {"N": N, "K": K, "group_size": g, "batch": M, "packed_bytes": packed, "copies": copies,
                   "fused_path": fused_path, "copy_ms": copy_ms, "copy_GBps": 2 * packed / copy_ms / 1e6}
            calls = {}
            for name, fn in fns.items():
                row[f"{name}_rel_err"] = errors[name]
                row[f"{name}_ok"] = errors[name] <= REL_TOL
                graphed = [makers[name](*ws) for ws in sets]
                if name == "dequant":  # timed after every round (see the module doc)
                    later.append((row, fn, graphed))
                else:
                    calls[name] = (graphed, _time(row, name, fn, graphed, timer, args.dry_run))
            settle(row)  # the first pass's ratios, for the line below; the rounds' medians replace them
            rows.append(row)
            cells.append((row, calls))
            if layers:
                peer.append((row, calls, x, w_bf16, layers))
            print(f"{N}x{K} M={M:>3}: fused {1e3 * row['fused_ms']:9.1f} us ({row['fused_weight_GBps']:7.1f} GB/s, "
                  f"{100 * row['fused_fraction_of_copy']:5.1f}% of copy; path {fused_path})  "
                  f"bf16 {1e3 * row['bf16_ms']:9.1f} us  bf16/fused {row['bf16_over_fused']:.2f}x", flush=True)
    for row, calls, x, w_bf16, layers in peer:
        calls["gemlite"] = _time_gemlite(row, x, w_bf16, layers, timer, args.dry_run)
    rounds = 1 if args.dry_run else args.rounds  # the dry run times nothing real: one pass shows the schema
    paired_rounds(cells, rounds)
    for row, _ in cells:
        settle(row)
        print_rounds(row)
    for row, fn, graphed in later:
        _time(row, "dequant", fn, graphed, timer, args.dry_run)
        row["dequant_over_fused"] = row["dequant_ms"] / row["fused_ms"]
        print(f"{row['N']}x{row['K']} M={row['batch']:>3}: dequant-then-matmul {1e3 * row['dequant_ms']:9.1f} us "
              f"({row['dequant_over_fused']:.2f}x the fused kernel's time)", flush=True)
    return {"rows": rows, "dry_run": args.dry_run, "describe": fused_linear.describe(dev.type),
            "dequant_path": extension.describe(),
            "shape_convention": "N x K = out_features x in_features (nn.Linear weight layout); x is (batch, K) bf16",
            "method": ("CPU perf_counter median, interpreter/CPU, one round: NOT a measurement" if args.dry_run else
                       "*_ms: CUDA-graph replay over rotated weight copies (labkit.perf.timing.graph_time: about "
                       "10 ms of GPU work a replay, *_calls_per_replay calls), the GPU's time; fused, gemlite and "
                       "bf16: the median of `rounds` paired rounds (*_ms_rounds, the first pass included), each "
                       "timing every cell's paths back to back, the order (fused, gemlite, bf16) reversed in every "
                       "other round; dequant: once, after the rounds; *_eager_ms: eager calls, CUDA events, L2 "
                       "flushed before each (host included where it exceeds the flush)"),
            "rounds": rounds,
            "fused_configs": {} if args.dry_run else fused_configs(rows, dev),
            "gemlite": gl,
            "weight_GBps": "packed bytes (N*K + N*K/group) / time, for every path",
            "rel_tol": REL_TOL}


def _time(row: dict, name: str, fn, graphed: list, timer, dry_run: bool) -> int:
    """The first pass's timing of one path; returns the graph's reps, which the later rounds reuse."""
    from labkit.perf.timing import graph_time

    ms, reps = (timer(fn), 1) if dry_run else graph_time(graphed)
    row[f"{name}_ms"] = ms
    row[f"{name}_calls_per_replay"] = reps * len(graphed)
    row[f"{name}_weight_GBps"] = row["packed_bytes"] / ms / 1e6
    if name in ROUND_ORDER:
        row[f"{name}_ms_rounds"] = [ms]
    if not dry_run:
        row[f"{name}_eager_ms"] = timer(fn)
    return reps


def paired_rounds(cells: list, rounds: int, time_fn=None) -> None:
    """Rounds 2..``rounds`` (the first pass was the first): each times every cell's paths back to back with the
    first pass's graphed callables and reps, in ``ROUND_ORDER`` or its reverse in every other round, appending
    to ``{path}_ms_rounds``. ``time_fn(graphed, reps) -> (ms, reps)``: ``graph_time`` unless given."""
    if time_fn is None:
        from labkit.perf.timing import graph_time as time_fn
    for r in range(1, rounds):
        order = ROUND_ORDER if r % 2 == 0 else ROUND_ORDER[::-1]  # round 1 reverses the first pass's order
        for row, calls in cells:
            for name in order:
                if name in calls:
                    graphed, reps = calls[name]
                    row[f"{name}_ms_rounds"].append(time_fn(graphed, reps=reps)[0])


def settle(row: dict) -> None:
    """Each round-timed path's ``*_ms`` becomes the median of its rounds; the fields derived from it follow."""
    for name in ROUND_ORDER:
        if f"{name}_ms_rounds" in row:
            row[f"{name}_ms"] = statistics.median(row[f"{name}_ms_rounds"])
            row[f"{name}_weight_GBps"] = row["packed_bytes"] / row[f"{name}_ms"] / 1e6
    row["bf16_over_fused"] = row["bf16_ms"] / row["fused_ms"]  # > 1: the fused kernel is faster
    row["fused_fraction_of_copy"] = row["fused_weight_GBps"] / row["copy_GBps"]
    if "gemlite_ms_rounds" in row:
        row["gemlite_over_fused"] = row["gemlite_ms"] / row["fused_ms"]
        row["bf16_over_gemlite"] = row["bf16_ms"] / row["gemlite_ms"]
        # paired within a round: both paths saw the same state of the GPU
        ratios = [gl / f for gl, f in zip(row["gemlite_ms_rounds"], row["fused_ms_rounds"], strict=True)]
        row["gemlite_over_fused_rounds"] = ratios
        row["gemlite_over_fused_min"], row["gemlite_over_fused_max"] = min(ratios), max(ratios)


def print_rounds(row: dict) -> None:
    line = (f"{row['N']}x{row['K']} M={row['batch']:>3}: median of {len(row['fused_ms_rounds'])} round(s): "
            f"fused {1e3 * row['fused_ms']:9.1f} us  bf16 {1e3 * row['bf16_ms']:9.1f} us")
    if "gemlite_ms_rounds" in row:
        line += (f"  gemlite {1e3 * row['gemlite_ms']:9.1f} us  gemlite/fused {row['gemlite_over_fused']:.2f}x "
                 f"(rounds {row['gemlite_over_fused_min']:.2f}-{row['gemlite_over_fused_max']:.2f}x)")
    print(line, flush=True)


def gemlite_peer(dev, skip: bool) -> dict:
    """Whether the gemlite peer runs here, and what it is: version, autotune mode, the per-GPU config file it
    loaded; else why not (the reason goes into the JSON: a peer is never left out silently)."""
    if skip:
        return {"timed": False, "reason": "--no-gemlite"}
    if dev.type != "cuda":
        return {"timed": False, "reason": "gemlite's kernels need a CUDA GPU (it asks torch for the device "
                "when imported); this is a CPU run"}
    try:
        import gemlite
        from gemlite.triton_kernels.config import AUTOTUNE
    except Exception as err:  # not installed, or failing on import: either way the reason is recorded
        return {"timed": False, "reason": f"gemlite does not import ({type(err).__name__}: {err}); pip install "
                                          "'labkit[bench]' (gemlite==0.6.0)"}
    return {"timed": True, "version": gemlite.__version__, "layer": "gemlite.helper.A16W8_INT8 (pre-quantized)",
            "autotune": {k: v for k, v in vars(AUTOTUNE).items() if not k.startswith("_")},
            "config_file": Path(gemlite.core.selected_tag).name if gemlite.core.selected_tag else None}


def channelwise_int8(w):
    """gemlite's A16W8 INT8 quantization of ``w`` (N, K): per-row scale = amax / 127 (at least 1e-6), int8
    values rounded and clamped to [-128, 127]; returns (int8 weight, float32 scales (N, 1))."""
    import torch

    w = w.float()
    scales = (w.abs().amax(dim=1, keepdim=True) / 127).clamp_(min=1e-6)
    return (w / scales).round_().clamp_(-128, 127).to(torch.int8), scales


def gemlite_layer(w_bf16, dev):
    """gemlite's A16W8 INT8 layer on ``w_bf16``, quantized here as gemlite would and handed over pre-quantized,
    so the check knows the exact int8 weight it multiplies."""
    import torch
    from gemlite.helper import A16W8_INT8

    q, scales = channelwise_int8(w_bf16)
    return A16W8_INT8(device=str(dev), dtype=torch.bfloat16).from_weights(q, bias=None, scales=scales)


def _time_gemlite(row: dict, x, w_bf16, layers, timer, dry_run: bool) -> tuple[list, int]:
    """The first pass's check and timing of the gemlite peer; returns (graphed callables, reps) for the rounds."""
    from labkit.kernels.timing import REL_TOL, rel_error

    fn = lambda layer=layers[0]: layer(x)  # noqa: E731  (the first call also autotunes)
    y = fn()
    q, scales = channelwise_int8(w_bf16)  # the weight layers[0] holds
    row["gemlite_rel_err"] = rel_error(y, x, q.float() * scales)
    row["gemlite_ok"] = row["gemlite_rel_err"] <= REL_TOL
    row["gemlite_mxint8_rel_err"] = rel_error(y, x, w_bf16)
    graphed = [lambda layer=layer: layer(x) for layer in layers]
    reps = _time(row, "gemlite", fn, graphed, timer, dry_run)
    row["gemlite_over_fused"] = row["gemlite_ms"] / row["fused_ms"]  # > 1: the fused kernel is faster
    row["bf16_over_gemlite"] = row["bf16_ms"] / row["gemlite_ms"]
    print(f"{row['N']}x{row['K']} M={row['batch']:>3}: gemlite A16W8 {1e3 * row['gemlite_ms']:9.1f} us  "
          f"bf16/gemlite {row['bf16_over_gemlite']:.2f}x  gemlite/fused {row['gemlite_over_fused']:.2f}x", flush=True)
    return graphed, reps


def fused_configs(rows, dev) -> dict:
    """pick_config's launch per measured (batch, N, K)."""
    import torch

    from labkit.kernels import fused_triton

    def one(r):  # operands of the measured layout (contiguous, fresh allocations), as the timed calls have
        x = torch.empty(r["batch"], r["K"], dtype=torch.bfloat16, device=dev)
        m = torch.empty(r["N"], r["K"], dtype=torch.int8, device=dev)
        return fused_triton.picked(x, m, r["group_size"])

    return {f"{r['batch']}x{r['N']}x{r['K']}": one(r) for r in rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="JSON path (default benchmarks/mxint8/fused_linear.json; --dry-run: a temp file)")
    p.add_argument("--shapes", nargs="+", default=None, help="N x K, e.g. 4096x4096")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--group", type=int, default=32)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3,
                   help="paired rounds of fused, gemlite and bf16 (the first pass included; >= 1); each path's "
                        "time is the median of its rounds. --dry-run runs one")
    p.add_argument("--no-gemlite", action="store_true",
                   help="time without the gemlite peer (a GPU run otherwise needs it: pip install 'labkit[bench]')")
    p.add_argument("--dry-run", action="store_true",
                   help="CPU, tiny shapes, the Triton interpreter if triton is installed: exercises the code only")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds must be an integer >= 1 (1, 2, 3, ...), got {args.rounds}")
    if args.dry_run:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton
    from labkit.kernels.timing import REL_TOL, SHAPES, parse_shape  # after TRITON_INTERPRET: imports triton

    args.shapes = args.shapes or list(DRY_SHAPES if args.dry_run else SHAPES)
    if args.dry_run:
        args.batches = [b for b in args.batches if b <= 16] or [1]

    import torch

    from labkit import results

    if not args.dry_run and not torch.cuda.is_available():
        p.error("needs a CUDA GPU (use --dry-run to check the code path on CPU)")
    for s in args.shapes:
        if parse_shape(s)[1] % args.group:
            p.error(f"--group {args.group} does not divide K of --shapes {s}")
    if not args.dry_run and not args.no_gemlite:
        peer = gemlite_peer(torch.device("cuda"), False)
        if not peer["timed"]:
            p.error(f"the gemlite peer: {peer['reason']}; or pass --no-gemlite")
    out = run(args)
    versions = results.versions()
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        versions["triton"] = None
    out.update(versions=versions, provenance=results.provenance(), command=" ".join(sys.argv), args=vars(args))
    if torch.cuda.is_available() and not args.dry_run:
        out["sm_count"] = torch.cuda.get_device_properties(0).multi_processor_count
    path = Path(args.out or (Path(tempfile.gettempdir()) / "labkit_fused_linear_dry_run.json" if args.dry_run
                             else Path(__file__).with_name("fused_linear.json")))
    results.write_json(path, out, indent=2)
    bad = [(r["N"], r["K"], r["batch"], name) for r in out["rows"] for name in ("fused", "bf16", "dequant", "gemlite")
           if not r.get(f"{name}_ok", name == "gemlite")]  # gemlite: only where it ran
    peer = out["gemlite"]
    print(f"\n{out['describe']}\n{out['dequant_path']}\ngemlite A16W8 peer: "
          + (f"gemlite {peer['version']}, autotune {peer['autotune']}, config {peer['config_file']}" if peer["timed"]
             else f"not timed ({peer['reason']})") + f"\nwrote {path}"
          + ("  (dry run: the times are CPU/interpreter times, not measurements)" if args.dry_run else ""))
    print(f"outputs outside rel. error {REL_TOL:.4g} of the float64 reference: {bad or 'none'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
