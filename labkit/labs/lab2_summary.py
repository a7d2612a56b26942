"""What Lab 2's searches did, computed before any answer is written: the samplers' table, within-trial
differences (compression, post-training, the equal-training control) and the run's header lines. The notebook
shows these; ``labkit.answers.lab2_search`` words its answers from them."""
from __future__ import annotations

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


def shortfall(done: dict[str, int], planned: int) -> str:
    """A sentence naming the studies that finished fewer than ``planned`` trials ('' when none did): their
    curves are cut, and comparisons at equal budget use the shortest."""
    short = {name: n for name, n in done.items() if n < planned}
    if not short:
        return ""
    return ("Not every search finished its " + f"{planned} trials: " + ", ".join(f"{name} {n}" for name, n in
                                                                               sorted(short.items()))
            + f" completed; curves compared at equal budget stop at {min(done.values())} trials. ")


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def _id_ranges(ids: list[int]) -> str:
    """Sorted ints as runs: [0, 1, 2, 3, 5, 8, 9] -> '0-3, 5, 8-9'."""
    runs = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def how_trials_ran(prov: dict) -> str:
    """How the completed trials ran, from their worker records (``search.trial_provenance``): worker
    processes, worker ids, hosts and devices. Never the worker count of the process that draws the
    figures, which in a report-only run ran no trial at all."""
    n = prov["trials"]
    if not n:
        return "No trial has completed yet."
    if not prov["processes"]:
        return f"{_plural(n, 'completed trial')}, none of which recorded the worker that ran it."
    ids = prov["worker_ids"]
    text = (f"The {_plural(n, 'completed trial')} ran in "
            f"{_plural(prov['processes'], 'worker process', 'worker processes')}"
            + (f" (worker {'id' if len(ids) == 1 else 'ids'} {_id_ranges(ids)})" if ids else ""))
    hosts = {h: c for h, c in prov["hosts"].items() if h != "unrecorded"}
    # fresh machines can share a host name ("vm"): their boots tell them apart
    boots = f", over {prov['boots']} boots" if prov.get("boots", 1) > len(hosts) else ""
    per_host = ", ".join(f"{h}: {_plural(c, 'trial')}" for h, c in hosts.items())
    text += f" on {_plural(len(hosts), 'host')} ({per_host}{boots})"
    devices = [f"{d} ({_plural(c, 'trial')})" for d, c in prov["devices"].items() if d != "unrecorded"]
    if prov["devices"].get("unrecorded"):  # trials stored before workers recorded their device
        devices.append(f"device not recorded ({_plural(prov['devices']['unrecorded'], 'trial')})")
    text += "; devices: " + ", ".join(devices)
    if prov["unclaimed"]:
        text += f"; {_plural(prov['unclaimed'], 'trial')} recorded no worker"
    if prov.get("sm_counts"):  # an MPS share shows a process fewer SMs, and its kernels, so its bits, follow that
        seen = ", ".join(f"{k} ({_plural(c, 'trial')})" for k, c in prov["sm_counts"].items())
        text += (f"; the GPU's multiprocessors each trial's process saw: {seen} (fewer under an MPS share, which "
                 "changes a trial's bits: the same search at another share trains other weights)")
    return text + "."


def studies_header(storage: str, tag: str, prov: dict, s: dict) -> str:
    """The answers' opening line: where the studies are, the plan (trials per search, seeds, space) and
    how their trials ran (``how_trials_ran`` of ``search.trial_provenance`` over every study)."""
    from .lab2_space import restrict

    space = ("Search space: the lab's full space." if s["space"] is None else
             f"Search space narrowed by this profile to {restrict(s['space'])}.")
    return (f"Studies in `{storage}` (tag `{tag}`); {s['trials']} trials per sampler and seed, seeds {s['seeds']}. "
            f"{space} {how_trials_ran(prov)}")


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


def best_architecture(study: str, trial) -> str:
    """A sentence naming Task 1's best trial (an Optuna trial): its study, accuracy, size, the four sizes and how
    many Linear layers it replaced by Identity."""
    sizes = {k: v for k, v in trial.params.items() if "." not in k}
    identity = sum(v == "identity" for k, v in trial.params.items() if "." in k)
    return (f"Best architecture overall: {study} trial {trial.number}, accuracy {trial.value:.4f}, "
            f"{trial.user_attrs['parameters']:,} parameters: `{sizes}`, {identity} Linear layers replaced by Identity.")


def start_rows(best: dict[str, float], starts: dict[str, dict | None]) -> list[dict]:
    """Table rows, one per Task 2 search: its best and its start (Task 1's best; None where it did not complete)."""
    return [{"objective": label, "best": best[label],
             "start (Task 1's best)": starts[label]["value"] if starts[label] else None,
             "start's trial": starts[label]["number"] if starts[label] else None} for label in best]


def effect_rows(effects: dict[str, dict]) -> list[dict]:
    """Table rows of the within-trial changes (``within_trial`` of each)."""
    return [{"within-trial change": k, **v} for k, v in effects.items()]
