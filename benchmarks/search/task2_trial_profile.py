"""Where a Lab 2 Task 2 trial's time goes, phase by phase, and what the compressed model's matmul path costs.

A compress+train trial trains an architecture, compresses it (fixed point + L1 pruning of weights and
activations), evaluates it, post-trains it with compression in place, evaluates again, then post-trains and
evaluates its uncompressed control. Each phase is timed alone (synchronised) for the trained model under each
``--matmul`` path of its QuantLinear layers (``fp32``: the reference; ``bf16``: operands exact in bf16 multiplied in
bf16, labkit.quant.fast, its training fake quantization compiled; ``bf16-eager``: not compiled; ``fp32-topk``: fp32
with the activation mask by torch.topk, the path before labkit.prune.mask_kernel), from the same trained weights, with the accuracy each reaches; then torch.profiler's
top kernels over steady post-training steps and over compressed evaluation batches.

    python benchmarks/search/task2_trial_profile.py [--archs start,mid] [--matmul fp32-topk,fp32,bf16-eager,bf16]
        [--out benchmarks/search/task2_trial_profile.json]
"""
from __future__ import annotations

import argparse
import copy
import itertools
import os
import warnings
from unittest import mock

import torch
from torch.profiler import ProfilerActivity, profile

from labkit import recipes
from labkit.labs import lab2
from labkit.labs.lab2_space import build_model
from labkit.perf.timing import synchronize, timed
from labkit.prune import mask_kernel
from labkit.quant import set_qat_matmul
from labkit.quant.compress import compress
from labkit.results import provenance, write_json
from labkit.run.profiles import lab_settings
from labkit.training import train

# Task 2's start in the committed full-profile run (figures/lab2/compression_aware.json) and a middle architecture.
ARCHS = {
    "start": {"config": dict(num_hidden_layers=2, num_attention_heads=8, hidden_size=128, intermediate_size=512),
              "linears": {"layer0.attention.self.query": "identity", "layer0.attention.self.value": "identity",
                          "layer0.attention.output.dense": "identity", "layer1.attention.self.query": "identity",
                          "layer1.attention.self.key": "identity", "layer1.attention.self.value": "identity"}},
    "mid": {"config": dict(num_hidden_layers=4, num_attention_heads=4, hidden_size=256, intermediate_size=1024)},
}


