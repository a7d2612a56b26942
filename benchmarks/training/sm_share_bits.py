"""Does a Lab 2 trial's result depend on how much of the GPU its process may use? One architecture trained and
evaluated as the search does (full profile, graphed step, one epoch, training seed ``--seed``), each time in a fresh
process: without MPS, under a private MPS daemon with all SMs and with ``--share`` percent of them (what the
search's workers get), and without MPS after another architecture trained first in the same process (history).

Why: the same architecture and seed trained 0.80148 in a single process without MPS (H200,
``lab2_attention_accuracy.json``) and 0.80348 in the search's 16 workers under MPS at 25%
(``search/search_throughput.json``, its seeded rows). Under an MPS share the device reports fewer multiprocessors, and
kernel heuristics (cuBLAS's, attention's) choose by that count, so the rounding, and so the trained weights, may
follow the share. Printed: each run's SM count, weight digest, last losses and accuracy, and which runs equal the first.

    python benchmarks/training/sm_share_bits.py [--arch 2] [--before 7] [--seed 0] [--share 25]
        [--out benchmarks/training/sm_share_bits.json]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch


def child(arch_index: int, before: int | None, seed: int) -> dict:
    """Train (``before`` first, if given) and evaluate ``arch_index`` in this process; what the parent compares."""
    import optuna

    from labkit import recipes
    from labkit.labs.lab2_objectives import NASObjective
    from labkit.labs.lab2_space import build_model, sample_architecture
    from labkit.run.profiles import lab_settings

    s = {**lab_settings("lab2_search", "full"), "seed": seed}
    params = json.load(open("benchmarks/search/search_throughput.json"))["archs"]
    trial = NASObjective(recipes.shared_loaders(s), s, use_cache=False)  # trains and evaluates as a trial does

    def run(index):
        model = build_model(sample_architecture(optuna.trial.FixedTrial(params[index]), True, s["space"]), seed=seed)
        return model, trial.fit(model)

    if before is not None:
        run(before)
    model, fit = run(arch_index)
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().float().cpu().numpy().tobytes())
    return {"sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
            "mps_share": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "weights_sha256": digest.hexdigest(),
            "loss_last": fit["train_loss_last"], "accuracy": trial.accuracy(model),
            "graph_failure": fit.get("graph_failure")}


def _spawn(args, env: dict, before: int | None) -> dict:
    cmd = [sys.executable, __file__, "--child", "--arch", str(args.arch), "--seed", str(args.seed)]
    if before is not None:
        cmd += ["--before", str(before)]
    done = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError(f"child {env} failed (rc {done.returncode}): {done.stderr[-2000:]}")
    return json.loads(lines[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", type=int, default=2, help="index into search/search_throughput.json's archs")
    ap.add_argument("--before", type=int, default=7, help="the architecture the history run trains first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--share", type=int, default=25, help="the MPS run's share of the SMs, percent")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default="benchmarks/training/sm_share_bits.json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA device: the question is how a GPU's share changes its kernels")
        return 2
    if args.child:
        print(json.dumps(child(args.arch, None if args.before < 0 else args.before, args.seed)), flush=True)
        return 0
    from labkit.results import provenance, write_json
    from labkit.search import mps

    runs = {"no MPS": _spawn(args, {}, -1)}
    with tempfile.TemporaryDirectory() as tmp, mps.daemon(Path(tmp), "on", share=100, clients="bit checks") as env:
        runs["MPS, 100% of the SMs"] = _spawn(args, {**env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "100"}, -1)
        runs[f"MPS, {args.share}% of the SMs"] = _spawn(
            args, {**env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(args.share)}, -1)
    runs[f"no MPS, after architecture {args.before}"] = _spawn(args, {}, args.before)
    first = runs["no MPS"]["weights_sha256"]
    out = {"what": "one Lab 2 trial's weights and accuracy by the process's GPU share and history", "arch": args.arch,
           "seed": args.seed, "runs": runs, "same_weights_as_no_mps": {k: r["weights_sha256"] == first
                                                                        for k, r in runs.items()},
           "provenance": provenance()}
    write_json(args.out, out)
    for name, r in runs.items():
        print(f"{name:34s} SMs {r['sm_count']:4d}  accuracy {r['accuracy']:.5f}  last loss {r['loss_last']:.5f}  "
              f"weights {r['weights_sha256'][:12]}  {'same' if r['weights_sha256'] == first else 'DIFFERENT'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
