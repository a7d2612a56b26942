"""Does an eager evaluation slow down after a graphed training run in the same process? Times the same
eager Lab 2 evaluation before, right after, and again after a graphed (or eager) training run.

    python benchmarks/training/graph_after_effect.py [--profile full] [--out ...json]
"""
from __future__ import annotations

import argparse
import gc
import time

import torch

from labkit import recipes
from labkit.training import train
from labkit.perf.timing import synchronize
from labkit.run.profiles import lab_settings
from labkit.results import write_json
from labkit.labs.lab2_space import build_model

ARCH = dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=128, intermediate_size=512)


def timed(fn):
    synchronize("cuda")
    t = time.perf_counter()
    out = fn()
    synchronize("cuda")
    return time.perf_counter() - t, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profile", default="full")
    ap.add_argument("--out", default="benchmarks/training/graph_after_effect.json")
    args = ap.parse_args(argv)
    s = lab_settings("lab2_search", args.profile)
    dl = recipes.shared_loaders(s)
    rows = []
    for graphs in (False, True, True):
        torch.manual_seed(0)
        model = build_model({"config": ARCH})
        ev = lambda: train.evaluate(model, dl.test, device="cuda", progress=False)  # noqa: E731
        row = {"train_graphs": graphs, "eval_before_s": timed(ev)[0]}
        row["train_s"], fit = timed(lambda: train.train(model, dl.train, epochs=s["epochs"], lr=s["lr"],
                                                        device="cuda", progress=False, graphs=graphs))
        row["eval_after_s"] = timed(ev)[0]
        row["eval_again_s"] = timed(ev)[0]
        del fit
        gc.collect()
        row["eval_after_gc_s"] = timed(ev)[0]
        rows.append(row)
        print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    write_json(args.out, {"rows": rows, "arch": ARCH})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
