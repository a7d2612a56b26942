"""Why one launch times differently in two benchmarks: the one-row fused MXINT8 kernel at one shape, timed by
``graph_ms`` through each call path (the layer's ``mxint8_linear``, ``fused_triton.launch`` at its pick, the same
launch without PDL) and bf16, in rounds, with the graph's length sized four ways: from an eager pass (how
``graph_ms`` sized it before: the host's launch cost counted), from a graphed pass (``graph_time`` now), the same
right after a float64 reference product (full-load work), and fixed long (100 passes). A CUDA GPU only.

    python benchmarks/mxint8/fused_linear_probe.py --out probe.json [--shapes 28672x8192 14336x4096] [--rounds 3]
"""
from __future__ import annotations

import argparse
import sys
import time


def eager_reps(fns) -> int:
    """The earlier sizing: about 2 ms of work per replay as one eager pass measures it (host included)."""
    from labkit.perf.timing import time_call

    for fn in fns:
        fn()
    ms = 1e3 * time_call(lambda: [fn() for fn in fns], "cuda")
    return max(1, min(200, int(2.0 / max(ms, 1e-3))))


def main(argv=None) -> int:
    import torch
    import torch.nn.functional as F

    from labkit.kernels import fused_gemv, fused_linear, fused_triton
    from labkit.kernels.timing import rel_error, weight_copies
    from labkit.perf.timing import graph_time, rotation
    from labkit.results import provenance, write_json

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--shapes", nargs="+", default=["28672x8192", "14336x4096"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--group", type=int, default=32)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("fused_linear_probe.py needs a CUDA GPU (torch sees none)")
    dev, g = torch.device("cuda"), args.group
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    gen = torch.Generator(device=dev).manual_seed(0)
    rows, t0 = [], time.perf_counter()
    for shape in args.shapes:
        N, K = map(int, shape.split("x"))
        sets = weight_copies(N, K, g, rotation(N * K + N * K // g, l2), gen)
        x = torch.randn(1, K, device=dev, generator=gen).to(torch.bfloat16)
        one = dict(fused_gemv.ONE_ROW)
        paths = {
            "layer": lambda m, e, w: lambda: fused_linear.mxint8_linear(x, m, e, g),
            "launch_picked": lambda m, e, w: lambda: fused_triton.launch(x, m, e, None, g),
            "launch_no_pdl": lambda m, e, w: lambda: fused_triton.launch(x, m, e, None, g, one),
            "bf16": lambda m, e, w: lambda: F.linear(x, w),
        }
        for r in range(args.rounds):
            for name, make in paths.items():
                fns = [make(*s) for s in sets]
                for how in ("eager_sized", "graph_sized", "after_fp64", "long"):
                    if how == "after_fp64":
                        rel_error(fns[0](), x, sets[0][2])
                    reps = {"eager_sized": eager_reps(fns), "long": 100}.get(how)
                    ms, reps = graph_time(fns, reps=reps)
                    rows.append({"shape": shape, "round": r, "path": name, "how": how, "us": 1e3 * ms, "reps": reps,
                                 "calls_per_replay": reps * len(fns), "t": round(time.perf_counter() - t0, 2)})
                    print(f"{shape} r{r} {name:14s} {how:11s} {1e3 * ms:8.1f} us  {reps * len(fns):5d} calls a replay"
                          f"  [{rows[-1]['t']} s]", flush=True)
    out = {"rows": rows, "picked": fused_triton.picked(x, sets[0][0], g), "one_row": fused_gemv.ONE_ROW,
           "provenance": provenance(), "command": " ".join(sys.argv)}
    write_json(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
