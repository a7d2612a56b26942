"""Lab 4 part 3's accuracy check for one training seed: the SFT model in fp32 and converted to MXINT8."""
from __future__ import annotations

import copy

import torch

from .. import recipes
from ..training import train
from ..kernels.packed_linear import convert_to_mxint8


def mxint8_accuracy_seed(s: dict, dl, seed: int, group_size: int, keep, batch: dict) -> dict:
    """fp32 and MXINT8 accuracy of training ``seed``'s SFT model (every Linear that ``keep`` allows converted
    with ``group_size``), and the largest logit difference on ``batch`` (a test batch on the device)."""
    sft_model, metrics = recipes.finetuned_model(s, dl, seed=seed)
    fp32 = train.evaluate(sft_model, dl.test, device=s["device"], desc="fp32 eval", progress=False)
    q_model = copy.deepcopy(sft_model).cpu()
    conv = convert_to_mxint8(q_model, group_size, keep)
    q = train.evaluate(q_model, dl.test, device=s["device"], desc="MXINT8 eval", progress=False)
    dev = batch["input_ids"].device
    with torch.no_grad():
        gap = (sft_model.to(dev)(**batch).logits.float() - q_model.to(dev)(**batch).logits.float()).abs().max().item()
    return {"fp32": fp32, "mxint8": q, "converted": conv["converted"], "skipped": conv["skipped"],
            "weight_saving": conv["weight_saving"], "max_logit_gap": gap, "sft_digest": metrics["sft_digest"]}