def _top_kernels(prof, steps: int, n: int = 12) -> dict:
    events = prof.key_averages()
    kernels = sorted((e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.self_device_time_total, reverse=True)
    total = sum(e.self_device_time_total for e in kernels)
    return {"gpu_kernel_ms_per_step": total / 1e3 / steps,
            "top_kernels": [{"kernel": e.key[:110], "calls": e.count, "ms_per_step": e.self_device_time_total / 1e3 / steps}
                            for e in kernels[:n]]}


def profile_steps(s, dl, model, steps: int = 20) -> dict:
    """Kernels of ``steps`` steady post-training steps (after their graphs are captured) and of ``steps`` evaluation
    batches of ``model``."""
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    sub = list(itertools.islice(itertools.cycle(dl.train), steps + 5))
    train.train(model, sub[:5], epochs=1, lr=s["post_lr"], device=s["device"], progress=False)
    with profile(activities=acts) as prof:
        train.train(model, sub[5:], epochs=1, lr=s["post_lr"], device=s["device"], progress=False)
        synchronize("auto")
    out = {"post_train": _top_kernels(prof, steps)}
    batches = list(itertools.islice(iter(dl.test), steps))
    with profile(activities=acts) as prof:
        train.evaluate(model, batches, device=s["device"], progress=False)
        synchronize("auto")
    out["evaluate"] = _top_kernels(prof, steps)
    return out


def _post_train(s, dl, m):
    """A compressed model's extra training, and its control's: the same length and batches."""
    return train.train(m, dl.train, epochs=s["post_epochs"], lr=s["post_lr"], device=s["device"], seed=s["seed"],
                       progress=False)


def compressed_phases(s, dl, model, mm: str, topk: bool) -> dict:
    """A copy of the trained ``model`` compressed, evaluated, post-trained and evaluated again on path ``mm``."""
    quant, prune = lab2.compression_configs(s)

    r = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r["compress_s"], m = timed(lambda: compress(copy.deepcopy(model).cpu(), quant=quant, prune=prune).model, "auto")
        # "bf16-eager": the bf16 path with its training fake quantization uncompiled (no torch.compile per process)
        r["paths"] = sorted(set(set_qat_matmul(m, mm.split("-")[0], compile=not mm.endswith("-eager")).values()))
    r["activation_mask"] = "topk" if topk else mask_kernel.VERSION
    r["warnings"] = sorted({str(w.message)[:160] for w in caught})
    r["eval_compressed_s"], ev = timed(lambda: train.evaluate(m, dl.test, device=s["device"], progress=False), "auto")
    r["accuracy_compressed"] = ev["accuracy"]
    r["post_train_s"], more = timed(lambda: _post_train(s, dl, m), "auto")
    r["post_train_graphs"] = {k: more.get(k) for k in ("graph_replays", "eager_calls", "graph_failure")}
    r["eval_post_s"], ev = timed(lambda: train.evaluate(m, dl.test, device=s["device"], progress=False), "auto")
    r["accuracy_post_trained"] = ev["accuracy"]
    r["profile"] = profile_steps(s, dl, m)
    return r


def trial_phases(s, dl, arch: dict, matmuls: list[str]) -> dict:
    row = {"arch": arch, "phases": {}}
    model = build_model(arch, seed=s["seed"])
    row["phases"]["train_s"], fit = timed(lambda: train.train(
        model, dl.train, epochs=s["epochs"], lr=s["lr"], device=s["device"], seed=s["seed"], progress=False,
        warmup=s["warmup"]), "auto")
    row["phases"]["eval_s"], ev = timed(lambda: train.evaluate(model, dl.test, device=s["device"], progress=False),
                                       "auto")
    row["accuracy_trained"] = ev["accuracy"]

    control = copy.deepcopy(model).cpu()
    row["phases"]["control_post_train_s"], _ = timed(lambda: _post_train(s, dl, control), "auto")
    row["phases"]["control_eval_s"], ev = timed(lambda: train.evaluate(control, dl.test, device=s["device"],
                                                                        progress=False), "auto")
    row["accuracy_control"] = ev["accuracy"]
    row["by_matmul"] = {}
    for mm in matmuls:
        # "fp32-topk": the path before labkit.prune.mask_kernel (topk + scatter) on the fp32 matmul
        topk = mm.endswith("-topk")
        with mock.patch.dict(os.environ, {mask_kernel.ENV: "0" if topk else "1"}):
            row["by_matmul"][mm] = compressed_phases(s, dl, model, mm, topk)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="full")
    ap.add_argument("--archs", default="start,mid", help=f"names from {list(ARCHS)}")
    ap.add_argument("--matmul", default="fp32-topk,fp32,bf16-eager,bf16")
    ap.add_argument("--out", default="benchmarks/search/task2_trial_profile.json")
    args = ap.parse_args(argv)
    s = lab_settings("lab2_search", args.profile)
    dl = recipes.shared_loaders(s)
    report = {"what": "Lab 2 Task 2 trial phases by QuantLinear matmul path", "profile": s["profile"],
              "provenance": provenance(), "rows": []}
    for name in args.archs.split(","):
        row = {"name": name, **trial_phases(s, dl, ARCHS[name], args.matmul.split(","))}
        report["rows"].append(row)
        p = row["phases"]
        print(f"{name}: train {p['train_s']:.2f} s, eval {p['eval_s']:.2f} s, control post-train "
              f"{p['control_post_train_s']:.2f} s + eval {p['control_eval_s']:.2f} s; acc {row['accuracy_trained']:.4f}",
              flush=True)
        for mm, r in row["by_matmul"].items():
            pr = r["profile"]
            print(f"  {mm}: compress {r['compress_s']:.2f}, eval {r['eval_compressed_s']:.2f}, post-train "
                  f"{r['post_train_s']:.2f}, eval {r['eval_post_s']:.2f} s; acc {r['accuracy_compressed']:.4f} -> "
                  f"{r['accuracy_post_trained']:.4f}; paths {r['paths']}; graphs {r['post_train_graphs']}; "
                  f"step {pr['post_train']['gpu_kernel_ms_per_step']:.2f} ms, eval batch "
                  f"{pr['evaluate']['gpu_kernel_ms_per_step']:.2f} ms of kernels", flush=True)
            for part in ("post_train", "evaluate"):
                for k in pr[part]["top_kernels"][:6]:
                    print(f"     {part} {k['ms_per_step']:.3f} ms x{k['calls']} {k['kernel'][:90]}", flush=True)
            if r["warnings"]:
                print("     warnings: " + " | ".join(r["warnings"]), flush=True)
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
