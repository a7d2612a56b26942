"""LoRA through peft: insert adapters (rank, alpha and dropout honoured, base biases kept) and merge them.

peft's ``task_type=SEQ_CLS`` keeps the classifier head fully trainable (``modules_to_save``), as the
course's LoRA tutorial does.
"""
from __future__ import annotations

import warnings

import torch
from peft import LoraConfig, PeftModel, TaskType, get_peft_model

from .training.determinism import init_rng

# Every Linear in a BERT encoder layer (Q, K, V, attention output, FFN in/out) and the pooler.
BERT_LINEARS = ("query", "key", "value", "dense")


def add_lora(model: torch.nn.Module, rank: int = 6, alpha: float = 1.0, dropout: float = 0.5,
             target_modules=BERT_LINEARS, seed: int = 0) -> PeftModel:
    """Wrap ``model`` with LoRA adapters, drawn from ``seed``; base weights frozen, adapters and classifier
    trainable."""
    if rank <= 0:
        raise ValueError(f"lora rank must be a positive integer, got {rank}")
    if not 0 <= dropout < 1:
        raise ValueError(f"lora dropout must be in [0, 1), got {dropout}")
    if alpha <= 0:
        raise ValueError(f"lora alpha must be > 0, got {alpha}")
    config = LoraConfig(task_type=TaskType.SEQ_CLS, r=rank, lora_alpha=alpha, lora_dropout=dropout,
                        target_modules=list(target_modules), bias="none")
    with warnings.catch_warnings(), init_rng(seed):
        # peft reads transformers' deprecated `is_gradient_checkpointing` alias while wrapping the model;
        # the FutureWarning is addressed to peft (fixed there once it reads `is_activation_checkpointing`),
        # nothing a student can act on
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated",
                                category=FutureWarning)
        return get_peft_model(model, config)


def trainable_parameters(model: torch.nn.Module) -> dict:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return {"trainable": trainable, "total": total, "fraction": trainable / total}


def merge_lora(model: PeftModel) -> torch.nn.Module:
    """Fold each adapter into its base weight (W + alpha/r * B A) and return the plain model."""
    if not isinstance(model, PeftModel):
        raise TypeError(f"expected a peft PeftModel, got {type(model).__name__}")
    return model.merge_and_unload()
