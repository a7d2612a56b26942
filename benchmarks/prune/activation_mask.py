"""L1 activation pruning on the CPU: a Lab 1 quick training step of the L1-pruned SFT-sized model
(minilm-l2 shape: 2 layers, 384 hidden, batch 32 x 128 tokens) with every layer ranking its own input (the
earlier path) against query, key and value sharing one ranking of their common input (the current one);
and above 50% sparsity the current path ranks the n - k kept entries instead of the k dropped ones (topk's
cost grows with what it returns). Both give the same masks (tests/test_prune.py). Printed: the ranking alone
and the step, measured in one run. (A kthvalue threshold was tried too: no faster inside a step.)

    python benchmarks/prune/activation_mask.py [--out benchmarks/prune/activation_mask.json]
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

from labkit import models, prune
from labkit.prune import mask_kernel
from labkit.perf.timing import time_calls
from labkit.results import write_json


def median_s(fn, reps: int) -> float:
    """Median seconds of ``reps`` calls after one untimed call (``time_calls``' steady state)."""
    return time_calls(fn, reps, warmup=0).steady_median


def earlier_forward(self, x):
    """The path before: topk + scatter in every layer, nothing shared."""
    if self.method == "random":
        return x * self.keep.to(x.device)
    k = round(self.sparsity * x.shape[-1])
    return x if k == 0 else x.scatter(-1, x.abs().topk(k, dim=-1, largest=False).indices, 0.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sparsities", type=float, nargs="+", default=[0.5, 0.9])
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("activation_mask.json"))
    args = ap.parse_args(argv)
    gen = torch.Generator().manual_seed(0)
    rows = []
    for features in (384, 1536):
        x = torch.randn(32, 128, features, generator=gen)
        for sparsity in (0.5, 0.9):
            k = round(sparsity * features)
            ms = median_s(lambda: x.scatter(-1, x.abs().topk(k, dim=-1, largest=False).indices, 0.0), args.reps)
            rows.append({"what": f"rank 32x128x{features} at {sparsity:.0%}, k smallest", "ms": ms * 1e3})
            ms = median_s(lambda: torch.where(mask_kernel.cpu_keep(x, k), x, 0.0), args.reps)
            rows.append({"what": f"rank 32x128x{features} at {sparsity:.0%}, numpy select", "ms": ms * 1e3})
        ms = median_s(lambda: x.abs().topk(features - k, dim=-1).indices, args.reps)
        rows.append({"what": f"rank 32x128x{features} at {sparsity:.0%}, n - k largest", "ms": ms * 1e3})

    torch.manual_seed(0)
    model = models.from_config(num_hidden_layers=2, hidden_size=384, num_attention_heads=12,
                               intermediate_size=1536, vocab_size=30522)
    batch = {"input_ids": torch.randint(1000, 2000, (32, 128), generator=gen), "labels": torch.randint(0, 2, (32,))}

    def plain():
        model(**batch).loss.backward()
        model.zero_grad(set_to_none=True)

    unpruned = median_s(plain, args.reps)
    for sparsity in args.sparsities:
        cfg = {"weight": {"sparsity": sparsity}, "activation": {"sparsity": sparsity}}
        pruned = prune.prune(model, cfg).model.train()
        opt = torch.optim.AdamW([p for p in pruned.parameters() if p.requires_grad], lr=1e-5)

        def step():
            pruned(**batch).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        now = median_s(step, args.reps)
        os.environ[mask_kernel.ENV] = "0"  # the topk path (the reference)
        try:
            topk = median_s(step, args.reps)
        finally:
            os.environ.pop(mask_kernel.ENV)
        current = prune.ActivationMask.forward
        prune.ActivationMask.forward = earlier_forward
        try:
            old = median_s(step, args.reps)
        finally:
            prune.ActivationMask.forward = current
        rows.append({"what": f"train step, {sparsity:.0%} L1 weights + activations", "earlier_ms": old * 1e3,
                     "topk_ms": topk * 1e3, "now_ms": now * 1e3, "speedup": old / now, "speedup_over_topk": topk / now,
                     "unpruned_ms": unpruned * 1e3})
    for r in rows:
        if "ms" in r:
            print(f"{r['what']:44s} {r['ms']:7.1f} ms")
        else:
            print(f"{r['what']:44s} earlier {r['earlier_ms']:7.1f} ms  topk {r['topk_ms']:7.1f} ms  now {r['now_ms']:7.1f} ms"
                  f"  {r['speedup']:.2f}x / {r['speedup_over_topk']:.2f}x  (unpruned forward+backward {r['unpruned_ms']:.1f} ms)")
    write_json(args.out, {"rows": rows, "reps": args.reps})
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
