"""What determinism costs a Lab 2 training step's attention: SDPA forward + backward per backend, on the shapes of
the throughput benchmark's architectures (batch 32 x 256 tokens, IMDb-like padding, dropout 0.1, bf16).

Training runs with ``torch.use_deterministic_algorithms(True)`` (labkit.training.determinism), under which
memory-efficient attention's backward takes its deterministic path and cuDNN's attention is left out. Rows:

    efficient, deterministic   what a Lab 2 step runs (padding mask as HF BERT passes it: [B, 1, L, L] bool)
    efficient                  the same kernel, deterministic mode off
    cudnn                      cuDNN's attention with the mask (no deterministic backward)
    flash, no mask             flash attention without the padding mask (deterministic): what attention costs
                               where padded keys need no mask (e.g. unpadded, variable-length batches)

Each call is timed inside a CUDA graph (labkit.perf.timing.graph_time): kernels only, no Python or autograd
launch cost between them, as in the graphed training step.

    python benchmarks/training/lab2_attention_bwd.py [--out benchmarks/training/lab2_attention_bwd.json]
"""
from __future__ import annotations

import argparse
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from labkit.perf.timing import graph_time
from labkit.training import determinism
from labkit.training.batches import imdb_like_lengths
from labkit.results import provenance, write_json

# (heads, hidden) of benchmarks/search/search_throughput.json's eight architectures
HEADS_HIDDEN = [(8, 192), (2, 128), (8, 512), (16, 256), (4, 384), (4, 256), (2, 192), (4, 128)]
VARIANTS = {"efficient, deterministic": (SDPBackend.EFFICIENT_ATTENTION, True, True),
            "efficient": (SDPBackend.EFFICIENT_ATTENTION, False, True),
            "cudnn": (SDPBackend.CUDNN_ATTENTION, False, True),
            "flash, no mask": (SDPBackend.FLASH_ATTENTION, True, False)}


def measure(heads: int, hidden: int, batch: int, seq: int, variant: str, args) -> dict:
    backend, det, masked = VARIANTS[variant]
    gen = torch.Generator().manual_seed(0)
    d = hidden // heads
    # [B, L, h, d] viewed as [B, h, L, d], as BERT's self-attention hands them to SDPA
    q, k, v = (torch.randn(batch, seq, heads, d, generator=gen).to("cuda", torch.bfloat16).transpose(1, 2)
               .requires_grad_() for _ in range(3))
    n = imdb_like_lengths(batch, seq, gen).cuda()
    keep = torch.arange(seq, device="cuda")[None, :] < n[:, None]
    mask = keep[:, None, None, :].expand(batch, 1, seq, seq).contiguous() if masked else None
    grad = torch.randn(batch, heads, seq, d, generator=gen).to("cuda", torch.bfloat16)
    try:  # the deterministic kernels as training runs them, or none; the backend chosen inside
        with determinism.deterministic(torch.device("cuda"), "strict" if det else "off"), sdpa_kernel([backend]):
            def fwd():
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.1, scale=d ** -0.5)

            def step():
                return torch.autograd.grad(fwd(), (q, k, v), grad)

            step()  # fails here where the backend refuses these inputs
            with torch.no_grad():
                fwd_ms, _ = graph_time([fwd], replays=args.replays)
            total_ms, _ = graph_time([step], replays=args.replays)
    except RuntimeError as err:
        return {"heads": heads, "head_dim": d, "variant": variant, "error": str(err).splitlines()[0][:200]}
    # fwd_ms: the forward alone (no grad); bwd_ms: the rest of forward + backward
    return {"heads": heads, "head_dim": d, "variant": variant, "fwd_ms": fwd_ms, "fwd_bwd_ms": total_ms,
            "bwd_ms": total_ms - fwd_ms}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--replays", type=int, default=7)
    ap.add_argument("--out", default="benchmarks/training/lab2_attention_bwd.json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("lab2_attention_bwd.py times CUDA attention kernels: no CUDA device here")
    rows = []
    for heads, hidden in HEADS_HIDDEN:
        base = None
        for variant in VARIANTS:
            r = measure(heads, hidden, args.batch, args.seq, variant, args)
            base = r.get("fwd_bwd_ms") if variant == "efficient, deterministic" else base
            if base and "fwd_bwd_ms" in r:
                r["fwd_bwd_vs_deterministic"] = r["fwd_bwd_ms"] / base
            rows.append(r)
            print(f"{heads:>2} heads x {hidden // heads:>3}: {variant:<26} " + (
                f"fwd {r['fwd_ms']:.3f} ms, fwd+bwd {r['fwd_bwd_ms']:.3f} ms"
                f" ({r.get('fwd_bwd_vs_deterministic', 1):.2f}x the deterministic efficient)" if "fwd_ms" in r
                else f"error: {r['error']}"), flush=True)
    write_json(args.out, {"what": "Lab 2 attention: SDPA forward+backward per backend, deterministic or not",
                          "batch": args.batch, "seq": args.seq, "dropout_p": 0.1, "dtype": "bfloat16",
                          "rows": rows, "provenance": provenance()})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
