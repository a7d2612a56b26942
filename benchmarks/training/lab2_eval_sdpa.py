"""Why a Lab 2 trial's evaluation takes seconds: the first evaluation of each architecture, per SDPA backend.

A Lab 2 trial builds a new architecture and evaluates 25,000 reviews in ~98 batches trimmed to their longest
review, so ~60 distinct batch shapes, each new to the process when the architecture (heads, head size) is new.
This times, per architecture: the first evaluation (cold), a second one (warm), with PyTorch's default choice
(cuDNN's SDPA on an H100) and with labkit's evaluation rule (``train.eval_attention``: no cuDNN, so PyTorch
picks memory-efficient attention), plus how far the two backends' logits lie apart.

    python benchmarks/training/lab2_eval_sdpa.py [--profile full] [--out benchmarks/training/lab2_eval_sdpa.json]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import time

import torch

from labkit import recipes
from labkit.training import train
from labkit.perf.timing import synchronize
from labkit.run.profiles import lab_settings
from labkit.results import provenance, write_json
from labkit.labs.lab2_space import build_model

ARCHS = [dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=128, intermediate_size=512),
         dict(num_hidden_layers=4, num_attention_heads=4, hidden_size=256, intermediate_size=1024),
         dict(num_hidden_layers=8, num_attention_heads=8, hidden_size=512, intermediate_size=2048)]


def timed_eval(model, dl, dev) -> tuple[float, dict]:
    synchronize(dev)
    t = time.perf_counter()
    ev = train.evaluate(model, dl.test, device=dev, progress=False)
    synchronize(dev)
    return time.perf_counter() - t, ev


def logits(model, batch, dev):
    with torch.no_grad(), train.autocast(torch.device(dev), True):
        return model(**batch).logits.float()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="full")
    ap.add_argument("--out", default="benchmarks/training/lab2_eval_sdpa.json")
    args = ap.parse_args(argv)
    s = lab_settings("lab2_search", args.profile)
    dl = recipes.shared_loaders(s)
    dev = str(train.pick_device(s["device"]))
    labkit_rule = train.eval_attention
    shapes = sorted({tuple(b["input_ids"].shape) for b in dl.test})
    out = {"what": "Lab 2 evaluation: cold/warm per SDPA backend", "n_test": dl.sizes["test"],
           "batch_shapes": len(shapes), "provenance": provenance(), "rows": []}
    print(f"{len(shapes)} batch shapes in the test set: {shapes[:3]} .. {shapes[-2:]}", flush=True)
    for i, arch in enumerate(ARCHS):
        torch.manual_seed(0)
        model = build_model({"config": arch}).to(dev).eval()
        row = {"arch": arch}
        for backend, rule in (("default", lambda device: contextlib.nullcontext()), ("no_cudnn", labkit_rule)):
            train.eval_attention = rule
            cold, ev = timed_eval(model, dl, dev)
            warm, ev2 = timed_eval(model, dl, dev)
            row[backend] = {"cold_s": cold, "warm_s": warm, "accuracy": ev["accuracy"], "loss": ev["loss"]}
            print(f"arch {i} {backend:9s} cold {cold:.2f} s  warm {warm:.2f} s  acc {ev['accuracy']:.5f}", flush=True)
        train.eval_attention = labkit_rule
        batch = next(iter(dl.test))
        batch = {k: v.to(dev) for k, v in batch.items()}
        a = logits(model, batch, dev)
        torch.backends.cuda.enable_cudnn_sdp(False)
        b = logits(model, batch, dev)
        torch.backends.cuda.enable_cudnn_sdp(True)
        row["max_logit_diff"] = float((a - b).abs().max())
        row["same_argmax_share"] = float((a.argmax(-1) == b.argmax(-1)).float().mean())
        out["rows"].append(row)
        write_json(args.out, out)
    print(json.dumps([{k: r[k] for k in ("max_logit_diff", "same_argmax_share")} for r in out["rows"]]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
