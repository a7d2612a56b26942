"""Where a Lab 2 trial's time goes: build, train, evaluate, with CUDA graphs and without, for a few
architectures, plus a torch.profiler table of steady training steps (host ops by self CPU time, the GPU's
total kernel time over the same steps, and the kernels that take most of it).

    python benchmarks/training/lab2_trial_profile.py [--profile full] [--archs 0,2] [--graphs on,off] [--eval-graphs]
        [--out benchmarks/training/lab2_trial_profile.json]

The evaluation runs eagerly unless --eval-graphs (graphed evaluations measured slower on the H100).
"""
from __future__ import annotations

import argparse
import itertools
import os
import time

import torch
from torch.profiler import ProfilerActivity, profile

from labkit import recipes
from labkit.training import cuda_graphs, train
from labkit.perf.timing import synchronize, timed
from labkit.run.profiles import lab_settings
from labkit.results import provenance, write_json
from labkit.labs.lab2_space import build_model

# The smallest and the largest of the Lab 2 space, and a middle one.
ARCHS = [dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=128, intermediate_size=512),
         dict(num_hidden_layers=4, num_attention_heads=4, hidden_size=256, intermediate_size=1024),
         dict(num_hidden_layers=8, num_attention_heads=8, hidden_size=512, intermediate_size=2048)]


def phases(s, dl, arch: dict, graphs: bool, eval_graphs: bool = False) -> dict:
    def build():
        torch.manual_seed(s["seed"])
        return build_model({"config": arch})

    build_s, model = timed(build, s["device"])
    train_s, fit = timed(lambda: train.train(model, dl.train, epochs=s["epochs"], lr=s["lr"], device=s["device"],
                                             seed=s["seed"], progress=False, graphs=graphs), s["device"])
    eval_s, ev = timed(lambda: train.evaluate(model, dl.test, device=s["device"], progress=False,
                                              graphs=graphs and eval_graphs), s["device"])
    return {"build_s": build_s, "train_s": train_s, "eval_s": eval_s, "trial_s": build_s + train_s + eval_s,
            "steps": fit["steps"],
            "accuracy": ev["accuracy"], "train_graphs": {k: fit.get(k) for k in ("graph_replays", "eager_calls",
                                                                                   "graph_failure")},
            "eval_graphs": {k: ev.get(k) for k in ("graph_replays", "eager_calls", "graph_failure")}}


def steady_profile(s, dl, arch: dict, graphs: bool, steps: int = 40) -> dict:
    """torch.profiler over ``steps`` training steps after the graphs are captured."""
    torch.manual_seed(s["seed"])
    model = build_model({"config": arch})
    sub = list(itertools.islice(itertools.cycle(dl.train), steps + 5))
    fit = train.train(model, sub[:5], epochs=1, lr=s["lr"], device=s["device"], progress=False, graphs=graphs)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    synchronize(s["device"])
    start = time.perf_counter()
    with profile(activities=acts) as prof:
        train.train(model, sub[5:], epochs=1, lr=s["lr"], device=s["device"], progress=False, graphs=graphs)
        synchronize(s["device"])
    wall = time.perf_counter() - start
    events = prof.key_averages()
    host = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:15]
    gpu_us = sum(getattr(e, "self_device_time_total", 0) for e in events)
    kernels = sorted((e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.self_device_time_total, reverse=True)[:15]
    return {"steps": steps, "wall_ms_per_step": 1e3 * wall / steps, "gpu_kernel_ms_per_step": gpu_us / 1e3 / steps,
            "warmup_fit": {k: fit.get(k) for k in ("graph_replays", "eager_calls")},
            "top_host_ops": [{"op": e.key, "calls": e.count, "self_cpu_ms": e.self_cpu_time_total / 1e3}
                             for e in host],
            # the GPU's own time per kernel over the profiled steps: what a trial's GPU work is made of
            "top_kernels": [{"kernel": e.key[:120], "calls": e.count, "ms_per_step": e.self_device_time_total / 1e3 / steps}
                            for e in kernels]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="auto")
    ap.add_argument("--archs", default="0,1,2", help=f"indices into ARCHS ({len(ARCHS)})")
    ap.add_argument("--graphs", default="on,off")
    ap.add_argument("--eval-graphs", action="store_true", help="graphs=on also graphs the evaluation")
    ap.add_argument("--out", default="benchmarks/training/lab2_trial_profile.json")
    args = ap.parse_args(argv)
    s = lab_settings("lab2_search", args.profile)
    dl = recipes.shared_loaders(s)
    report = {"what": "Lab 2 trial phases and steady-step profile", "profile": s["profile"],
              "provenance": provenance(), "rows": []}
    for i, g in itertools.product([int(a) for a in args.archs.split(",")], args.graphs.split(",")):
        graphs = {"on": True, "off": False}[g]
        if graphs and not torch.cuda.is_available():
            continue
        arch = ARCHS[i]
        row = {"arch": arch, "graphs": graphs, "phases": phases(s, dl, arch, graphs, args.eval_graphs),
               "eval_graphs": graphs and args.eval_graphs,
               "steady": steady_profile(s, dl, arch, graphs)}
        report["rows"].append(row)
        p, st = row["phases"], row["steady"]
        print(f"arch {i} graphs={g}: trial {p['trial_s']:.2f} s (build {p['build_s']:.2f}, train {p['train_s']:.2f}, "
              f"eval {p['eval_s']:.2f}); steady {st['wall_ms_per_step']:.2f} ms/step wall, "
              f"{st['gpu_kernel_ms_per_step']:.2f} ms/step GPU; acc {p['accuracy']:.4f}", flush=True)
        print("   host: " + ", ".join(f"{o['op']} {o['self_cpu_ms']:.1f} ms/{o['calls']}" for o in st["top_host_ops"][:8]),
              flush=True)
        for k in st["top_kernels"][:10]:
            print(f"   gpu {k['ms_per_step']:.3f} ms/step x{k['calls']}  {k['kernel'][:100]}", flush=True)
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
