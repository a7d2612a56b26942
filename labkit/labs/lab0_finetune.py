"""Lab 0's fine-tuning: for each training seed the SFT model, its equal-training control (one more epoch of
full fine-tuning), LoRA on top of the SFT model, and LoRA merged into the weights; and the merge exercise's
check against peft's own merge on one layer."""
from __future__ import annotations

import copy

import torch

from .. import lora, models, recipes
from ..readings import seeds as _seeds
from ..training import precision, train
from . import per_seed as _per_seed


def lab0_seed(s: dict, dl, seed: int, batch: dict) -> dict:
    """Every Lab 0 accuracy for training ``seed`` (the head's initialisation, the adapters, batch order and
    dropout); ``batch``: a test batch on the training device for the merge's logit check."""
    untrained = train.evaluate(models.load_model(s["model"], seed=seed), dl.test, **precision.on(s),
                               desc="untrained", progress=False)
    sft_model, sft = recipes.finetuned_model(s, dl, seed=seed)
    recipes.freeze_embeddings(sft_model)  # the SFT setting, for the parameter count
    sft_params = lora.trainable_parameters(sft_model)
    control = None
    if s.get("control", True):
        control_model = copy.deepcopy(sft_model)  # LoRA's extra epoch, spent on full fine-tuning at SFT's lr
        train.train(control_model, dl.train, epochs=s["epochs"], lr=s["lr"], **precision.on(s), seed=seed,
                    desc=f"SFT + 1 epoch (seed {seed})")
        control = train.evaluate(control_model, dl.test, **precision.on(s), desc="control eval", progress=False)
        del control_model
    peft_model = lora.add_lora(sft_model, rank=s["lora_rank"], alpha=s["lora_alpha"], dropout=s["lora_dropout"],
                               seed=seed)
    lora_params = lora.trainable_parameters(peft_model)
    fit = train.train(peft_model, dl.train, epochs=s["epochs"], lr=s["lora_lr"], **precision.on(s), seed=seed,
                      desc=f"LoRA (seed {seed})")
    lora_eval = train.evaluate(peft_model, dl.test, **precision.on(s), desc="LoRA eval", progress=False)
    with torch.no_grad():
        peft_model.eval()
        logits_lora = peft_model(**batch).logits.float()
    merged = lora.merge_lora(peft_model)
    merged_eval = train.evaluate(merged, dl.test, **precision.on(s), desc="merged eval", progress=False)
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


def all_seeds(s: dict, dl) -> tuple[dict, list[dict]]:
    """``lab0_seed`` for every training seed of ``s``: ``(tuned, per_seed)``, the seeds combined
    (``readings.seeds.combine``) and each seed's own numbers (``narrate.lab0_graphs_lora.seeds_lines`` prints
    them). A finished seed's numbers are kept (``per_seed``), so a stopped run resumes after it."""
    seeds = recipes.train_seeds(s)
    dev = train.pick_device(s["device"])
    batch = {k: v.to(dev) for k, v in next(iter(dl.test)).items()}
    per_seed = _per_seed.run("lab0", "accuracy", s, seeds, lambda seed: lab0_seed(s, dl, seed, batch))
    return _seeds.combine(per_seed, seeds), per_seed


def merge_gaps(model: torch.nn.Module, s: dict, merge) -> dict:
    """``merge`` (the exercise's ``merge_lora(W, A, B, alpha, rank)``) on layer 0's query of a LoRA copy of
    ``model`` against peft's ``merge_and_unload``: the layer's ``shape``, ``rank``, ``alpha``, the largest change
    the update makes to W (``update``) and the largest gap between the two merges (``gap``). Every adapter's
    ``B`` is drawn at random, standing in for a trained one (a fresh adapter's ``B`` is 0, which any merge gets
    right)."""
    demo = lora.add_lora(copy.deepcopy(model), rank=s["lora_rank"], alpha=s["lora_alpha"], dropout=s["lora_dropout"],
                         seed=s["seed"])
    gen = torch.Generator().manual_seed(s["seed"])
    with torch.no_grad():
        for m in demo.modules():
            if hasattr(m, "lora_B") and "default" in m.lora_B:
                m.lora_B["default"].weight.copy_(0.02 * torch.randn(m.lora_B["default"].weight.shape, generator=gen))
    layer = demo.base_model.model.bert.encoder.layer[0].attention.self.query
    W, A, B = (t.detach().clone() for t in (layer.base_layer.weight, layer.lora_A["default"].weight,
                                             layer.lora_B["default"].weight))
    mine = merge(W, A, B, s["lora_alpha"], s["lora_rank"])
    peft_merged = lora.merge_lora(demo).bert.encoder.layer[0].attention.self.query.weight.detach()
    return {"shape": tuple(W.shape), "rank": s["lora_rank"], "alpha": s["lora_alpha"],
            "update": (peft_merged - W).abs().max().item(), "gap": (mine - peft_merged).abs().max().item()}
