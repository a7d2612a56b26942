"""Lab 2's answers as Markdown from its numbers (unit-tested, so the notebook only calls them)."""
from __future__ import annotations

import math

from ..search.samplers import TPE_STARTUP
from ..seeds import accuracy_se


def sampler_rows(bands: dict[str, dict]) -> list[dict]:
    """Table rows, best sampler first: final best per seed, mean and its standard error over seeds."""
    rows = [{"sampler": name, "seeds": len(b["final"]), "trials": b["trials"], "mean best": b["final_mean"],
             "SE over seeds": b["final_sem"], "per seed": ", ".join(f"{v:.4f}" for v in b["final"])}
            for name, b in bands.items()]
    return sorted(rows, key=lambda r: -r["mean best"])


def sampler_verdict(bands: dict[str, dict], n_test: int, grid_size: int) -> str:
    """Which sampler found better architectures, with its uncertainty, for ``bands`` (``search.band``
    of each sampler's best-so-far curves over seeds)."""
    rows = sampler_rows(bands)
    top, second = rows[0], rows[1]
    diff = top["mean best"] - second["mean best"]
    sems = [r["SE over seeds"] for r in (top, second)]
    combined = math.sqrt(sum(s * s for s in sems)) if all(math.isfinite(s) for s in sems) else float("nan")
    test_se = accuracy_se(top["mean best"], n_test)
    trials, seeds = top["trials"], top["seeds"]
    text = (f"With {trials} trials per search and {seeds} seed{'s' if seeds > 1 else ''} per sampler, the mean "
            "best accuracy is " + ", ".join(f"{r['sampler']} {r['mean best']:.4f}"
                                           + (f" (SE {r['SE over seeds']:.4f})" if math.isfinite(r["SE over seeds"])
                                              else "") for r in rows) + ". ")
    if not math.isfinite(combined):
        text += (f"One seed per sampler gives no spread over seeds: the {diff:.4f} lead of {top['sampler']} over "
                 f"{second['sampler']} is {'within' if diff < 2 * test_se else 'beyond'} two test-set standard "
                 f"errors (2 x {test_se:.4f}), and cannot be called a verdict. ")
    elif diff > 2 * combined:
        text += (f"**{top['sampler'].upper()} wins**: its lead over {second['sampler']} ({diff:.4f}) exceeds two "
                 f"standard errors of the difference over seeds (2 x {combined:.4f}). ")
    else:
        text += (f"**No sampler can be called better at this budget**: {top['sampler']} leads {second['sampler']} "
                 f"by {diff:.4f}, within two standard errors of the difference over seeds (2 x {combined:.4f}); "
                 f"one test-set standard error is {test_se:.4f} ({n_test:,} reviews). ")
    if trials <= TPE_STARTUP:
        text += (f"TPE's first {TPE_STARTUP} trials are random (its startup phase), so with {trials} trials it never "
                 "modelled anything: here it is Random with other seeds. ")
    else:
        text += (f"TPE samples randomly for its first {TPE_STARTUP} trials, then proposes architectures near the good "
                 f"ones, which is where its curve can pull away from Random's; with concurrent workers it counts "
                 "running trials as bad results (constant liar), so the workers spread out. ")
    text += (f"Grid walks a seeded shuffle of its {grid_size} points (sizes only: a fixed grid cannot hold "
             f"depth-dependent Identity choices), so {trials} trials cover {trials / grid_size:.0%} of it.")
    return text


def within_trial(trials: list[dict], after: str, before: str = "accuracy_trained") -> dict:
    """Mean/min/max of ``after - before`` over completed trials (the same model before and after), so
    architecture and training noise cancel."""
    d = [t[after] - t[before] for t in trials if after in t and before in t]
    if not d:
        raise ValueError(f"within_trial: no trial records both {before!r} and {after!r}")
    return {"mean": sum(d) / len(d), "min": min(d), "max": max(d), "trials": len(d)}


