"""Where one Lab 2 trial's GPU memory goes: the trial alone, phase by phase (each training loop and evaluation),
under allocator and graph variants, each in its own process (the allocator is configured at CUDA's start).

Lab 2's search trials recorded reserved peaks of 12-63 GiB (``gpu_peak_gib`` in ``figures/lab2/studies.journal.xz``)
while 14 of them share one GPU, and a few ran out of memory. The full profile takes the Task 2 trial with the largest
recorded peak; other profiles a seeded sample of their space. Each phase records its peak allocated and reserved
memory (reset before it), so allocated (live tensors) and reserved (the caching allocator's segments) can be told
apart; the variants say what graphs and ``expandable_segments`` change.

    python benchmarks/search/trial_memory.py [--profile full] [--mode compress+train]
        [--variants graphs,eager,graphs+expandable] [--out benchmarks/search/trial_memory.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "figures" / "lab2" / "studies.journal.xz"
# variant -> environment of its process
VARIANTS = {
    "graphs": {},
    "eager": {"LABKIT_CUDA_GRAPHS": "0"},
    "graphs+expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
}
GIB = 2 ** 30
# a compress+train trial's calls, in order (a shorter mode stops earlier)
PHASE_NAMES = {"train": ("train", "post-train", "control train"),
               "evaluate": ("eval trained", "eval compressed", "eval post-trained", "eval control")}


def heaviest_trial(mode: str) -> tuple[dict, float]:
    """Parameters and recorded peak (GiB) of the committed journal's Task 2 trial with the largest peak."""
    import optuna

    from labkit.search.study_storage import open_storage

    storage = open_storage(f"journal:{COMMITTED}")
    best = None
    for summary in optuna.get_all_study_summaries(storage):
        if f"-cas-{mode}-" not in summary.study_name:
            continue
        for t in optuna.load_study(study_name=summary.study_name, storage=storage).get_trials(deepcopy=False):
            peak = t.user_attrs.get("gpu_peak_gib")
            if t.state.name == "COMPLETE" and peak is not None and (best is None or peak > best[1]):
                best = (t.params, peak)
    if best is None:
        raise SystemExit(f"trial_memory: no completed {mode!r} trial with a recorded gpu_peak_gib in {COMMITTED}")
    return best


class Phases:
    """Wraps ``train.train`` and ``train.evaluate`` so that each call is a phase with its time and, on CUDA,
    its peak allocated and reserved memory (peaks reset before the call)."""

    def __init__(self, cuda: bool):
        self.cuda, self.rows, self._n = cuda, [], {}

    def wrap(self, fn, kind: str):
        import torch

        from labkit.perf.timing import timed

        def run(*args, **kwargs):
            self._n[kind] = self._n.get(kind, 0) + 1
            if self.cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            seconds, out = timed(lambda: fn(*args, **kwargs), "cuda" if self.cuda else "cpu")
            row = {"phase": PHASE_NAMES[kind][self._n[kind] - 1]}
            if self.cuda:
                row.update(peak_allocated_gib=torch.cuda.max_memory_allocated() / GIB,
                           peak_reserved_gib=torch.cuda.max_memory_reserved() / GIB,
                           reserved_after_gib=torch.cuda.memory_reserved() / GIB)
            row["seconds"] = seconds
            self.rows.append(row)
            return out

        return run


def one_variant(profile: str, mode: str, params: dict) -> dict:
    """Run the trial here (this process's environment is the variant) and return its phases."""
    import optuna
    import torch

    from labkit import recipes
    from labkit.labs import lab2
    from labkit.labs.lab2_objectives import NASObjective
    from labkit.run.profiles import lab_settings
    from labkit.training import train

    s = lab_settings("lab2_search", profile)
    cuda = train.pick_device(s["device"]).type == "cuda"
    phases = Phases(cuda)
    quant, prune = lab2.compression_configs(s)
    objective = NASObjective(recipes.shared_loaders(s), s, mode=mode, quant=quant, prune=prune, use_cache=False)
    real = train.train, train.evaluate
    train.train, train.evaluate = phases.wrap(real[0], "train"), phases.wrap(real[1], "evaluate")
    trial = optuna.trial.FixedTrial(params)
    try:
        value = objective(trial)
    finally:
        train.train, train.evaluate = real
    out = {"value": value, "phases": phases.rows, "trial_seconds": trial.user_attrs.get("trial_seconds")}
    if cuda:
        stats = torch.cuda.memory_stats()
        out.update(device=torch.cuda.get_device_name(), alloc_retries=stats.get("num_alloc_retries"),
                   peak_allocated_gib=max(r["peak_allocated_gib"] for r in phases.rows),
                   peak_reserved_gib=max(r["peak_reserved_gib"] for r in phases.rows))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="full")
    parser.add_argument("--mode", default="compress+train")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("trial_memory.json"))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one variant, print its JSON
    args = parser.parse_args(argv)
    if args.one:
        print("RESULT " + json.dumps(one_variant(args.profile, args.mode, json.loads(args.one))))
        return 0
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown {unknown}; allowed: {', '.join(VARIANTS)}")
    from labkit.labs.lab2_objectives import MODES
    from labkit.run.profiles import lab_settings
    from labkit.results import provenance, write_json

    if args.mode not in MODES:
        raise SystemExit(f"--mode {args.mode!r}: allowed values are {', '.join(MODES)}")
    if args.profile == "full":
        params, recorded = heaviest_trial(args.mode)
    else:  # a seeded sample of the profile's space, as task2_wall.py starts
        spec = importlib.util.spec_from_file_location("task2_wall", Path(__file__).with_name("task2_wall.py"))
        task2_wall = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(task2_wall)
        params, recorded = task2_wall.start_params(lab_settings("lab2_search", args.profile)), None
    rows = []
    for name in variants:
        env = {**os.environ, **VARIANTS[name]}
        done = subprocess.run([sys.executable, __file__, "--profile", args.profile, "--mode", args.mode,
                               "--one", json.dumps(params)], env=env, capture_output=True, text=True, check=False)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        if done.returncode or not lines:
            raise SystemExit(f"trial_memory: variant {name} failed (rc {done.returncode}):\n{done.stderr[-3000:]}")
        rows.append({"variant": name, "env": VARIANTS[name], **json.loads(lines[-1][len("RESULT "):])})
        r = rows[-1]
        print(f"{name}: value {r['value']:.4f}, " + (f"peak allocated {r['peak_allocated_gib']:.1f} GiB, reserved "
                                                    f"{r['peak_reserved_gib']:.1f} GiB" if "peak_reserved_gib" in r
                                                    else "no CUDA"), flush=True)
    result = {"benchmark": "trial_memory", "profile": args.profile, "mode": args.mode, "params": params,
              "recorded_peak_gib": recorded, "rows": rows, "provenance": provenance()}
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
