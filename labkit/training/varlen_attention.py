"""A padded BERT batch's attention as variable-length flash attention: the training step's attention without a mask.

Why: SDPA with BERT's padding mask ([B, 1, L, L], as transformers hands it over) runs memory-efficient attention,
whose forward + backward on Lab 2's shapes (32 x 256 tokens, dropout 0.1, deterministic) took 2.1-3.7x as long as
flash attention's on the same tensors without a mask (H100, graph-timed: benchmarks/training/lab2_attention_bwd.json).
Flash attention takes no mask, but its variable-length form takes sequence boundaries instead: here each padded row
``i`` of the flattened [B * L] tokens is two segments, its ``len_i`` real tokens and its ``L - len_i`` padding (an
empty segment where the row is full). Real queries then attend exactly to their own real keys, as the mask made them;
padding attends to padding, which no real token reads (their keys are outside every real segment), so the loss and
every gradient of the real tokens are what the masked attention gives, up to rounding. No copy: q, k and v are views
of the projections' [B, L, h * d] outputs, and the segments are computed on the device (no host sync, so the step
stays capturable as a CUDA graph). Flash attention's backward is deterministic under
``torch.use_deterministic_algorithms``; its dropout draws other random numbers than memory-efficient attention's.

``LABKIT_ATTENTION``: ``sdpa`` (default: transformers' SDPA path, what every committed result trained with) or
``varlen`` (this, in the CUDA-graphed training step: ``labkit.training.train``). Right padding is required (labkit's
batches and BERT's tokenizer pad right); a mask that is not a prefix of ones fails a device-side assertion.
"""
from __future__ import annotations

import contextlib
import os

import torch

ENV = "LABKIT_ATTENTION"
CHOICES = ("sdpa", "varlen")
NAME = "labkit_varlen"  # the attention implementation's name in transformers' registries
CACHE_KEY = "varlen-attn"  # appended to the graphed step's cache key when on (labkit.training.train.step_key)
_SEGMENTS: dict | None = None  # inside use(): id(mask) -> (mask, its segments), so the layers of a step share them


def choice(env: dict | None = None) -> str:
    """``LABKIT_ATTENTION`` (default ``sdpa``); another value is an error naming the allowed ones."""
    value = (os.environ if env is None else env).get(ENV, "sdpa").strip() or "sdpa"
    if value not in CHOICES:
        raise ValueError(f"{ENV}={value!r}: allowed values are {', '.join(map(repr, CHOICES))}")
    return value


def segments(mask: torch.Tensor | None, batch: int, length: int, device) -> torch.Tensor:
    """int32 boundaries [2 * batch + 1] of each row's real tokens and its padding in the flattened batch: row ``i``
    spans ``[i * L, i * L + len_i)`` real and ``[i * L + len_i, (i + 1) * L)`` padding. ``mask``: [B, L] (True or 1
    = a real token, right-padded) or None (no padding)."""
    starts = torch.arange(batch, device=device, dtype=torch.int32) * length
    if mask is None:
        lens = torch.full((batch,), length, device=device, dtype=torch.int32)
    else:
        lens = mask.sum(-1, dtype=torch.int32)
        # right padding, checked on the device: every row is its first len_i tokens
        prefix = torch.arange(length, device=device)[None, :] < lens[:, None]
        torch._assert_async((prefix == mask.bool()).all(), "labkit varlen attention needs right-padded masks")
    ends = torch.full((1,), batch * length, device=device, dtype=torch.int32)
    return torch.cat([torch.stack([starts, starts + lens], 1).reshape(-1), ends])


def _flash_forward(q, k, v, cu, max_len, dropout_p, scale):
    if not q.is_cuda or q.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"{ENV}=varlen runs flash attention: CUDA bf16/fp16 tensors (autocast), got {q.dtype} on "
                         f"{q.device.type}; use {ENV}=sdpa there")
    out, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(
        q, k, v, cu, cu, max_len, max_len, dropout_p, False, False, scale=scale)
    return out, (lse, rng, unused)


def _flash_backward(grad, q, k, v, out, saved, cu, max_len, dropout_p, scale):
    lse, rng, unused = saved
    return torch.ops.aten._flash_attention_backward(grad.contiguous(), q, k, v, out, lse, cu, cu, max_len, max_len,
                                                    dropout_p, False, rng, unused, scale=scale)


