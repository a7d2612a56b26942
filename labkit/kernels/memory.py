"""Memory of a model before and after MXINT8 conversion: bytes by kind of tensor, and measured GPU peaks.

``tensor_bytes`` counts parameters and buffers by kind (works on the meta device, so sizes of models too
large to build here cost nothing); ``measure`` builds a model on the GPU, optionally converts it, and
reads ``torch.cuda.memory_allocated`` (resident) and ``max_memory_allocated`` during one inference forward
(peak); ``compare`` does both for fp32 and MXINT8 and puts the theory beside them.
"""
from __future__ import annotations

import gc
from typing import Callable

import torch
from torch import nn

from .packed_linear import MXINT8Linear, convert_to_mxint8

KINDS = ("mxint8 weights", "linear weights", "embeddings", "other")


def theoretical_saving(group_size: int = 32, from_bits: int = 32, mantissa_bits: int = 8) -> float:
    """Fraction saved on a quantized tensor: mantissas plus one 8-bit exponent per group,
    ``(from_bits - (mantissa_bits + 8/group_size)) / from_bits``."""
    return (from_bits - (mantissa_bits + 8 / group_size)) / from_bits


def tensor_bytes(model: nn.Module) -> dict:
    """Bytes of ``model``'s parameters and buffers by kind (see ``KINDS``), plus ``total``; shared tensors
    count once. "other": biases, LayerNorm, position/type tables, anything else."""
    out = dict.fromkeys(KINDS, 0)
    seen: set[int] = set()
    for module in model.modules():
        for name, t in list(module.named_parameters(recurse=False)) + list(module.named_buffers(recurse=False)):
            if t is None or id(t) in seen:
                continue
            seen.add(id(t))
            size = t.numel() * t.element_size()
            if isinstance(module, MXINT8Linear) and name in ("mantissa", "exponent"):
                out["mxint8 weights"] += size
            elif isinstance(module, nn.Linear) and name == "weight":
                out["linear weights"] += size
            elif isinstance(module, nn.Embedding) and name == "weight":
                out["embeddings"] += size
            else:
                out["other"] += size
    out["total"] = sum(out[k] for k in KINDS)
    return out


def largest_linear(model: nn.Module) -> int:
    """Elements of the largest Linear weight (its dequantized temporaries dominate the MXINT8 overhead)."""
    sizes = [m.out_features * m.in_features for m in model.modules() if isinstance(m, (nn.Linear, MXINT8Linear))]
    return max(sizes, default=0)


def _free() -> None:
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def _warm_up(dev: torch.device) -> None:
    """Allocate the per-process CUDA state a first forward would (cuBLAS workspaces for fp32 and bf16
    matmuls, attention), so that it lands in the baseline of every measurement and not in the first one."""
    a = torch.ones(64, 64, device=dev)
    for dtype in (torch.float32, torch.bfloat16):
        (a.to(dtype) @ a.to(dtype)).sum().item()
        q = torch.ones(1, 2, 16, 32, device=dev, dtype=dtype)
        torch.nn.functional.scaled_dot_product_attention(q, q, q).sum().item()


def measure(build: Callable[[], nn.Module], group_size: int | None, batch_size: int, seq_len: int,
            filter_fn=None, device: str = "cuda", seed: int = 0) -> dict:
    """Build a model on ``device`` (``build`` returns it there or on the CPU), convert it to MXINT8 if
    ``group_size`` is given, then measure resident bytes and the peak of one inference forward on random
    token ids (fp32 activations, no autocast). CUDA only: CPU memory has no such counters."""
    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        raise RuntimeError(f"memory.measure needs a CUDA device (got device={device!r}, "
                           f"cuda available: {torch.cuda.is_available()})")
    _warm_up(dev)
    _free()
    start = torch.cuda.memory_allocated(dev)
    model = build().to(dev).eval()
    report = convert_to_mxint8(model, group_size, filter_fn) if group_size else None
    _free()
    resident = torch.cuda.memory_allocated(dev) - start
    gen = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (batch_size, seq_len), generator=gen).to(dev)
    mask = torch.ones_like(ids)
    torch.cuda.reset_peak_memory_stats(dev)
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=mask).logits
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated(dev) - start
    result = {"format": f"mxint8 g{group_size}" if group_size else "fp32", "bytes": tensor_bytes(model),
              "resident": resident, "peak": peak, "peak_minus_resident": peak - resident,
              "largest_linear": largest_linear(model), "logits_finite": bool(torch.isfinite(logits).all()),
              "converted_layers": len(report["converted"]) if report else 0,
              "skipped_layers": report["skipped"] if report else {}}
    del model, logits, ids, mask
    _free()
    return result


def compare(build: Callable[[], nn.Module], group_size: int = 32, batch_size: int = 8, seq_len: int = 128,
            filter_fn=None, device: str = "cuda") -> dict:
    """fp32 vs MXINT8 (same architecture, built twice): bytes, resident and peak, savings, and theory."""
    fp32 = measure(build, None, batch_size, seq_len, None, device)
    packed = measure(build, group_size, batch_size, seq_len, filter_fn, device)
    quantized_share = fp32["bytes"]["linear weights"] and \
        (fp32["bytes"]["linear weights"] - packed["bytes"]["linear weights"]) / fp32["bytes"]["total"]
    return {
        "fp32": fp32, "mxint8": packed, "group_size": group_size, "batch_size": batch_size, "seq_len": seq_len,
        "theory_quantized_tensors": theoretical_saving(group_size),
        # what the theory predicts for the whole model once only the converted tensors shrink
        "theory_whole_model": quantized_share * theoretical_saving(group_size),
        "quantized_share_of_fp32_bytes": quantized_share,
        "saving_parameter_bytes": 1 - packed["bytes"]["total"] / fp32["bytes"]["total"],
        "saving_resident": 1 - packed["resident"] / fp32["resident"],
        "saving_peak": 1 - packed["peak"] / fp32["peak"],
    }
