"""Does a fresh process train the same weights? SFT models (and a Lab 2 trial) trained in separate fresh
processes, their weight digests compared; and what strict determinism costs in seconds per SFT epoch.

Each job is a new interpreter with its own empty checkpoint cache, so every one trains from scratch:
  sft512/strict x2   Lab 0/1's SFT model (full profile: 25k reviews, 512 tokens), strict determinism
  sft512/off   x1    the same with no determinism context (every attention backend, cuDNN's included)
  sft256/strict x2   Lab 3's SFT model (256 tokens)
  lab2/strict  x2    one Lab 2 trial's training (2 x 128 from random init, CUDA graphs), its model's digest

    python benchmarks/training/determinism.py --out benchmarks/training/determinism.json [--profile full] [--jobs sft512 lab2]
    python benchmarks/training/determinism.py --profile smoke --device cpu      # the same on the CPU, in seconds
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# (job, lab whose settings train it, max_length override or None, determinism mode, repeats)
JOBS = {
    "sft512": [("lab0", None, "strict", 2), ("lab0", None, "off", 1)],
    "sft256": [("lab3", 256, "strict", 2)],
    "lab2": [("lab2", None, "strict", 2)],
}

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from labkit import recipes
from labkit.run import profiles
from labkit.training import train
lab, profile, device, max_length = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
over = {"device": device}
if max_length != "None":
    over["max_length"] = int(max_length)
s = profiles.lab_settings(lab, profile, **over)
if lab == "lab2":  # one trial's training: the search's smallest architecture, graphed on CUDA
    from labkit.labs.lab2_space import build_model
    dl = recipes.loaders(s)
    model = build_model({"config": {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 128,
                                    "intermediate_size": 512}}, seed=s["seed"])
    fit = train.train(model, dl.train, epochs=s["epochs"], lr=s["lr"], device=s["device"], seed=s["seed"],
                      progress=False, graphs=None)
    m = {**train.evaluate(model, dl.test, device=s["device"], progress=False), **fit}
    m["sft_digest"] = recipes.state_digest(model.cpu().state_dict())
else:
    model, m = recipes.finetuned_model(s, retrain=True)
keep = ("sft_digest", "accuracy", "train_seconds", "steps", "determinism", "eval_seconds")
print("RESULT " + json.dumps({**{k: m.get(k) for k in keep}, "process_seconds": time.perf_counter() - t0,
                              "max_length": s["max_length"], "train_size": s["train_size"]}))
"""


def run_job(lab: str, max_length, how: str, profile: str, device: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "LABKIT_CACHE_DIR": cache, "LABKIT_DETERMINISM": how}
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", CHILD, lab, profile, device, str(max_length)], cwd=ROOT,
                             env=env, capture_output=True, text=True)
    if out.returncode:
        return {"error": out.stderr[-3000:], "wall_seconds": time.perf_counter() - start}
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")][-1]
    warned = sorted({x.strip() for x in out.stderr.splitlines() if "determinis" in x.lower()})[:5]
    return {**json.loads(line[7:]), "wall_seconds": time.perf_counter() - start, "determinism_warnings": warned}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="full")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--jobs", nargs="+", default=list(JOBS), choices=list(JOBS))
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("determinism.json"))
    args = ap.parse_args(argv)
    from labkit.results import provenance, write_json

    prov = provenance()
    if os.environ.get("LABKIT_COMMIT"):
        prov["git_commit"] = os.environ["LABKIT_COMMIT"]
    runs = []
    for job in args.jobs:
        for lab, max_length, how, repeats in JOBS[job]:
            for i in range(repeats):
                r = {"job": job, "mode": how, "process": i, **run_job(lab, max_length, how, args.profile, args.device)}
                runs.append(r)
                print(json.dumps({k: v for k, v in r.items() if k != "error"}), r.get("error", "")[-800:], flush=True)
    summary = {}
    for job in args.jobs:
        strict = [r for r in runs if r["job"] == job and r["mode"] == "strict" and "sft_digest" in r]
        digests = sorted({r["sft_digest"] for r in strict})
        row = {"strict_processes": len(strict), "strict_digests": len(digests), "same_digest": len(digests) == 1
               and len(strict) >= 2, "strict_train_seconds": [round(r["train_seconds"], 2) for r in strict]}
        off = [r for r in runs if r["job"] == job and r["mode"] == "off" and "train_seconds" in r]
        if off and strict:
            row["off_train_seconds"] = [round(r["train_seconds"], 2) for r in off]
            row["strict_over_off"] = round(min(r["train_seconds"] for r in strict) /
                                           min(r["train_seconds"] for r in off), 3)
            row["off_same_digest_as_strict"] = off[0]["sft_digest"] in digests
        summary[job] = row
    result = {"provenance": prov, "profile": args.profile, "summary": summary, "runs": runs}
    print(json.dumps(summary, indent=1))
    write_json(args.out, result)
    print(f"wrote {args.out}")
    return 0 if all(v["same_digest"] for v in summary.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