class _Varlen(torch.autograd.Function):
    """Flash attention over ``cu``'s segments, with its own backward (q, k, v: [total, heads, head_dim])."""

    @staticmethod
    def forward(ctx, q, k, v, cu, max_len, dropout_p, scale):
        out, saved = KERNEL[0](q, k, v, cu, max_len, dropout_p, scale)
        ctx.save_for_backward(q, k, v, out, cu, *saved)
        ctx.args = (max_len, dropout_p, scale)
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, cu, *saved = ctx.saved_tensors
        max_len, dropout_p, scale = ctx.args
        dq, dk, dv = KERNEL[1](grad, q, k, v, out, tuple(saved), cu, max_len, dropout_p, scale)
        return dq, dk, dv, None, None, None, None


KERNEL = [_flash_forward, _flash_backward]  # (forward, backward); tests stand a reference in on a CPU


def attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
              **kwargs):
    """transformers' attention interface: ``query``/``key``/``value`` [B, h, L, d] (views of [B, L, h, d]),
    ``attention_mask`` the 2D padding mask (``mask``, registered with it) or None; returns ([B, L, h, d], None)."""
    if kwargs.get("output_attentions"):
        raise ValueError(f"{ENV}=varlen computes no attention weights (output_attentions=True asked for them)")
    batch, heads, length, dim = query.shape
    if key.shape[2] != length:
        raise ValueError(f"{ENV}=varlen: self-attention only (queries {length} tokens, keys {key.shape[2]})")
    q, k, v = (t.transpose(1, 2).reshape(batch * length, heads, dim) for t in (query, key, value))
    kind = query.device.type
    if torch.is_autocast_enabled(kind):  # as autocast casts SDPA's inputs (an Identity projection leaves fp32)
        q, k, v = (t.to(torch.get_autocast_dtype(kind)) for t in (q, k, v))
    cu = _segments_of(attention_mask, batch, length, query.device)
    scale = scaling if scaling is not None else dim ** -0.5
    out = _Varlen.apply(q, k, v, cu, length, float(dropout), float(scale))
    return out.view(batch, length, heads, dim), None


def _segments_of(attention_mask, batch: int, length: int, device) -> torch.Tensor:
    """``segments`` of a step's mask, computed once per ``use()`` block: every layer gets the same mask object."""
    key = (id(attention_mask), batch, length)
    hit = _SEGMENTS.get(key) if _SEGMENTS is not None else None
    if hit is not None and hit[0] is attention_mask:
        return hit[1]
    cu = segments(attention_mask, batch, length, device)
    if _SEGMENTS is not None:
        _SEGMENTS[key] = (attention_mask, cu)  # the mask kept alive, so its id names it while the block lasts
    return cu


def mask(batch_size=None, q_length=None, kv_length=None, q_offset=0, kv_offset=0, mask_function=None,
         attention_mask=None, **kwargs):
    """transformers' mask interface: the 2D padding mask as it came (None where there is none). Unlike the
    flash-attention mask of transformers, it never asks whether every token is real (a host sync that a CUDA-graph
    capture refuses): a batch without padding runs with empty padding segments."""
    if attention_mask is not None and attention_mask.shape[-1] != kv_length:
        raise ValueError(f"{ENV}=varlen: a mask of {attention_mask.shape[-1]} tokens for {kv_length} keys (a cache?)")
    return attention_mask


def register() -> None:
    """Add ``NAME`` to transformers' attention and mask registries (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if NAME not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping:
        AttentionInterface.register(NAME, attention)
        AttentionMaskInterface.register(NAME, mask)


def _configs(model: torch.nn.Module) -> list:
    """The transformers configs of ``model`` (a model, or a wrapper holding one, e.g. peft's)."""
    from transformers import PreTrainedModel

    seen = {}
    for m in model.modules():
        if isinstance(m, PreTrainedModel):
            seen.setdefault(id(m.config), m.config)
    return list(seen.values())


@contextlib.contextmanager
def use(model: torch.nn.Module, on: bool | None = None):
    """Inside: ``model``'s self-attention runs ``attention`` (its transformers config names ``NAME``), restored
    after. ``on`` None: ``choice() == "varlen"``. Yields whether it switched (a model without a transformers config
    runs as it is)."""
    global _SEGMENTS
    configs = _configs(model) if (on if on is not None else choice() == "varlen") else []
    if configs:
        register()
    before = [c._attn_implementation for c in configs]
    for c in configs:
        c._attn_implementation = NAME
    outer, _SEGMENTS = _SEGMENTS, ({} if configs else _SEGMENTS)
    try:
        yield bool(configs)
    finally:
        _SEGMENTS = outer
        for c, b in zip(configs, before):
            c._attn_implementation = b
