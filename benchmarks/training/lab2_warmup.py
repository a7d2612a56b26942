"""Does learning-rate warm-up keep a deeper Lab 2 model from collapsing to chance? A CPU-sized check.

Trains the same randomly initialised BERT (same seed, same batches) with and without warm-up on the quick
profile's IMDb subset and prints each test accuracy, the first and last training losses and whether the
model ended at chance (within two test-set standard errors of 0.5, as Lab 2's answers count it).

    python benchmarks/training/lab2_warmup.py [--layers 8] [--hidden 128] [--lr 2e-3] [--epochs 4]
        [--warmups 0,0.1] [--seeds 0] [--out benchmarks/training/lab2_warmup.json]
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from labkit import recipes
from labkit.labs.lab2_space import build_model
from labkit.run.profiles import lab_settings
from labkit.results import provenance, write_json
from labkit.readings.stats import accuracy_se
from labkit.training import train


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="quick", help="the lab2 profile whose data settings are used")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--epochs", type=float, default=4.0)
    ap.add_argument("--warmups", default="0,0.1", help="comma-separated warm-up fractions")
    ap.add_argument("--seeds", default="0", help="comma-separated training seeds")
    ap.add_argument("--out", default="benchmarks/training/lab2_warmup.json")
    args = ap.parse_args(argv)
    s = lab_settings("lab2_search", args.profile)
    dl = recipes.shared_loaders(s)
    arch = {"config": dict(num_hidden_layers=args.layers, num_attention_heads=args.heads, hidden_size=args.hidden,
                           intermediate_size=args.intermediate)}
    n = dl.sizes["test"]
    rows = []
    for seed in [int(x) for x in args.seeds.split(",")]:
        for warmup in [float(x) for x in args.warmups.split(",")]:
            model = build_model(arch, seed=seed)
            t = time.perf_counter()
            fit = train.train(model, dl.train, epochs=args.epochs, lr=args.lr, device=s["device"], seed=seed,
                              progress=False, warmup=warmup)
            ev = train.evaluate(model, dl.test, device=s["device"], progress=False)
            row = {"seed": seed, "warmup": warmup, "accuracy": ev["accuracy"], "positive_share": ev["positive_share"],
                   "at_chance": abs(ev["accuracy"] - 0.5) <= 2 * accuracy_se(0.5, n), "steps": fit["steps"],
                   "train_loss_first": fit["train_loss_first"], "train_loss_last": fit["train_loss_last"],
                   "seconds": time.perf_counter() - t}
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = {"what": "Lab 2: one architecture trained with and without learning-rate warm-up",
           "architecture": arch["config"], "lr": args.lr, "epochs": args.epochs, "n_train": dl.sizes["train"],
           "n_test": n, "max_length": s["max_length"], "batch_size": s["batch_size"], "threads": torch.get_num_threads(),
           "rows": rows, "provenance": provenance()}
    write_json(args.out, out)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
