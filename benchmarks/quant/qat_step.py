"""QAT training-step time of the fixed-point-quantized model over the fp32 model, measured in one run.

A step is forward + backward + AdamW on one batch (embeddings frozen, as in labkit's fine-tuning).
The two models alternate, repeat by repeat, so drift in machine load hits both; medians are compared.

    python benchmarks/quant/qat_step.py [--device cpu|cuda] [--batch 32] [--seq 128] [--width 8] [--repeats 20]
        [--qat-matmul fp32|bf16] [--no-compile] [--compile-model] [--profile] [--out FILE]

``--qat-matmul bf16``: the quantized model's layers feed bf16 matmuls under autocast with fused fake
quantization (``labkit.quant.fast``; int8 fixed point is exact in bf16); fp32 (default) is the reference.
``--compile-model``: both models' forward passes compiled with torch.compile (the same for both, so the
ratio compares like with like); the fake quantizations then fuse into the model's own kernels.
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from labkit import models, recipes
from labkit.quant.compress import compress
from labkit.quant import fixed_point
from labkit.perf.timing import time_call
from labkit.quant import set_qat_matmul
from labkit.results import provenance, write_json
from labkit.training.train import autocast, pick_device


def step_fn(model, batch, device):
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)

    def step():
        with autocast(device):
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--qat-matmul", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--no-compile", action="store_true", help="bf16 path: eager fake quantization")
    ap.add_argument("--compile-model", action="store_true",
                    help="torch.compile both models' forward (the fake quantizations fuse with their neighbours)")
    ap.add_argument("--out", help="the JSON (default: qat_step_eager.json, with --compile-model qat_step_compiled.json, "
                                  "beside this script)")
    ap.add_argument("--profile", action="store_true",
                    help="after timing: torch.profiler over 3 steps of each model, kernels per step and top ops")
    args = ap.parse_args()
    device = pick_device(args.device)
    torch.manual_seed(0)
    fp32 = models.load_model()
    recipes.freeze_embeddings(fp32)
    qmodel = compress(fp32, quant=fixed_point(args.width)).model
    # a compiled model traces the fake quantizations into its own graph: a nested compile per layer would
    # only add guard checks (measured on an H100: bf16 path 2.4x with nested compiles, 1.09x without)
    paths = set_qat_matmul(qmodel, args.qat_matmul, compile=not (args.no_compile or args.compile_model))
    print(f"QAT matmul {args.qat_matmul}: {sum(v == 'bf16' for v in paths.values())} of {len(paths)} layers on the "
          "bf16 path (under bf16 autocast; CPU runs without autocast, so fp32 there)")
    batch = {"input_ids": torch.randint(1000, 30000, (args.batch, args.seq), device=device),
             "labels": torch.randint(0, 2, (args.batch,), device=device)}
    steps = {}
    for name, model in (("fp32", fp32), (f"int{args.width}", qmodel)):
        model.to(device).train()
        steps[name] = step_fn(torch.compile(model) if args.compile_model else model, batch, device)
        for _ in range(args.warmup):
            steps[name]()
    times = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, fn in steps.items():
            times[name].append(time_call(fn, device))
    med = {name: statistics.median(t) for name, t in times.items()}
    names = list(med)
    ratio = med[names[1]] / med[names[0]]
    prov = provenance()
    print(f"device: {prov['device']}; torch {prov['versions']['torch']}; batch {args.batch} x {args.seq} tokens")
    for name in names:
        q1, q3 = statistics.quantiles(times[name], n=4)[0], statistics.quantiles(times[name], n=4)[2]
        print(f"  {name:6s} median {1e3 * med[name]:8.2f} ms/step  (IQR {1e3 * q1:.2f}-{1e3 * q3:.2f})")
    print(f"QAT step / fp32 step = {ratio:.3f}x (goal <= 1.3x)")
    profiles = {name: profile_steps(fn, device) for name, fn in steps.items()} if args.profile else None
    out = args.out or Path(__file__).with_name(f"qat_step_{'compiled' if args.compile_model else 'eager'}.json")
    write_json(out, {"median_seconds": med, "times": times, "ratio": ratio, "args": vars(args),
                     "qat_paths": paths, "profiles": profiles, "provenance": prov}, indent=2)
    print(f"wrote {out}")


def profile_steps(fn, device, steps: int = 3) -> dict:
    """Where a step's time goes: device kernels per step and the top operators by self device time."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(steps):
            fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
    events = prof.key_averages()
    dev_attr = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    kernels = sum(e.count for e in prof.events() if getattr(e, "device_type", None) is not None
                  and str(e.device_type).endswith("CUDA")) / steps
    top = sorted(events, key=lambda e: getattr(e, dev_attr, 0), reverse=True)[:15]
    rows = [{"op": e.key, "count_per_step": e.count / steps, "self_us_per_step": getattr(e, dev_attr, 0) / steps,
             "cpu_total_us_per_step": e.cpu_time_total / steps} for e in top]
    total = sum(getattr(e, dev_attr, 0) for e in events) / steps
    print(f"  profile: {kernels:.0f} device events per step, {total / 1e3:.2f} ms self time per step")
    for r in rows[:10]:
        print(f"    {r['self_us_per_step']:9.1f} us  x{r['count_per_step']:6.1f}  {r['op'][:70]}")
    return {"device_events_per_step": kernels, "self_us_per_step": total, "top": rows}


if __name__ == "__main__":
    main()
