"""Capture a Hugging Face classifier as an FX ``GraphModule`` for a chosen set of inputs.

transformers 5 removed its own FX tracer (``transformers.utils.fx``) and BERT's forward defeats
``torch.fx.symbolic_trace``; ``torch.export`` traces it at the ATen level and ``.module()`` hands back an
ordinary ``torch.fx.GraphModule`` whose placeholders are exactly the inputs given.
"""
from __future__ import annotations

import inspect
from typing import Sequence

import torch

DEFAULT_INPUTS = ("input_ids", "attention_mask", "labels")


def forward_inputs(model: torch.nn.Module) -> list[str]:
    """Names ``model.forward`` accepts (what a capture may be asked for)."""
    return [name for name, p in inspect.signature(model.forward).parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def example_inputs(model: torch.nn.Module, names: Sequence[str] = DEFAULT_INPUTS, batch: int = 2,
                   seq_len: int = 16, seed: int = 0) -> dict[str, torch.Tensor]:
    """Dummy token ids (never all zeros), a mask with padding in the last row, and labels."""
    allowed = forward_inputs(model)
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise ValueError(f"input(s) {unknown} not accepted by {type(model).__name__}.forward; "
                         f"allowed: {allowed}")
    if "input_ids" not in names:
        raise ValueError("input_ids is required: the graph needs tokens to embed")
    gen = torch.Generator().manual_seed(seed)
    vocab = getattr(getattr(model, "config", None), "vocab_size", 30522)
    num_labels = getattr(getattr(model, "config", None), "num_labels", 2)
    make = {
        "input_ids": lambda: torch.randint(1000, vocab, (batch, seq_len), generator=gen),
        "attention_mask": lambda: _padded_mask(batch, seq_len),
        "token_type_ids": lambda: torch.zeros(batch, seq_len, dtype=torch.long),
        "labels": lambda: torch.randint(0, num_labels, (batch,), generator=gen),
    }
    missing = [n for n in names if n not in make]
    if missing:
        raise ValueError(f"no example generator for {missing}; supported: {list(make)}")
    return {n: make[n]() for n in names}


def _padded_mask(batch: int, seq_len: int) -> torch.Tensor:
    """All ones but the last quarter of the last row: a padded sequence, so the mask matters."""
    mask = torch.ones(batch, seq_len, dtype=torch.long)
    mask[-1, seq_len - seq_len // 4:] = 0
    return mask


def capture(model: torch.nn.Module, inputs: Sequence[str] = DEFAULT_INPUTS, *, batch: int = 2,
            seq_len: int = 16, train: bool = False, dynamic: bool = True) -> torch.fx.GraphModule:
    """An FX graph of ``model`` whose placeholders are ``inputs`` (in that order).

    ``train`` captures training-mode behaviour (dropout active); the model's own mode is restored.
    ``dynamic`` keeps batch and sequence length symbolic so the graph runs on any batch, at the cost of
    a few shape-arithmetic nodes; ``False`` specialises to the example's shape.
    """
    kwargs = example_inputs(model, inputs, batch=batch, seq_len=seq_len)
    dims = None
    if dynamic:
        auto = torch.export.Dim.AUTO
        dims = {k: {d: auto for d in range(v.dim())} for k, v in kwargs.items()}
    was_training = model.training
    model.train(train)
    try:
        exported = torch.export.export(model, (), kwargs, dynamic_shapes=dims, strict=False)
    finally:
        model.train(was_training)
    gm = exported.module()
    gm.meta["example_inputs"] = kwargs
    gm.meta["input_names"] = list(inputs)
    return gm
