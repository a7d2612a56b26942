"""Lab 3 trial benchmark: one PTQ trial per format family, the fast path against the reference path,
measured in one run on the Lab 3 model and test set.

A trial is what a Lab 3 search trial does (``PrecisionObjective``): copy the SFT model, quantize every
Linear in the format at its Lab 3 study setting (8 bits; the fixed formats at their own), evaluate on the
whole test set. Paths:
- ``reference``: fp32 matmuls for the quantized layers, every fake quantization eager (several passes),
  the Triton kernels and CUDA graphs off;
- ``fast`` (the search's default): weights quantized once per trial, no STE masks, and under bf16 autocast
  the layers whose formats are exact in bf16 multiply in bf16 (as the unquantized layers do); on CUDA each
  fake quantization is one Triton pass (``labkit.quant.fake_quant_triton``, checked against the formula on
  first use); with ``--compile`` the formats without a kernel are compiled instead of eager; the evaluation
  replays a CUDA graph for its repeated batch shape (``PrecisionObjective``).
``fast_first`` includes compiling the format; ``fast`` is the same trial again (a search meets each
format many times). ``unquantized`` evaluates the SFT model itself, eager and (``unquantized_graphs``) as a
trial evaluates. Accuracies of both paths are kept:
they differ only by the bf16 rounding of those layers' outputs.

    python benchmarks/quant/lab3_trial.py [--profile full] [--out benchmarks/quant/lab3_trial.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import warnings

import torch

from labkit import recipes
from labkit.perf.timing import timed
from labkit.training import cuda_graphs, train
from labkit.run.profiles import lab_settings
from labkit.quant import fast, kernel_check
from labkit.quant.study import STUDY_ORDER, study_params
from labkit.results import provenance, write_json
from labkit.labs.lab3_precision import FORMAT_SPACE, PrecisionObjective, linear_layers, uniform


class Attrs:
    """Stands in for an Optuna trial: keeps what the objective records."""

    def __init__(self):
        self.user_attrs = {}

    def set_user_attr(self, k, v):
        self.user_attrs[k] = v


def trial(obj: PrecisionObjective, config, kernels: bool = True) -> dict:
    """One trial; ``kernels=False``: the reference (no Triton fake quantization, no CUDA graphs)."""
    kernel_check.TRITON_FAKE_QUANT = kernels
    os.environ[cuda_graphs.ENV] = "1" if kernels else "0"
    t = Attrs()
    seconds, _ = timed(lambda: obj._measure(t, config), "auto")
    return {"seconds": seconds, "accuracy": t.user_attrs["accuracy"],
            "bf16_layers": t.user_attrs["bf16_layers"], "eval": t.user_attrs.get("eval")}


def kernel_table(obj: PrecisionObjective, config, top: int = 8) -> dict:
    """One more fast trial under torch.profiler: the CUDA kernels that took the most time, and their sum."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        row = trial(obj, config)
    events = [e for e in prof.key_averages() if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
    own = [(e.key, e.self_device_time_total / 1e3, e.count) for e in events]
    own.sort(key=lambda r: -r[1])
    return {"seconds_profiled": row["seconds"], "kernel_ms_total": sum(r[1] for r in own),
            "top": [{"kernel": k[:120], "ms": round(ms, 2), "calls": n} for k, ms, n in own[:top]]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="auto")
    ap.add_argument("--formats", default=",".join(STUDY_ORDER))
    ap.add_argument("--out", default="benchmarks/quant/lab3_trial.json")
    ap.add_argument("--compile", action="store_true", help="compile each format's fake quantization (fast path)")
    ap.add_argument("--kernels", action="store_true", help="profile one more fast trial per format (CUDA kernels)")
    args = ap.parse_args(argv)
    s = lab_settings("lab3_search", args.profile)
    dl = recipes.shared_loaders(s)
    base, metrics = recipes.finetuned_model(s, dl)
    layers = linear_layers(base)
    dev = s["device"]
    train.evaluate(base, dl.test, device=dev, progress=False)  # warm-up: data on the device, kernels loaded
    unq, unq_graphs = [], []
    for _ in range(2):
        seconds, ev = timed(lambda: train.evaluate(base, dl.test, device=dev, progress=False), dev)
        unq.append(seconds)
        acc = ev["accuracy"]
    for _ in range(2):  # as a search trial evaluates: a CUDA graph per repeated batch shape (eager on CPU)
        seconds, ev = timed(lambda: train.evaluate(base, dl.test, device=dev, progress=False, graphs=None), dev)
        unq_graphs.append(seconds)
        acc_graphs = ev["accuracy"]
    out = {"what": "Lab 3 PTQ trial per format family: reference vs fast path", "profile": s["profile"],
           "n_test": dl.sizes["test"], "max_len": s.get("max_len"), "layers": len(layers),
           "sft_digest": metrics["sft_digest"], "unquantized": {"seconds": min(unq), "accuracy": acc},
           "unquantized_graphs": {"seconds": min(unq_graphs), "accuracy": acc_graphs},
           "provenance": provenance(), "rows": []}
    print(f"unquantized: {min(unq):.3f} s eager, {min(unq_graphs):.3f} s graphed, accuracy {acc:.4f} / {acc_graphs:.4f} "
          f"({dl.sizes['test']} reviews, {len(layers)} layers)")
    ref = PrecisionObjective(dl, s, base, formats=list(FORMAT_SPACE), ptq_matmul="fp32", compile=False)
    quick = PrecisionObjective(dl, s, base, formats=list(FORMAT_SPACE), compile=args.compile)
    fast.INFERENCE_COMPILE = args.compile
    out["compile"] = args.compile
    out["triton_fake_quant"] = kernel_check.TRITON_FAKE_QUANT
    for name in args.formats.split(","):
        params = {k: v for k, v in study_params(name, 8)["weight"].items() if k in FORMAT_SPACE[name]}
        config = uniform(layers, name, **params)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            row = {"format": name, "params": config[layers[0]][1], "reference": trial(ref, config, kernels=False),
                   "fast_first": trial(quick, config), "fast": trial(quick, config)}
        if args.kernels and torch.cuda.is_available():
            row["kernels"] = kernel_table(quick, config)
            print("   kernels {:.0f} ms of {:.2f} s: ".format(row["kernels"]["kernel_ms_total"],
                                                           row["kernels"]["seconds_profiled"])
                  + "; ".join(f"{k['kernel'][:50]} {k['ms']:.0f} ms x{k['calls']}" for k in row["kernels"]["top"][:5]))
        row["fallbacks"] = sorted({str(w.message) for w in caught
                                   if any(k in str(w.message) for k in ("runs eagerly", "reference formula", "sign GEMM",
                                                          "capture"))})
        row["speedup"] = row["reference"]["seconds"] / row["fast"]["seconds"]
        row["vs_unquantized"] = row["fast"]["seconds"] / out["unquantized"]["seconds"]  # eager evaluation
        row["vs_unquantized_graphs"] = row["fast"]["seconds"] / out["unquantized_graphs"]["seconds"]  # as the trial
        row["accuracy_diff"] = row["fast"]["accuracy"] - row["reference"]["accuracy"]
        out["rows"].append(row)
        print(f"{name:22s} reference {row['reference']['seconds']:6.2f} s  fast first {row['fast_first']['seconds']:6.2f} s"
              f"  fast {row['fast']['seconds']:6.2f} s  ({row['speedup']:.1f}x, {row['vs_unquantized']:.1f}x unquantized)"
              f"  acc {row['reference']['accuracy']:.4f} -> {row['fast']['accuracy']:.4f}"
              f"  bf16 layers {row['fast']['bf16_layers']}  eval {row['fast']['eval']}" + (f"  FALLBACK {row['fallbacks']}" if row["fallbacks"] else ""),
              flush=True)
        write_json(args.out, out)  # kept as it goes: a cut run keeps its rows
    fast_s = [r["fast"]["seconds"] for r in out["rows"]]
    ref_s = [r["reference"]["seconds"] for r in out["rows"]]
    out["summary"] = {"median_fast_s": statistics.median(fast_s), "median_reference_s": statistics.median(ref_s),
                      "median_fast_vs_unquantized": statistics.median(r["vs_unquantized"] for r in out["rows"]),
                      "max_fast_vs_unquantized": max(r["vs_unquantized"] for r in out["rows"]),
                      "median_fast_vs_unquantized_graphs": statistics.median(r["vs_unquantized_graphs"] for r in out["rows"]),
                      "max_fast_vs_unquantized_graphs": max(r["vs_unquantized_graphs"] for r in out["rows"]),
                      "max_abs_accuracy_diff": max(abs(r["accuracy_diff"]) for r in out["rows"]),
                      "fallbacks": dict(kernel_check.FALLBACKS),
                      "goal": "median fast trial <= 1 s, quantized evaluation <= 3x the unquantized"}
    write_json(args.out, out)
    print(json.dumps(out["summary"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
