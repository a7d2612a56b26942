"""What Lab 3's format study measured, as the notebook shows it before any answer: the formats table, the three
exercise formats on a small grid, the weight-SNR table, the PTQ/QAT table and the fp32 baseline with its
test-set standard error. ``labkit.answers.lab3_formats`` words its answers from these."""
from __future__ import annotations

import math

from ..report import table
from ..readings.stats import accuracy_se

QAT_COLUMNS = ["format", "bits/weight", "bits/input", "PTQ", "QAT", "QAT - PTQ", "seconds"]
PLAN_COLUMNS = ["format", "parameters", "roles", "bits/weight", "bits/input", "value set"]
SNR_COLUMNS = ("format", "width", "bits", "snr_db", "zeroed")
# The small grid the exercise formats are shown on: both signs, zero, below the smallest steps, beyond the largest.
GRID = (-300.0, -3.0, -0.7, -0.05, 0.0, 0.004, 0.02, 0.07, 0.2, 0.45, 1.0, 1.45, 2.9, 7.9, 300.0, 0.001)


def _acc(d: dict | None) -> float | None:
    """An accuracy as stored (NaN is written as null), None when missing or not finite."""
    a = (d or {}).get("accuracy")
    return a if isinstance(a, (int, float)) and math.isfinite(a) else None


def qat_rows(formats: dict[str, dict]) -> list[dict]:
    rows = []
    for n, r in formats.items():
        p, q = _acc(r.get("ptq")), _acc(r.get("qat"))
        rows.append({"format": n, "bits/weight": r["bits"]["weight_bits"], "bits/input": r["bits"]["data_in_bits"],
                     "PTQ": p if p is not None else "-", "QAT": q if q is not None else "-",
                     "QAT - PTQ": q - p if p is not None and q is not None else "-", "seconds": r["seconds"]})
    return rows


def steps_of(formats: dict[str, dict]) -> int:
    return next((r["qat_train"]["steps"] for r in formats.values() if (r.get("qat_train") or {}).get("steps")), 0)


def qat_text(settings: dict, fp32: dict, sizes: dict, formats: dict[str, dict]) -> str:
    n = fp32["n"]
    failed = {k: r["qat_error"] for k, r in formats.items() if r.get("qat_error")}
    return (f"fp32: **{fp32['accuracy']:.4f}**; one test-set standard error there is {accuracy_se(fp32['accuracy'], n):.4f} "
            f"(sqrt(p(1-p)/n), {n:,} reviews). QAT: {steps_of(formats)} steps ({settings['qat_epochs']} epochs of "
            f"{sizes['train']:,} reviews, batch {settings['batch_size']}) at lr {settings['qat_lr']}."
            + (" QAT failed for " + "; ".join(f"{k} ({v})" for k, v in failed.items()) + "." if failed else "")
            + "\n\n" + table(qat_rows(formats), QAT_COLUMNS, floatfmt=".4f"))


def base_text(settings: dict, fp32: dict, sizes: dict, sft: dict, linears: list[str]) -> str:
    """``linears``: the Linear layers quantized (module order when the notebook stored it)."""
    return (f"Base: the SFT model ({settings['model']}, {settings['max_length']} tokens; "
            f"{'from the cache' if 'cached' in sft else 'trained now'}): fp32 accuracy **{fp32['accuracy']:.4f}** on "
            f"{sizes['test']:,} test reviews. It has {len(linears)} Linear layers, "
            + (f"`{linears[-2]}` and `{linears[-1]}` among them; " if len(linears) >= 2 else "")
            + "all of them are quantized below.")


def plan_table(plan: list[dict]) -> str:
    """The formats table (``lab3_formats.study_plan``'s rows)."""
    return table(plan, PLAN_COLUMNS, floatfmt=".3f")


def grid_table(minifloat_denorm, log_quantize, block_fp) -> str:
    """``GRID`` through each exercise's function as the notebook uses it (the student's once its check
    passed, labkit's otherwise) beside labkit's format of the same parameters."""
    import torch

    from ..quant import make_format

    grid = torch.tensor(GRID)
    shown = {"minifloat_denorm w8 E4": (minifloat_denorm(grid, 8, 4), make_format(
                 "minifloat_denorm", width=8, exponent_width=4).quantize_values(grid)),
             "log w4 bias 4": (log_quantize(grid, 4, 4),
                               make_format("log", width=4, exponent_bias=4).quantize_values(grid)),
             "block_fp w4, blocks of 4": (block_fp(grid, 4, 4),
                                          make_format("block_fp", width=4, block_size=4).quantize_values(grid))}
    rows = []
    for i, v in enumerate(grid.tolist()):
        row = {"x": f"{v:g}"}
        for label, (used, labkit_values) in shown.items():
            row[f"{label} (used here)"] = f"{used[i].item():g}"
            row[f"{label} (labkit)"] = f"{labkit_values[i].item():g}"
        rows.append(row)
    return table(rows)


def snr_table(rows: list[dict]) -> str:
    """The weight-SNR sweep's rows (``quant.study.snr_sweep``), one per format and width."""
    return table([{k: r[k] for k in SNR_COLUMNS} for r in rows], floatfmt=".3f")
