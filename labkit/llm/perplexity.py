"""Perplexity of a causal LM on held-out IMDb reviews, in fixed-length token blocks, with standard errors.

``text_blocks`` cuts token blocks of ``block_len`` from distinct reviews (each block the start of its own
review, so the blocks are independent draws and an SE over blocks means what it says). A block's NLL is the
mean negative log-likelihood of its ``block_len - 1`` next-token predictions (token t+1 from tokens 0..t: the
shift by one that ``model(ids, labels=ids).loss`` makes). Over k blocks of equal length the overall NLL (the
mean over every predicted token) is the mean of the block NLLs, perplexity is exp(NLL), and its standard error
is the delta method's: SE(NLL) = sd(block NLLs) / sqrt(k), SE(ppl) = ppl * SE(NLL).

``paired`` compares two models on the same blocks by the per-block differences of their NLLs (their mean and
SE: the pairing removes the blocks' own spread in difficulty, which dominates either model's SE).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .. import data

SPLITS = data.SPLITS


def _check_int(key: str, value, lo: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"{key}={value!r}: must be an int >= {lo}")


def review_text(text: str) -> str:
    """An IMDb review as plain text: its HTML line breaks (``<br />``) as newlines."""
    return text.replace("<br /><br />", "\n\n").replace("<br />", "\n")


def text_blocks(tokenizer, n_blocks: int, block_len: int, split: str = "test", seed: int = 0) -> torch.Tensor:
    """``(n_blocks, block_len)`` token ids (int64): the first ``block_len`` tokens of ``n_blocks`` distinct IMDb
    reviews of ``split`` (``labkit.data.load_imdb``: the offline parquet), taken in the order of a ``seed``-ed
    shuffle, skipping reviews shorter than ``block_len`` tokens. Tokens are the tokenizer's own, without special
    tokens. Use ``split="test"`` for evaluation and ``"train"`` for calibration (AWQ): they share no review."""
    _check_int("n_blocks", n_blocks, 1)
    _check_int("block_len", block_len, 2)
    if split not in SPLITS:
        raise ValueError(f"split={split!r}: allowed values are {', '.join(SPLITS)}")
    _check_int("seed", seed, 0)
    with data.quiet():
        reviews = data.load_imdb()[split].shuffle(seed=seed)
    blocks, seen, batch = [], 0, 64
    for start in range(0, len(reviews), batch):
        texts = [review_text(t) for t in reviews[start:start + batch]["text"]]
        seen += len(texts)
        for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]:
            if len(ids) >= block_len:
                blocks.append(ids[:block_len])
                if len(blocks) == n_blocks:
                    return torch.tensor(blocks, dtype=torch.long)
    raise ValueError(f"only {len(blocks)} of the {seen} {split} reviews have >= {block_len} tokens; "
                     f"ask for at most {len(blocks)} blocks or a shorter block_len")


def _check_blocks(blocks) -> torch.Tensor:
    if not isinstance(blocks, torch.Tensor) or blocks.dtype != torch.long or blocks.dim() != 2:
        raise TypeError("blocks must be an int64 tensor (n_blocks, block_len), as text_blocks returns, got "
                        + (f"{blocks.dtype} of shape {tuple(blocks.shape)}" if isinstance(blocks, torch.Tensor)
                           else type(blocks).__name__))
    if blocks.shape[0] < 1 or blocks.shape[1] < 2:
        raise ValueError(f"blocks of shape {tuple(blocks.shape)}: need >= 1 block of >= 2 tokens")
    return blocks


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def block_nll(model: torch.nn.Module, blocks: torch.Tensor, batch_size: int = 4, nll_fn=None) -> torch.Tensor:
    """Per block, the mean NLL (nats) of its ``block_len - 1`` next-token predictions, float64 ``(n_blocks,)``.

    Logits are taken in float32 whatever the model's dtype (a bf16 model's log-softmax in bf16 loses digits);
    ``batch_size`` blocks run per forward (the logits are ``batch_size x block_len x vocab`` floats).
    ``nll_fn(logits, ids)``: how a batch's logits become its block NLLs (default ``logits_nll``; the lab passes
    the student's)."""
    blocks = _check_blocks(blocks)
    _check_int("batch_size", batch_size, 1)
    device = _device(model)
    out = []
    for chunk in blocks.split(batch_size):
        ids = chunk.to(device)
        out.append((nll_fn or logits_nll)(model(input_ids=ids, use_cache=False).logits, ids).cpu())
    return torch.cat(out)