def compression_answer(best: dict[str, float], effects: dict[str, dict], start: dict, quant_width: int,
                       sparsity: float, post_epochs: float, n_test: int) -> str:
    """``best``: best value per objective label; ``effects``: ``within_trial`` results; ``start``: Task 1's
    best trial (``value``, ``study``) that every compression-aware search ran first."""
    se = accuracy_se(best["no compression"], n_test)
    c, r = effects["compression, no post-training"], effects["post-training after compression"]
    text = (f"All three searches started from Task 1's best architecture ({start['study']}, accuracy "
            f"{start['value']:.4f}) and then let TPE explore. Best values: uncompressed "
            f"{best['no compression']:.4f}, after int{quant_width} + {sparsity:.0%} L1 pruning "
            f"{best['compressed']:.4f}, and with {post_epochs:g} epoch of post-training "
            f"{best['compressed + post-training']:.4f} (one test-set standard error: {se:.4f}). The same model "
            f"before and after is the cleaner measure: compression changed accuracy by {c['mean']:+.4f} on average "
            f"over {c['trials']} trials ({c['min']:+.4f} to {c['max']:+.4f}), and post-training then changed it by "
            f"{r['mean']:+.4f} ({r['min']:+.4f} to {r['max']:+.4f}). ")
    if abs(r["mean"]) >= se:
        text += (f"Post-training {'raised' if r['mean'] > 0 else 'lowered'} accuracy on average by more than one "
                 "standard error" + (": at this learning rate and length it moved the compressed models away from "
                                     "what they had learnt rather than adapting them to compression. "
                                     if r["mean"] < 0 else ", recovering what compression cost. "))
    if abs(c["mean"]) < se:
        text += ("On average that is within one standard error: compression costs these models little, so "
                 "objectives measured before and after it rank architectures alike, and the compression-aware "
                 "search mostly re-finds the uncompressed search's architectures.")
    elif c["mean"] < 0:
        text += ("Compression costs accuracy, and unevenly across architectures (the per-trial range), so an "
                 "objective measured after compression rewards the architectures that tolerate it, which the "
                 "uncompressed search does not look for; post-training recovers part of the loss, and "
                 "searching with it in the loop ranks architectures by what they recover to.")
    else:
        text += ("Compression raised accuracy on average, beyond one standard error: at this width and sparsity "
                 "it acts on these briefly trained models more as a regulariser than as a loss of information.")
    return text


def shortfall(done: dict[str, int], planned: int) -> str:
    """A sentence naming the studies that finished fewer than ``planned`` trials ('' when none did): their
    curves are cut, and comparisons at equal budget use the shortest."""
    short = {name: n for name, n in done.items() if n < planned}
    if not short:
        return ""
    return ("Not every search finished its " + f"{planned} trials: " + ", ".join(f"{name} {n}" for name, n in
                                                                               sorted(short.items()))
            + f" completed; curves compared at equal budget stop at {min(done.values())} trials. ")


def drawn_from(prov: dict) -> str:
    """Who ran the trials of a figure drawn without running any (``search.trial_provenance``)."""
    def tally(d, short=False):
        return ", ".join(f"{k[:7] + k[40:] if short and len(k) >= 40 else k} ({v})" for k, v in d.items())
    devices = {k: v for k, v in prov["devices"].items() if k != "unrecorded"}
    return (f"Drawn from the stored studies; no trial ran here. {prov['trials']} completed trials, at commits "
            f"{tally(prov['commits'], short=True)}, on " + (f"{tally(devices)}" if devices else "")
            + (f"{' and ' if devices else ''}hosts {tally(prov['hosts'])} (device not recorded by those trials)"
               if prov["devices"].get("unrecorded") else "") + ".")


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
    return text + "."


def studies_header(storage: str, tag: str, prov: dict, s: dict) -> str:
    """The answers' opening line: where the studies are, the plan (trials per search, seeds, space) and
    how their trials ran (``how_trials_ran`` of ``search.trial_provenance`` over every study)."""
    from ..labs.lab2_space import restrict

    space = ("Search space: the lab's full space." if s["space"] is None else
             f"Search space narrowed by this profile to {restrict(s['space'])}.")
    return (f"Studies in `{storage}` (tag `{tag}`); {s['trials']} trials per sampler and seed, seeds {s['seeds']}. "
            f"{space} {how_trials_ran(prov)}")
