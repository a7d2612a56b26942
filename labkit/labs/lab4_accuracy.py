"""Lab 4 part 3's accuracy check: each training seed's SFT model in fp32 and converted to MXINT8, combined over
the seeds."""
from __future__ import annotations

import copy

import torch

from .. import recipes
from ..kernels import extension
from ..kernels.packed_linear import convert_to_mxint8
from ..readings import seeds
from ..training import precision, train
from . import per_seed


def mxint8_accuracy_seed(s: dict, dl, seed: int, group_size: int, keep, batch: dict) -> dict:
    """fp32 and MXINT8 accuracy of training ``seed``'s SFT model (every Linear that ``keep`` allows converted
    with ``group_size``), and the largest logit difference on ``batch`` (a test batch on the device)."""
    sft_model, metrics = recipes.finetuned_model(s, dl, seed=seed)
    fp32 = train.evaluate(sft_model, dl.test, **precision.on(s), desc="fp32 eval", progress=False)
    q_model = copy.deepcopy(sft_model).cpu()
    conv = convert_to_mxint8(q_model, group_size, keep)
    q = train.evaluate(q_model, dl.test, **precision.on(s), desc="MXINT8 eval", progress=False)
    dev = batch["input_ids"].device
    with torch.no_grad():
        gap = (sft_model.to(dev)(**batch).logits.float() - q_model.to(dev)(**batch).logits.float()).abs().max().item()
    return {"fp32": fp32, "mxint8": q, "converted": conv["converted"], "skipped": conv["skipped"],
            "weight_saving": conv["weight_saving"], "max_logit_gap": gap, "sft_digest": metrics["sft_digest"]}


def accuracy_numbers(s: dict, keep) -> dict:
    """``mxint8_accuracy``'s numbers: every training seed of ``s`` (one at a time; a finished seed's numbers are
    kept under runs/seeds, so a stopped run resumes after it), combined over the seeds."""
    dl = recipes.loaders(s)
    dev = train.pick_device(s["device"])
    batch = {k: v.to(dev) for k, v in next(iter(dl.test)).items()}
    results = per_seed.run("lab4", "mxint8_accuracy", s, recipes.train_seeds(s),
                           lambda seed: mxint8_accuracy_seed(s, dl, seed, s["group_size"], keep, batch))
    return {**seeds.combine(results, recipes.train_seeds(s)), "dataset_sizes": dl.sizes,
            "kernel_path": extension.describe()}