def logits_nll(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Per row of ``ids`` (``(n, L)``), the mean NLL of its ``L - 1`` next-token predictions from a causal LM's
    ``logits`` (``(n, L, vocab)``; position t predicts token t+1, so the last position predicts nothing), float64
    ``(n,)``. The log-softmax runs in float32 whatever the logits' dtype."""
    logits = logits[:, :-1].float()
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none")
    return nll.reshape(ids.shape[0], -1).double().mean(dim=1)


@dataclass(frozen=True)
class Perplexity:
    """exp(mean NLL over every predicted token) over equal-length blocks, with the delta method's SE."""

    ppl: float
    nll: float  # mean NLL per predicted token (nats)
    nll_se: float  # sd(block NLLs) / sqrt(k)
    ppl_se: float  # ppl * nll_se (delta method)
    per_block: tuple[float, ...]  # each block's mean NLL
    tokens: int  # predicted tokens: n_blocks * (block_len - 1)

    def summary(self) -> dict:
        return {"ppl": self.ppl, "ppl_se": self.ppl_se, "nll": self.nll, "nll_se": self.nll_se,
                "blocks": len(self.per_block), "tokens": self.tokens}


def from_block_nll(per_block, block_len: int) -> Perplexity:
    """``Perplexity`` of block NLLs (each over ``block_len - 1`` predictions, the same for every block)."""
    values = torch.as_tensor(per_block, dtype=torch.float64).reshape(-1)
    if values.numel() < 1:
        raise ValueError("no blocks: perplexity needs at least one block NLL")
    k = values.numel()
    nll = values.mean().item()
    se = values.std(unbiased=True).item() / math.sqrt(k) if k > 1 else math.nan
    ppl = math.exp(nll)
    return Perplexity(ppl, nll, se, ppl * se, tuple(values.tolist()), k * (block_len - 1))


def perplexity(model: torch.nn.Module, blocks: torch.Tensor, batch_size: int = 4, nll_fn=None) -> Perplexity:
    """The model's perplexity on ``blocks`` (``text_blocks``), per block and overall, with SEs over blocks
    (``nll_fn``: as ``block_nll``'s)."""
    blocks = _check_blocks(blocks)
    return from_block_nll(block_nll(model, blocks, batch_size, nll_fn), blocks.shape[1])


@dataclass(frozen=True)
class Paired:
    """a - b on the same blocks: per-block NLL differences, their mean and SE, and what they say of perplexity:
    ``ppl_ratio`` = exp(mean difference) = ppl_a / ppl_b exactly, and ``ppl_diff`` = ppl_a - ppl_b with its
    delta-method SE (sd over blocks of ppl_a * a_i - ppl_b * b_i, over sqrt(k))."""

    mean: float
    se: float
    per_block: tuple[float, ...]
    ppl_ratio: float
    ppl_diff: float
    ppl_diff_se: float

    def summary(self) -> dict:
        return {"nll_diff": self.mean, "nll_diff_se": self.se, "ppl_ratio": self.ppl_ratio,
                "ppl_diff": self.ppl_diff, "ppl_diff_se": self.ppl_diff_se, "blocks": len(self.per_block)}


def paired(nll_a, nll_b) -> Paired:
    """Paired comparison of two models' block NLLs (``block_nll`` or ``Perplexity.per_block``) on the same
    blocks, a - b; the SE is sd(differences) / sqrt(k) (NaN for one block)."""
    a = torch.as_tensor(getattr(nll_a, "per_block", nll_a), dtype=torch.float64).reshape(-1)
    b = torch.as_tensor(getattr(nll_b, "per_block", nll_b), dtype=torch.float64).reshape(-1)
    if a.numel() != b.numel() or a.numel() < 1:
        raise ValueError(f"paired needs the NLLs of the same blocks from both models: got {a.numel()} and "
                         f"{b.numel()} blocks")
    k = a.numel()
    d = a - b
    mean = d.mean().item()
    se = d.std(unbiased=True).item() / math.sqrt(k) if k > 1 else math.nan
    ppl_a, ppl_b = math.exp(a.mean().item()), math.exp(b.mean().item())
    lin = ppl_a * a - ppl_b * b  # the delta method's linearization of ppl_a - ppl_b, per block
    diff_se = lin.std(unbiased=True).item() / math.sqrt(k) if k > 1 else math.nan
    return Paired(mean, se, tuple(d.tolist()), math.exp(mean), ppl_a - ppl_b, diff_se)


def compare(model_a: torch.nn.Module, model_b: torch.nn.Module, blocks: torch.Tensor,
            batch_size: int = 4) -> Paired:
    """``paired`` of two models' block NLLs on the same ``blocks``."""
    blocks = _check_blocks(blocks)
    return paired(block_nll(model_a, blocks, batch_size), block_nll(model_b, blocks, batch_size))
