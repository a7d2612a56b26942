"""Table rows of stored numbers, as the notebooks save and show them and the answers quote them: plain functions of
the numbers, no verdict (the readings decide those) and no prose (the answers word them)."""
from __future__ import annotations

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
