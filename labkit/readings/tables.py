"""Table rows of stored numbers, as the notebooks save and show them and the answers quote them: plain functions of
the numbers, no verdict (the readings decide those) and no prose (the answers word them)."""
from __future__ import annotations

import math

from . import stats


# --- Lab 2 -------------------------------------------------------------------------------------------------

def sampler_rows(bands: dict[str, dict]) -> list[dict]:
    """Table rows, best sampler first: final best per seed, mean and its standard error over seeds."""
    rows = [{"sampler": name, "seeds": len(b["final"]), "trials": b["trials"], "mean best": b["final_mean"],
             "SE over seeds": b["final_sem"], "per seed": ", ".join(f"{v:.4f}" for v in b["final"])}
            for name, b in bands.items()]
    return sorted(rows, key=lambda r: -r["mean best"])


def within_trial(trials: list[dict], after: str, before: str = "accuracy_trained") -> dict:
    """Mean/min/max of ``after - before`` over completed trials (the same model before and after), so
    architecture and training noise cancel."""
    d = [t[after] - t[before] for t in trials if after in t and before in t]
    if not d:
        raise ValueError(f"within_trial: no trial records both {before!r} and {after!r}")
    return {"mean": sum(d) / len(d), "min": min(d), "max": max(d), "trials": len(d)}


def spread(d: list[float]) -> dict:
    """Mean, median, quartiles (linear interpolation), range and how many are above 0, of paired differences."""
    d = sorted(d)
    k = len(d)

    def q(p):  # numpy's default percentile: linear between the closest ranks
        x = p * (k - 1)
        lo = int(x)
        return d[lo] + (d[min(lo + 1, k - 1)] - d[lo]) * (x - lo)

    return {"trials": k, "mean": sum(d) / k, "median": q(0.5), "q1": q(0.25), "q3": q(0.75), "min": d[0],
            "max": d[-1], "above_zero": sum(x > 0 for x in d)}


def post_vs_control(trials: list[dict]) -> dict | None:
    """Per trial, post-trained compressed accuracy minus its equal-training control's (the same trained
    model, uncompressed, trained again as long at the same learning rate and seed): ``spread`` of those, plus
    ``control_gain`` (the control's own change from its trained accuracy). None: no trial recorded a control."""
    both = [t for t in trials if "accuracy_post_trained" in t and "accuracy_control" in t]
    if not both:
        return None
    return {**spread([t["accuracy_post_trained"] - t["accuracy_control"] for t in both]),
            "control_gain": spread([t["accuracy_control"] - t["accuracy_trained"] for t in both
                                    if "accuracy_trained" in t] or [0.0])}


def start_rows(best: dict[str, float], starts: dict[str, dict | None]) -> list[dict]:
    """Table rows, one per Task 2 search: its best and its start (Task 1's best; None where it did not complete)."""
    return [{"objective": label, "best": best[label],
             "start (Task 1's best)": starts[label]["value"] if starts[label] else None,
             "start's trial": starts[label]["number"] if starts[label] else None} for label in best]


def effect_rows(effects: dict[str, dict]) -> list[dict]:
    """Table rows of the within-trial changes (``within_trial`` of each)."""
    return [{"within-trial change": k, **v} for k, v in effects.items()]


# --- Lab 3 -------------------------------------------------------------------------------------------------

def stored_accuracy(d: dict | None) -> float | None:
    """An accuracy as stored (NaN is written as null), None when missing or not finite."""
    a = (d or {}).get("accuracy")
    return a if isinstance(a, (int, float)) and math.isfinite(a) else None


def qat_rows(formats: dict[str, dict]) -> list[dict]:
    rows = []
    for n, r in formats.items():
        p, q = stored_accuracy(r.get("ptq")), stored_accuracy(r.get("qat"))
        rows.append({"format": n, "bits/weight": r["bits"]["weight_bits"], "bits/input": r["bits"]["data_in_bits"],
                     "PTQ": p if p is not None else "-", "QAT": q if q is not None else "-",
                     "QAT - PTQ": q - p if p is not None and q is not None else "-", "seconds": r["seconds"]})
    return rows


def steps_of(formats: dict[str, dict]) -> int:
    return next((r["qat_train"]["steps"] for r in formats.values() if (r.get("qat_train") or {}).get("steps")), 0)


def log_range(width: int) -> tuple[int, int]:
    """(emin, emax) of labkit's log format of ``width`` bits at its default bias: the powers of two it holds."""
    from ..quant.formats.log import LogFormat

    fmt = LogFormat(width=width)
    return fmt.emin, fmt.emax



def short(layer: str) -> str:
    """A layer's name as the answers print it: ``bert.encoder.layer.0.attention.self.query`` ->
    ``0.attention.self.query``."""
    return layer.replace("bert.encoder.layer.", "").replace("bert.", "")


# Table rows of the search's results, as the notebook saves them and the answers read them.


def format_rows(per_format: dict[str, dict], fp32: float) -> list[dict]:
    """``per_format[name] = {"best": accuracy, "bits": average weight bits of that trial, "trials": n}``."""
    rows = [{"format": name, "best accuracy": r["best"], "vs fp32": r["best"] - fp32, "weight bits": r["bits"],
             "trials": r["trials"]} for name, r in per_format.items()]
    return sorted(rows, key=lambda r: -r["best accuracy"])


def cost_rows(per_lambda: dict[float, dict]) -> list[dict]:
    """``per_lambda[lam] = {"accuracy", "bits", "counts"}`` of each cost search's best trial."""
    return [{"lambda": lam, "accuracy": r["accuracy"], "weight bits": r["bits"],
             "objective": r["accuracy"] - lam * r["bits"],
             "formats": ", ".join(f"{k} x{v}" for k, v in sorted(r["counts"].items(), key=lambda kv: -kv[1]))}
            for lam, r in sorted(per_lambda.items())]


def front_of(points: list[dict]) -> list[dict]:
    """The accuracy-vs-bits Pareto front of ``points`` (each with ``accuracy``, ``bits``), fewest bits first."""
    out = []
    for p in sorted(points, key=lambda p: (p["bits"], -p["accuracy"])):
        if not out or p["accuracy"] > out[-1]["accuracy"]:
            out.append(p)
    return out


# --- Lab 4 -------------------------------------------------------------------------------------------------

# the columns of the sheet's decode table, as the answers and the student's check show it
DECODE_COLUMNS = ["m", "byte", "frac", "out", "out value", "bias value", "dont_need_abs", "y", "exact",
                  "without bias", "always subtract"]


def memory_rows(measured: dict) -> list[dict]:
    return [{"model": name, "format": c[f]["format"], "parameters MB": c[f]["bytes"]["total"] / 1e6,
             "resident MB": c[f]["resident"] / 1e6, "peak MB": c[f]["peak"] / 1e6,
             "peak - resident MB": c[f]["peak_minus_resident"] / 1e6}
            for name, c in measured.items() for f in ("fp32", "mxint8")]


# --- every lab -------------------------------------------------------------------------------------------

def test_set_se(p: float, n: int) -> float:
    """The test-set standard error of an accuracy ``p`` on ``n`` reviews, as the answers quote it beside a number
    (``stats.accuracy_se``; the readings use it to decide, the answers only show it)."""
    return stats.accuracy_se(p, n)
