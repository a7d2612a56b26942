"""Lab 3 formats, part 1: the formats under study with their parameters at a width (``labkit.quant.study``),
and for each training seed the seed's SFT model in fp32, then PTQ and QAT of every format (``ptq_qat``)."""
from __future__ import annotations

import copy
import inspect

from ..quant import FORMATS, average_bits, make_format, quantize, study
from ..quant.study import flat_config, ptq_qat
from ..readings import seeds as _seeds
from ..recipes import finetuned_model, freeze_embeddings, sft_record
from ..training import precision, train
from . import per_seed


def study_plan(base, width: int) -> tuple[dict[str, dict], list[dict]]:
    """Every registered format of ``labkit.quant`` in the study's order: ``(configs, plan)``, ``configs`` its
    parameters at ``width`` by role (``study_params``) and ``plan`` the rows of the formats table (its parameters,
    roles, the bits ``average_bits`` counts on ``base`` quantized by it, its value set)."""
    names = [n for n in study.STUDY_ORDER if n in FORMATS]
    if set(names) != set(FORMATS):
        raise ValueError(f"formats without a place in the study: {set(FORMATS) - set(names)}")
    configs = {n: study.study_params(n, width) for n in names}
    plan = []
    for n in names:
        bits = average_bits(quantize(base, flat_config(n, configs[n])).model)
        fmt = make_format(n, **configs[n]["weight"])
        # every format but integer states its value set with its parameters; integer's docstring opens with it
        value_set = fmt.value_set() if hasattr(fmt, "value_set") else inspect.getdoc(fmt).split("\n")[0]
        plan.append({"format": n, "roles": ", ".join(configs[n]), "parameters": fmt.describe(),
                     "bits/weight": bits["weight_bits"], "bits/input": bits["data_in_bits"],
                     "value set": value_set.replace("|", "\\|")})  # a bare | would split the Markdown cell
    return configs, plan


def snr_numbers(rows: list[dict], configs: dict[str, dict]) -> dict:
    """What ``weight_snr.json`` stores: the sweep's rows and the integer format's frac width in the study."""
    return {"rows": rows, "integer_frac": configs["integer"]["weight"]["frac_width"]}


def formats_seed(s: dict, dl, seed: int, configs: dict[str, dict], freeze=None) -> dict:
    """Lab 3 part 1 for one training seed: that seed's SFT model in fp32, then PTQ and QAT (with the seed) of
    every format of ``configs`` (``{name: study_params(...)}``), each from a fresh copy."""
    base, sft = finetuned_model(s, dl, seed=seed)
    fp32 = train.evaluate(base, dl.test, **precision.on(s), desc="fp32", progress=False)
    at = {**s, "seed": seed}  # this seed's QAT; the data stay s["seed"]'s
    formats = {}
    for name, params in configs.items():
        r = ptq_qat(lambda: copy.deepcopy(base), flat_config(name, params), dl, at, freeze=freeze or freeze_embeddings)
        print(f"seed {seed} {name:22s} PTQ {r['ptq']['accuracy']:.4f}  QAT {r['qat']['accuracy']:.4f}  "
              f"({r['seconds']:.0f} s{', ' + r['qat_error'] if r['qat_error'] else ''})", flush=True)
        formats[name] = {"params": params, **r}
    return {"fp32": fp32, "sft": sft_record(sft), "formats": formats}


def run(s: dict, dl, seeds: list[int], configs: dict[str, dict], plan: list[dict], linears: list[str]) -> dict:
    """What ``formats.json`` stores: every seed's ``formats_seed`` (one seed at a time; a finished seed's numbers
    are kept in runs/seeds, so a stopped run resumes after it), combined over the seeds, with the test and
    train sizes, the formats table and the Linear layers quantized."""
    runs = per_seed.run("lab3", "formats", s, seeds, lambda seed: formats_seed(s, dl, seed, configs))
    return {**_seeds.combine(runs, seeds), "dataset_sizes": dl.sizes, "plan": plan, "linears": linears}


# The small grid the exercise formats are shown on: both signs, zero, below the smallest steps, beyond the largest.
GRID = (-300.0, -3.0, -0.7, -0.05, 0.0, 0.004, 0.02, 0.07, 0.2, 0.45, 1.0, 1.45, 2.9, 7.9, 300.0, 0.001)


def grid_rows(minifloat_denorm, log_quantize, block_fp) -> list[dict]:
    """``GRID`` through each exercise's function as the notebook uses it (the student's once its check
    passed, labkit's otherwise) beside labkit's format of the same parameters: one row per value
    (``narrate.lab3_formats.grid_table`` draws them)."""
    import torch

    grid = torch.tensor(GRID)
    shown = {"minifloat_denorm w8 E4": (minifloat_denorm(grid, 8, 4), make_format(
                 "minifloat_denorm", width=8, exponent_width=4).quantize_values(grid)),
             "log w4 bias 4": (log_quantize(grid, 4, 4),
                               make_format("log", width=4, exponent_bias=4).quantize_values(grid)),
             "block_fp w4, blocks of 4": (block_fp(grid, 4, 4),
                                          make_format("block_fp", width=4, block_size=4).quantize_values(grid))}
    rows = []
    for i, v in enumerate(grid.tolist()):
        row = {"x": v}
        for label, (used, labkit_values) in shown.items():
            row[f"{label} (used here)"] = used[i].item()
            row[f"{label} (labkit)"] = labkit_values[i].item()
        rows.append(row)
    return rows
