"""Greedy decoding with a KV cache, its speed against ``model.generate``, and the weight-bandwidth roofline.

``greedy_decode`` is the loop ``generate(do_sample=False)`` runs, written out: one forward over the prompt
(prefill) fills the cache, then each step feeds the last token alone, its keys and values appended to the
cache (transformers' ``DynamicCache``, or a preallocated ``StaticCache``), and takes the argmax. ``time_decode``
times it and ``generate`` with labkit's timer (``labkit.perf.timing``: first call, warm-up calls, steady calls,
the two loops' calls interleaved; CUDA synchronized around each call).

The roofline: at batch B a decode step reads every weight once (the KV cache and activations are small beside
the weights of a small batch and a short context), so a weight-bound step takes at least weight bytes /
memory bandwidth and yields B tokens: ``roofline_tokens_per_s = B * bandwidth / weight_bytes``. Fewer bits
per weight divide the bytes, and so the floor.
"""
from __future__ import annotations

import math

import torch
from transformers import DynamicCache, StaticCache

from ..perf.timing import Timing, check_device, time_call
from .group_quant import QuantReport

CACHES = ("dynamic", "static")


def _check_ids(input_ids) -> torch.Tensor:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype != torch.long or input_ids.dim() != 2 \
            or input_ids.shape[1] < 1:
        raise TypeError("input_ids must be an int64 tensor (batch, prompt_len >= 1) of one prompt length (no "
                        "padding), got " + (f"{input_ids.dtype} of shape {tuple(input_ids.shape)}"
                                            if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__))
    return input_ids


def _new_cache(model, kind: str, max_len: int):
    if kind == "dynamic":
        return DynamicCache(config=model.config)
    if kind == "static":
        return StaticCache(config=model.config, max_cache_len=max_len)
    raise ValueError(f"cache={kind!r}: allowed values are {', '.join(CACHES)}")


@torch.no_grad()
def greedy_decode(model: torch.nn.Module, input_ids: torch.Tensor, max_new_tokens: int, cache: str = "dynamic",
                  eos_token_id: int | None = None, pad_token_id: int | None = None) -> torch.Tensor:
    """The ``max_new_tokens`` tokens greedy decoding appends to ``input_ids`` (``(batch, new)``, int64).

    With ``eos_token_id``, a sequence that emits it is done: its later tokens are ``pad_token_id`` (default: the
    EOS id), and the loop stops once every sequence is done, as ``generate`` does (so the result may be shorter).
    Without it the loop always makes ``max_new_tokens`` tokens."""
    input_ids = _check_ids(input_ids)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens!r}: must be an int >= 1")
    device = next(model.parameters()).device
    ids = input_ids.to(device)
    past = _new_cache(model, cache, ids.shape[1] + max_new_tokens)
    pad = eos_token_id if pad_token_id is None else pad_token_id
    done = torch.zeros(ids.shape[0], dtype=torch.bool, device=device)
    out = []
    # logits of the last position only (as generate asks): the prefill skips the LM head over the prompt
    logits = model(input_ids=ids, past_key_values=past, use_cache=True, logits_to_keep=1).logits
    for step in range(max_new_tokens):
        token = logits[:, -1].argmax(dim=-1)
        if eos_token_id is not None:
            token = torch.where(done, torch.full_like(token, pad), token)
            done = done | (token == eos_token_id)
        out.append(token)
        if step == max_new_tokens - 1 or (eos_token_id is not None and bool(done.all())):
            break
        logits = model(input_ids=token[:, None], past_key_values=past, use_cache=True, logits_to_keep=1).logits
    return torch.stack(out, dim=1)


def generate_greedy(model: torch.nn.Module, input_ids: torch.Tensor, max_new_tokens: int, **kwargs) -> torch.Tensor:
    """``model.generate(do_sample=False)``'s new tokens for ``input_ids`` (the reference ``greedy_decode`` matches)."""
    input_ids = _check_ids(input_ids)
    device = next(model.parameters()).device
    ids = input_ids.to(device)
    with torch.no_grad():
        full = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                              max_new_tokens=max_new_tokens, **kwargs)
    return full[:, ids.shape[1]:]


