"""What Lab 3's format study measured, as the notebook shows it before any answer: the PTQ/QAT table and the
fp32 baseline with its test-set standard error. ``labkit.answers.lab3_formats`` words its answers from these."""
from __future__ import annotations

import math

from ..report import table
from ..readings.stats import accuracy_se

QAT_COLUMNS = ["format", "bits/weight", "bits/input", "PTQ", "QAT", "QAT - PTQ", "seconds"]


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
