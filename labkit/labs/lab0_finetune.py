"""Lab 0's fine-tuning for one training seed: the SFT model, its equal-training control (one more epoch of
full fine-tuning), LoRA on top of the SFT model, and LoRA merged into the weights."""
from __future__ import annotations

import copy

import torch

from .. import lora, models, recipes
from ..training import train


def lab0_seed(s: dict, dl, seed: int, batch: dict) -> dict:
    """Every Lab 0 accuracy for training ``seed`` (the head's initialisation, the adapters, batch order and
    dropout); ``batch``: a test batch on the training device for the merge's logit check."""
    untrained = train.evaluate(models.load_model(s["model"], seed=seed), dl.test, device=s["device"],
                               desc="untrained", progress=False)
    sft_model, sft = recipes.finetuned_model(s, dl, seed=seed)
    recipes.freeze_embeddings(sft_model)  # the SFT setting, for the parameter count
    sft_params = lora.trainable_parameters(sft_model)
    control = None
    if s.get("control", True):
        control_model = copy.deepcopy(sft_model)  # LoRA's extra epoch, spent on full fine-tuning at SFT's lr
        train.train(control_model, dl.train, epochs=s["epochs"], lr=s["lr"], device=s["device"], seed=seed,
                    desc=f"SFT + 1 epoch (seed {seed})")
        control = train.evaluate(control_model, dl.test, device=s["device"], desc="control eval", progress=False)
        del control_model
    peft_model = lora.add_lora(sft_model, rank=s["lora_rank"], alpha=s["lora_alpha"], dropout=s["lora_dropout"],
                               seed=seed)
    lora_params = lora.trainable_parameters(peft_model)
    fit = train.train(peft_model, dl.train, epochs=s["epochs"], lr=s["lora_lr"], device=s["device"], seed=seed,
                      desc=f"LoRA (seed {seed})")
    lora_eval = train.evaluate(peft_model, dl.test, device=s["device"], desc="LoRA eval", progress=False)
    with torch.no_grad():
        peft_model.eval()
        logits_lora = peft_model(**batch).logits.float()
    merged = lora.merge_lora(peft_model)
    merged_eval = train.evaluate(merged, dl.test, device=s["device"], desc="merged eval", progress=False)
    with torch.no_grad():
        logits_merged = merged(**batch).logits.float()
    accuracy = {"untrained": untrained["accuracy"], "SFT": sft["accuracy"],
                **({"SFT + 1 epoch": control["accuracy"]} if control else {}),
                "LoRA": lora_eval["accuracy"], "LoRA merged": merged_eval["accuracy"]}
    return {
        "accuracy": accuracy, "sft": recipes.sft_record(sft), **({"control": control} if control else {}),
        "lora": {**lora_eval, **lora_params, "train_seconds": fit["train_seconds"]}, "merged": merged_eval,
        "merge_max_logit_diff": (logits_lora - logits_merged).abs().max().item(),
        "linear_biases": all(m.bias is not None for m in merged.modules() if isinstance(m, torch.nn.Linear)),
        "sft_trainable": sft_params}