def time_decode(model: torch.nn.Module, input_ids: torch.Tensor, new_tokens: int = 32, repeats: int = 3,
                warmup: int = 1, cache: str = "dynamic", device: str | torch.device | None = None) -> dict:
    """Milliseconds per token of ``greedy_decode`` and of ``generate(do_sample=False)``, each making exactly
    ``new_tokens`` tokens per call (EOS ignored: ``min_new_tokens`` for ``generate``) after the prompt's prefill.

    ``1 + warmup + repeats`` rounds, each timing one call of either loop in turn on ``time_call``'s clock
    (``labkit.perf.timing``: the device synchronized around the call), so a change of the machine's load falls
    on both alike; each loop's calls form a ``Timing`` (first, warm-up, steady), and the steady calls' median
    over ``new_tokens`` is its ms per token. The prefill is inside each call: one forward over the prompt, as a
    chat turn has."""
    dev = check_device(device if device is not None else next(model.parameters()).device)
    ids = _check_ids(input_ids)
    for key, value, lo in (("new_tokens", new_tokens, 1), ("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise ValueError(f"{key}={value!r}: must be an int >= {lo}")
    pad = getattr(model.generation_config, "pad_token_id", None)
    runs = {
        "decode": lambda: greedy_decode(model, ids, new_tokens, cache=cache),
        "generate": lambda: generate_greedy(model, ids, new_tokens, min_new_tokens=new_tokens,
                                            pad_token_id=pad),
    }
    out = {"new_tokens": new_tokens, "batch": ids.shape[0], "prompt_len": ids.shape[1], "cache": cache,
           "device": str(dev)}
    return {**out, **time_loops(runs, new_tokens, dev, repeats, warmup)}


def time_loops(loops: dict, new_tokens: int, device: str | torch.device, repeats: int = 3, warmup: int = 1) -> dict:
    """``{name}_ms_per_token`` and ``{name}_timing`` of each loop in ``loops`` (name -> a call making
    ``new_tokens`` tokens per sequence): ``1 + warmup + repeats`` rounds, each timing one call of every loop in
    turn on ``time_call``'s clock, so a change of the machine's load falls on all alike; ms per token is the
    steady calls' median over ``new_tokens``."""
    dev = check_device(device)
    times = {key: [] for key in loops}
    for _ in range(1 + warmup + repeats):
        for key, fn in loops.items():
            times[key].append(time_call(fn, dev))
    out = {}
    for key, per_call in times.items():
        cpu = dev.type == "cpu"  # time_call: perf_counter on a CPU, CUDA events on a GPU
        t = Timing(device=str(dev), warmup=warmup, per_call=per_call, per_call_wall=list(per_call) if cpu else [],
                   clock="perf_counter" if cpu else "cuda_event")
        out[f"{key}_ms_per_token"] = t.steady_median / new_tokens * 1e3
        out[f"{key}_timing"] = t.summary()
    return out


def weight_bytes(model: torch.nn.Module, report: QuantReport | None = None) -> int:
    """Bytes a decode step reads for the weights: every parameter once (a tied one once), at its dtype's width,
    or, for the layers a ``QuantReport`` quantized, at its stored bits per weight (scales included)."""
    quantized = {}
    if report is not None:
        for name, layer in report.layers.items():
            module = model.get_submodule(name)
            quantized[id(module.weight)] = layer.bits_per_weight
    total_bits = 0.0
    for p in model.parameters():  # unique parameters: a tied weight appears once
        bits = quantized.get(id(p), torch.finfo(p.dtype).bits if p.is_floating_point() else p.element_size() * 8)
        total_bits += bits * p.numel()
    return int(math.ceil(total_bits / 8))


def roofline_tokens_per_s(weight_bytes: float, bandwidth_bytes_per_s: float, batch: int = 1) -> float:
    """The weight-bound ceiling of decoding: ``batch`` tokens per step, a step no faster than reading
    ``weight_bytes`` at ``bandwidth_bytes_per_s``."""
    for key, value in (("weight_bytes", weight_bytes), ("bandwidth_bytes_per_s", bandwidth_bytes_per_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
            raise ValueError(f"{key}={value!r}: must be a positive finite number")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch={batch!r}: must be an int >= 1")
    return batch * bandwidth_bytes_per_s / weight_bytes
