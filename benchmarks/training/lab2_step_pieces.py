"""The small reductions of a Lab 2 training step, each against a GEMM formulation (measured before the
step kernels were written: labkit/training/step_kernels.py).

A graphed Lab 2 step (benchmarks/training/lab2_trial_kernels.json) spends a tenth of its kernel time on bias gradients
(``grad.sum(0)`` over batch x tokens rows, bf16, ~13 us each on an H100) and another on LayerNorm's gamma/beta
gradients. The same sums as a GEMV (``ones @ grad``: cuBLAS, fp32 accumulation, bf16 out) read the same bytes
in one well-parallelised kernel. This times both (CUDA-graph replay, ``labkit.perf.timing.graph_ms``) for
the step's shapes and says how far the two results lie apart (both round an fp32 sum to bf16; the order of the
sum differs), so a change to the training step can be judged before it is made.

    python benchmarks/training/lab2_step_pieces.py [--rows 8192] [--widths 128,256,512,768,2048] [--out FILE]
"""
from __future__ import annotations

import argparse

import torch

from labkit.results import provenance, write_json


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=32 * 256, help="batch x tokens (Lab 2 full: 32 x 256)")
    ap.add_argument("--widths", default="128,256,512,768,2048")
    ap.add_argument("--out", default="benchmarks/training/lab2_step_pieces.json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA device: these are GPU kernel timings")
        return 2
    from labkit.perf.timing import graph_ms

    out = {"what": "bias-gradient sum: torch reduction vs GEMV", "rows": args.rows, "results": [],
           "provenance": provenance()}
    g = torch.Generator(device="cuda").manual_seed(0)
    ones = torch.ones(1, args.rows, device="cuda", dtype=torch.bfloat16)
    for width in (int(w) for w in args.widths.split(",")):
        grads = [torch.randn(args.rows, width, device="cuda", generator=g).to(torch.bfloat16) for _ in range(8)]
        sink = {}
        reduce_ms = graph_ms([lambda t=t: sink.__setitem__("r", t.sum(0)) for t in grads])
        gemv_ms = graph_ms([lambda t=t: sink.__setitem__("m", torch.mm(ones, t)) for t in grads])
        ref = grads[0].double().sum(0)
        a, b = grads[0].sum(0).double(), torch.mm(ones, grads[0])[0].double()
        row = {"width": width, "reduce_us": reduce_ms * 1e3, "gemv_us": gemv_ms * 1e3,
               "reduce_over_gemv": reduce_ms / gemv_ms,
               "max_rel_diff_between": float(((a - b).abs() / ref.abs().clamp_min(1e-3)).max()),
               "max_abs_err_reduce": float((a - ref).abs().max()), "max_abs_err_gemv": float((b - ref).abs().max())}
        out["results"].append(row)
        print(f"width {width:5d}: sum(0) {row['reduce_us']:6.1f} us  GEMV {row['gemv_us']:6.1f} us  "
              f"({row['reduce_over_gemv']:.2f}x)  |err| vs float64: {row['max_abs_err_reduce']:.3g} / "
              f"{row['max_abs_err_gemv']:.3g}", flush=True)
    write_json(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
