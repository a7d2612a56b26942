"""Where varlen attention's accuracy shift comes from: Lab 2 architectures trained as the search trains them (full
profile, graphed step), with ``LABKIT_ATTENTION`` sdpa and varlen, over training seeds, at the model's attention
dropout and with attention dropout off. If the two attentions agree with attention dropout off but not with it on,
the shift lives in how the two kernels drop attention probabilities; if they differ either way, elsewhere.

    python benchmarks/training/lab2_attention_accuracy.py [--archs 2,5] [--seeds 3] [--attn-dropout 0.1,0.0]
        [--out benchmarks/training/lab2_attention_accuracy.json]

``--archs``: indices into ``benchmarks/search/search_throughput.json``'s architectures (the rows of its
``accuracy_comparisons``). The sdpa runs at dropout 0.1 train what that file's seeded rows trained.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics

import torch


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archs", default="2,5")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--attn-dropout", default="0.1,0.0")
    ap.add_argument("--out", default="benchmarks/training/lab2_attention_accuracy.json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA device: varlen attention runs flash attention")
        return 2
    import optuna

    from labkit import recipes
    from labkit.labs.lab2_objectives import NASObjective
    from labkit.labs.lab2_space import build_model, sample_architecture
    from labkit.results import provenance, write_json
    from labkit.run.profiles import lab_settings
    from labkit.training import varlen_attention

    s = lab_settings("lab2_search", "full")
    params = json.load(open("benchmarks/search/search_throughput.json"))["archs"]
    out = {"what": "Lab 2 accuracy per architecture and training seed, attention sdpa vs varlen, attention dropout "
                   "on and off", "settings": {k: s[k] for k in ("epochs", "lr", "batch_size", "seed")},
           "rows": [], "provenance": provenance()}
    for index in map(int, args.archs.split(",")):
        arch = sample_architecture(optuna.trial.FixedTrial(params[index]), True, s["space"])
        for p in map(float, args.attn_dropout.split(",")):
            acc = {"sdpa": [], "varlen": []}
            for k in range(args.seeds):
                seeded = {**s, "seed": s["seed"] + k}  # a trial's training seed, as the search's seeded studies set it
                trial = NASObjective(recipes.shared_loaders(seeded), seeded, use_cache=False)
                for attention in acc:
                    os.environ[varlen_attention.ENV] = attention
                    model = build_model(arch, seed=seeded["seed"], attention_probs_dropout_prob=p)
                    fit = trial.fit(model)
                    acc[attention].append(trial.accuracy(model))
                    assert fit.get("graph_failure") is None, fit.get("graph_failure")
            diffs = [a - b for a, b in zip(acc["varlen"], acc["sdpa"])]
            row = {"arch": index, "config": arch["config"], "attention_dropout": p, "accuracy": acc,
                   "varlen_minus_sdpa": diffs, "mean_difference": statistics.mean(diffs)}
            out["rows"].append(row)
            write_json(args.out, out)
            print(f"arch {index} {arch['config']}, attention dropout {p}: sdpa {acc['sdpa']}, varlen {acc['varlen']}; "
                  f"varlen - sdpa per seed {[round(d, 4) for d in diffs]}", flush=True)
    os.environ.pop(varlen_attention.ENV, None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
