"""What CUDA graphs would save in the fine-tuning loops of Labs 0, 1 and 3, which train eagerly (only Lab 2's search
trains graphed): a quarter epoch of the full profile's fine-tuning (6,250 reviews' worth of random tokens at 512
tokens, batch 32: 195 steps) of MiniLM-L2, eager against ``graphs=None``, for each kind of model those labs train:
plain (SFT, its control, the fp32 control), weight-pruned (parametrized masks, Lab 1), fixed-point QAT at 8 bits
(Lab 1; Lab 3's formats train the same way) and LoRA through peft (Lab 0). Each twice, in alternation; plus one
evaluation of 25,000 x 512 tokens (batch 256).

    python benchmarks/training/finetune_graphs.py [--out benchmarks/training/finetune_graphs.json]

Graphed and eager steps do not give the same bits (dropout draws from another RNG stream in a graph): switching the
labs over changes their numbers, so it belongs with a from-scratch regeneration. Each kind's ``*_loss_last`` shows
that both paths are repeatable.
"""
from __future__ import annotations

import argparse
import copy
import statistics

import torch

from labkit import lora, models
from labkit.quant import fixed_point
from labkit.prune import prune
from labkit.perf.timing import timed
from labkit.quant import quantize
from labkit.recipes import freeze_embeddings
from labkit.results import write_json
from labkit.training import train
from labkit.training.batches import Packed, TensorBatches

ROWS, LENGTH, BATCH = 6250, 512, 32


def random_split(rows: int, device) -> Packed:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 20000, (rows, LENGTH), generator=g)
    cols = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    return Packed(cols, torch.randint(0, 2, (rows,), generator=g), torch.full((rows,), LENGTH)).to(device)


def kinds(base) -> dict:
    def qat():
        m = quantize(copy.deepcopy(base), fixed_point(8), inplace=True).model
        freeze_embeddings(m)
        return m

    return {"plain": lambda: copy.deepcopy(base),
            "pruned_l1_50": lambda: prune(base, {"weight": {"sparsity": 0.5, "method": "l1-norm"}}).model,
            "qat_int8": qat,
            "lora": lambda: lora.add_lora(copy.deepcopy(base), rank=6, alpha=1.0, dropout=0.5, seed=0)}


def timed_train(model, split, graphs) -> tuple[float, dict]:
    return timed(lambda: train.train(model, TensorBatches(split, BATCH, shuffle=True, seed=0), epochs=1.0, lr=5e-5,
                                     device="cuda", progress=False, graphs=graphs), "cuda")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/training/finetune_graphs.json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        ap.error("needs a CUDA GPU (CUDA graphs); this machine has none")
    split = random_split(ROWS, "cuda")
    base = models.load_model("minilm-l2", seed=0)
    rows = []
    for name, make in kinds(base).items():
        row = {"kind": name, "eager_s": [], "graphs_s": [], "eager_loss_last": [], "graphs_loss_last": []}
        for graphs in (False, None, False, None):  # alternated: neither path always runs first
            seconds, fit = timed_train(make(), split, graphs)
            path = "eager" if graphs is False else "graphs"
            row[f"{path}_s"].append(seconds)
            row[f"{path}_loss_last"].append(fit["train_loss_last"])
            if path == "graphs":
                row["graphs_ran"] = {k: fit.get(k) for k in ("graph_replays", "eager_calls", "graph_failure")}
        row["steps"] = fit["steps"]
        # the first graphed run of the process also pays one-time start-up (seen: 4.1 against 1.25 s), so the
        # ratio uses each path's faster run
        row["eager_over_graphs"] = min(row["eager_s"]) / min(row["graphs_s"])
        rows.append(row)
        print(f"{name:13s} eager {statistics.median(row['eager_s']):6.2f} s  graphed "
              f"{statistics.median(row['graphs_s']):6.2f} s  best eager/graphed {row['eager_over_graphs']:.2f}x  "
              f"{row['graphs_ran']}", flush=True)
    model = copy.deepcopy(base)
    test = random_split(25000, "cuda")
    evals = []
    for _ in range(2):
        evals.append(timed(lambda: train.evaluate(model, TensorBatches(test, 256), device="cuda", progress=False),
                           "cuda")[0])
    print(f"evaluation of 25,000 x {LENGTH} tokens: {min(evals):.2f} s", flush=True)
    write_json(args.out, {"rows": rows, "eval_25k_s": evals, "rows_per_epoch": ROWS, "length": LENGTH,
                          "batch": BATCH, "model": "minilm-l2"})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
