"""What Lab 3's format study says while it runs: the base model, the formats table, the exercises' grid, the weight-SNR
table and the PTQ/QAT table with the fp32 baseline and its test-set standard error (the answers are
``labkit.answers.lab3_formats``)."""
from __future__ import annotations

from ..readings.tables import qat_rows, steps_of, test_set_se
from ..report import table

QAT_COLUMNS = ["format", "bits/weight", "bits/input", "PTQ", "QAT", "QAT - PTQ", "seconds"]
PLAN_COLUMNS = ["format", "parameters", "roles", "bits/weight", "bits/input", "value set"]
SNR_COLUMNS = ("format", "width", "bits", "snr_db", "zeroed")


def qat_text(settings: dict, fp32: dict, sizes: dict, formats: dict[str, dict]) -> str:
    n = fp32["n"]
    failed = {k: r["qat_error"] for k, r in formats.items() if r.get("qat_error")}
    return (f"fp32: **{fp32['accuracy']:.4f}**; one test-set standard error there is {test_set_se(fp32['accuracy'], n):.4f} "
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


def snr_table(rows: list[dict]) -> str:
    """The weight-SNR sweep's rows (``quant.study.snr_sweep``), one per format and width."""
    return table([{k: r[k] for k in SNR_COLUMNS} for r in rows], floatfmt=".3f")


def grid_table(rows: list[dict]) -> str:
    """``labs.lab3_formats.grid_rows``, every value as ``:g`` writes it (the grid's own digits, not rounded)."""
    return table([{k: f"{v:g}" for k, v in r.items()} for r in rows])
