"""Lab 1 sweeps: fixed-point width (PTQ and QAT) and pruning sparsity (before and after fine-tuning).

Every point starts from a fresh copy of the same base model, so points are independent and comparable.
"""
from __future__ import annotations

import copy

from .. import prune as _prune
from ..quant import fixed_point
from ..readings import seeds as _seeds
from ..recipes import freeze_embeddings
from ..training import batches, precision, progress as _progress, train


def combined(per_seed: list[dict], seeds: list[int], sizes: dict) -> dict:
    """What a Lab 1 notebook stores: its per-seed results combined over ``seeds`` (``readings.seeds.combine``)
    and the dataset's sizes."""
    return {**_seeds.combine(per_seed, seeds), "dataset_sizes": sizes}


def quantization_sweep(base, widths, dl, s: dict, calibration: dict | None = None) -> list[dict]:
    """PTQ then QAT per width (``quant.study.ptq_qat``). With ``calibration`` (max |input| per layer, see
    ``quant.calibrate.input_ranges``) each tensor gets its range-covering frac width; without it, the
    sheet's single rule frac = width // 2."""
    from ..quant.calibrate import calibrated_fixed_point
    from ..quant.study import ptq_qat

    settings = {**s, "qat_lr": s["finetune_lr"]}
    rows = []
    for width in _progress.bar(widths, desc="widths", unit="widths"):
        if calibration is None:
            frac, config = width // 2, fixed_point(width)
        else:
            config = calibrated_fixed_point(base, width, calibration)
            fracs = sorted({v for cfg in config.values() if isinstance(cfg, dict)
                            for k, v in cfg.items() if k.endswith("frac_width")})
            frac = f"{fracs[0]}..{fracs[-1]}"
        out = ptq_qat(lambda: copy.deepcopy(base), config, dl, settings, freeze=freeze_embeddings)
        rows.append({"width": width, "frac_width": frac, "ptq": out["ptq"]["accuracy"],
                     "qat": out["qat"]["accuracy"], "ptq_positive_share": out["ptq"].get("positive_share"),
                     "qat_positive_share": out["qat"].get("positive_share"),
                     "qat_train_seconds": out.get("qat_train", {}).get("train_seconds"),
                     "qat_loss_last": out.get("qat_train", {}).get("train_loss_last")})
    return rows


def fp32_control(base, dl, s: dict, epochs: float) -> dict:
    """The base model trained for the same ``epochs`` at the same lr as a QAT or post-pruning point, with
    no compression: the equal-training baseline (a compressed model that beats the untouched base may
    only be showing the extra training)."""
    model = copy.deepcopy(base)
    freeze_embeddings(model)
    fit = train.train(model, dl.train, epochs=epochs, lr=s["finetune_lr"], **precision.on(s), seed=s["seed"],
                      progress=False)
    out = train.evaluate(model, dl.test, **precision.on(s), progress=False)
    model.cpu()
    return {"epochs": epochs, "lr": s["finetune_lr"], "accuracy": out["accuracy"],
            "positive_share": out["positive_share"], "train_seconds": fit["train_seconds"]}


def pruning_sweep(base, sparsities, methods, dl, s: dict, inputs=None, scope: str | None = None) -> list[dict]:
    """One row per (method, sparsity): accuracy right after pruning and after fine-tuning with the masks
    in place. ``scope`` (weights): ``local`` (each layer to the sparsity) or ``global`` (one threshold over
    all layers); default the profile's ``prune_scope``. Activations are pruned per layer either way."""
    scope = scope or s["prune_scope"]
    rows = []
    points = [(m, sp) for m in methods for sp in sparsities]
    for method, sparsity in _progress.bar(points, desc=f"pruning ({scope})", unit="points"):
        cfg = {"weight": {"sparsity": sparsity, "method": method, "scope": scope, "seed": s["seed"]},
               "activation": {"sparsity": sparsity, "method": method, "scope": "local", "seed": s["seed"]}}
        res = _prune.prune(base, cfg)
        model = res.model
        achieved_act = _prune.activation_sparsity(model, inputs) if inputs is not None else None
        before = train.evaluate(model, dl.test, **precision.on(s), progress=False)
        freeze_embeddings(model)
        fit = train.train(model, dl.train, epochs=s["prune_epochs"], lr=s["finetune_lr"], **precision.on(s),
                          seed=s["seed"], progress=False)
        after = train.evaluate(model, dl.test, **precision.on(s), progress=False)
        rows.append({"method": method, "scope": scope, "sparsity": sparsity, "pruned": before["accuracy"],
                     "finetuned": after["accuracy"], "pruned_positive_share": before["positive_share"],
                     "finetuned_positive_share": after["positive_share"],
                     "achieved_weight_sparsity": res.report["achieved_weight_sparsity"],
                     "weight_sparsity_after_training": _prune.weight_sparsity(model.cpu()),
                     "achieved_activation_sparsity": achieved_act,
                     "finetune_seconds": fit["train_seconds"]})
    return rows


def quantization_seed(s: dict, dl, seed: int) -> dict:
    """Lab 1a for one training seed: that seed's SFT model, its calibrated width sweep (PTQ and QAT with the
    seed), the sheet's single int8 rule, and the equal-training control."""
    from ..quant.compress import compress
    from ..quant.calibrate import input_ranges
    from ..recipes import finetuned_model

    base, metrics = finetuned_model(s, dl, seed=seed)
    at = {**s, "seed": seed}  # this seed's training; the data stay s["seed"]'s
    ranges = input_ranges(base, batches.first_batch(dl.train, s["seed"]))  # data: s["seed"]'s, as at says
    rows = quantization_sweep(base, s["widths"], dl, at, calibration=ranges)
    sheet8 = train.evaluate(compress(base, quant=fixed_point(8, 4)).model, dl.test, **precision.on(s),
                            progress=False)["accuracy"]
    control = fp32_control(base, dl, at, s["qat_epochs"])
    return {"fp32": metrics["accuracy"], "sft_digest": metrics["sft_digest"], "rows": rows,
            "sheet_rule_int8_frac4_ptq": sheet8, "input_ranges": ranges, "control": control}


def pruning_seed(s: dict, dl, seed: int, probe: dict | None = None) -> dict:
    """Lab 1b for one training seed: that seed's SFT model, random and L1 sweeps in the main scope, L1 in the
    other scope at ``global_sparsities``, and the equal-training control (masks and training with the seed)."""
    from ..recipes import finetuned_model

    base, metrics = finetuned_model(s, dl, seed=seed)
    at = {**s, "seed": seed}
    other = "global" if s["prune_scope"] == "local" else "local"
    rows = pruning_sweep(base, s["sparsities"], ["random", "l1-norm"], dl, at, inputs=probe)
    rows += pruning_sweep(base, s["global_sparsities"], ["l1-norm"], dl, at, inputs=probe, scope=other)
    control = fp32_control(base, dl, at, s["prune_epochs"])
    return {"fp32": metrics["accuracy"], "sft_digest": metrics["sft_digest"], "rows": rows, "control": control}
