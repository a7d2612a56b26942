"""Programmatic dependent launch (PDL) for the fused MXINT8 linear on a CUDA GPU (sm_90+): what it saves, measured.

    python benchmarks/mxint8/fused_linear_pdl.py [--out benchmarks/mxint8/fused_linear_pdl.json] [--shapes 4096x4096 ...]
        [--batches 1 4 16 64] [--prefetch 1024 8192] [--rounds 2]

A weight-only kernel at batch 1-16 reads a 16-470 MB weight in 10-100 us, so the fixed cost of each launch (the
grid's start, the first loads' latency, the last programs' tail) is a large share of it. With PDL
(``fused_triton._pdl_enter``) the next call's programs start while this call's last ones finish: they prefetch
their first W bytes to L2 (the weight never depends on an earlier kernel), then wait (``griddepcontrol.wait``)
for the previous kernel's writes before reading x.

For each shape and batch, ``pick_config``'s launch is timed with PDL off and with PDL on at each ``--triggers`` point
(``start``: the next kernel may launch once every program has passed its wait; ``end``: once every program has
finished its main loop) without prefetch and with each ``--prefetch`` size (bytes per W row), in ``--rounds`` interleaved rounds with cuBLAS bf16 (``F.linear`` on the
dequantized weight) in the same rounds. Two call sequences, both captured in a CUDA graph and replayed
(``labkit.perf.timing.graph_ms``), each call on its own weight copy (several times the L2 cache):

- ``independent``: every call reads the same x (as ``fused_linear.py`` times);
- ``chain`` (square shapes): each call's x is the previous call's output, as in a stack of layers, so a PDL launch
  really has to wait for its predecessor. Its outputs must equal the PDL-off chain's bit for bit, eager and
  replayed; every variant's single-call output must equal PDL off's bit for bit and be within 2^-7 of float64.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SHAPES = ("4096x4096", "14336x4096", "28672x8192")
REL_TOL = 2.0 ** -7


def variants(prefetch: list[int], triggers: list[str]) -> dict:
    """off, and PDL with each trigger point (``TRIGGER``) and prefetch size (0 = none)."""
    out = {"off": {"PDL": False}}
    out.update({f"{t}_pf{p}": {"PDL": True, "TRIGGER": t, "PREFETCH": p} for t in triggers for p in [0, *prefetch]})
    return out


def _graph_calls(fns, calls_per_fn: int) -> float:
    from labkit.perf.timing import graph_ms

    return graph_ms(fns) / calls_per_fn


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


def run(args) -> dict:
    import torch
    import torch.nn.functional as F

    from labkit.kernels import fused_triton
    from labkit.kernels.timing import rel_error, weight_copies
    from labkit.perf.timing import rotation

    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    gen = torch.Generator(device=dev).manual_seed(0)
    vs = variants(args.prefetch, args.triggers)
    rows = []
    for shape in args.shapes:
        N, K = (int(v) for v in shape.lower().split("x"))
        g = args.group
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
            for r in range(args.rounds):
                for name, f in makers.items():
                    ind = _graph_calls([lambda w=w, f=f: f(x, w) for w in sets], 1)
                    row["rounds"].setdefault(f"{name}_us", []).append(1e3 * ind)
                    if square:
                        ch = _graph_calls([lambda f=f: _chain(f, x, sets)], len(sets))
                        row["rounds"].setdefault(f"{name}_chain_us", []).append(1e3 * ch)
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
    return {"rows": rows, "variants": vs, "rel_tol": REL_TOL,
            "method": "us per call: CUDA-graph replay over rotated weight copies (labkit.perf.timing.graph_ms), "
                      "median over rounds; chain: each call's x is the previous output (square shapes)"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "mxint8" / "fused_linear_pdl.json"))
    p.add_argument("--shapes", nargs="+", default=list(SHAPES))
    p.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--prefetch", type=int, nargs="*", default=[1024],
                   help="bytes of each W row to prefetch to L2 before the wait (powers of two >= 128), besides none")
    p.add_argument("--triggers", nargs="+", default=["start", "end"], choices=["start", "end"],
                   help="where a program lets the next kernel launch: after its wait, or after its main loop")
    p.add_argument("--group", type=int, default=32)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)

    import torch

    from labkit import results

    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU of sm_90 or newer (programmatic dependent launch); "
                "torch.cuda.is_available() is False")
    if torch.cuda.get_device_capability()[0] < 9:
        p.error(f"needs sm_90 or newer for programmatic dependent launch; this GPU is "
                f"sm_{''.join(map(str, torch.cuda.get_device_capability()))}")
    out = run(args)
    import triton

    out.update(versions={**results.versions(), "triton": triton.__version__}, provenance=results.provenance(),
               command=" ".join(sys.argv), args=vars(args),
               device=torch.cuda.get_device_name(), sm_count=torch.cuda.get_device_properties(0).multi_processor_count)
    results.write_json(args.out, out)
    bad = [(r["N"], r["K"], r["batch"], k) for r in out["rows"] for k, v in r.items()
           if (k.endswith("_rel_err") and not v <= REL_TOL) or (k.endswith(("same_bits", "_as_off")) and v is False)]
    if bad:
        print("FAILED checks:", bad)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
