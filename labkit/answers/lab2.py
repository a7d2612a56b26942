"""Lab 2's answers as Markdown from its numbers (unit-tested, so the notebook only calls them)."""
from __future__ import annotations

import math

from ..search.samplers import TPE_STARTUP
from ..labs.lab2_summary import (  # noqa: F401  (the answers' inputs, also read from here)
    _plural, how_trials_ran, post_vs_control, sampler_rows, shortfall, spread, studies_header, within_trial)
from ..readings.stats import accuracy_se, at_chance


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
        # a lead that rounds to 0.0000 is a tie, not a lead
        lead = (f"{top['sampler']} and {second['sampler']} are level (their means differ by less than 0.0001)"
                if diff < 5e-5 else f"{top['sampler']} leads {second['sampler']} by {diff:.4f}")
        text += (f"**No sampler can be called better at this budget**: {lead}, "
                 f"within two standard errors of the difference over seeds (2 x {combined:.4f}); "
                 f"one test-set standard error is {test_se:.4f} ({n_test:,} reviews). ")
        text += _trailing(top, rows[2:], test_se)
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


def _trailing(top: dict, rest: list[dict], test_se: float) -> str:
    """A sentence per sampler below the runner-up whose gap to the leader exceeds two standard errors of the
    difference over seeds (a tie at the top is not a tie of every sampler)."""
    text = ""
    for r in rest:
        gap = top["mean best"] - r["mean best"]
        se = math.sqrt(top["SE over seeds"] ** 2 + r["SE over seeds"] ** 2)
        if math.isfinite(se) and gap > 2 * se:
            text += (f"{r['sampler'].capitalize()} trails {top['sampler']} by {gap:.4f}, beyond two standard errors "
                     f"over seeds (2 x {se:.4f}) but {'within' if gap < test_se else 'beyond'} one test-set "
                     "standard error. ")
    return text


def compression_answer(best: dict[str, float], effects: dict[str, dict], start: dict, quant_width: int,
                       sparsity: float, post_epochs: float, n_test: int, controlled: bool = False) -> str:
    """``best``: best value per objective label; ``effects``: ``within_trial`` results; ``start``: Task 1's
    best trial (``value``, ``study``) that every compression-aware search ran first; ``controlled``: the
    post-training trials recorded their equal-training control (``control_text``)."""
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
                                     if r["mean"] < 0 else f" (read against its {'' if controlled else 'missing '}"
                                     "control below). "))
    if abs(c["mean"]) < se:
        text += ("On average that is within one standard error: compression costs these models little, so "
                 "objectives measured before and after it rank architectures alike, and the compression-aware "
                 "search mostly re-finds the uncompressed search's architectures.")
    elif c["mean"] < 0:
        text += ("Compression costs accuracy, and unevenly across architectures (the per-trial range), so an "
                 "objective measured after compression rewards the architectures that tolerate it, which the "
                 "uncompressed search does not look for; with post-training in the loop, architectures are ranked "
                 "by their accuracy after it.")
    else:
        text += ("Compression raised accuracy on average, beyond one standard error: at this width and sparsity "
                 "it acts on these briefly trained models more as a regulariser than as a loss of information.")
    return text


def start_text(trials: dict[str, list[dict]], n_test: int) -> str:
    """Each Task 2 search's best against its own first trial, Task 1's best queued as trial 0 (or that point run
    again after a failure): a search that did not beat its start found no better architecture for its objective."""
    rows = []
    for label, ts in trials.items():
        first = [t for t in ts if t.get("number") == 0 or t.get("retry_of") == 0]
        if not first:
            return ""  # the start is not among the completed trials: nothing to compare
        start, best = first[0]["value"], max(t["value"] for t in ts)
        rows.append((label, start, best, (best - start) / accuracy_se(start, n_test)))
    beat = [r for r in rows if r[3] > 2]
    text = "Each search against its start (Task 1's best, run first): " + "; ".join(
        f"{label} {start:.4f} -> best {best:.4f}" + (" (the start itself)" if best <= start else f" ({z:+.1f} test-set SE)")
        for label, start, best, z in rows) + ". "
    if not beat:
        return text + ("**No search beat its start by more than two test-set standard errors**: in these trials no "
                       "objective found an architecture better than Task 1's, so the best values say how that "
                       "architecture fares under each objective, not which architecture each objective prefers.")
    return text + (f"Beyond two test-set standard errors only {', '.join(r[0] for r in beat)} beat "
                   f"{'its' if len(beat) == 1 else 'their'} start, with one training seed per trial (no spread over "
                   "seeds)" + ("; the others did not." if len(beat) < len(rows) else "."))


def drawn_from(prov: dict) -> str:
    """Who ran the trials of a figure drawn without running any (``search.trial_provenance``)."""
    def tally(d, short=False):
        return ", ".join(f"{k[:7] + k[40:] if short and len(k) >= 40 else k} ({v})" for k, v in d.items())
    devices = {k: v for k, v in prov["devices"].items() if k != "unrecorded"}
    return (f"Drawn from the stored studies; no trial ran here. {prov['trials']} completed trials, at commits "
            f"{tally(prov['commits'], short=True)}, on " + (f"{tally(devices)}" if devices else "")
            + (f"{' and ' if devices else ''}hosts {tally(prov['hosts'])} (device not recorded by those trials)"
               if prov["devices"].get("unrecorded") else "") + ".")


def collapse_by_depth(trials: dict[str, list[dict]], n_test: int) -> dict[int, dict]:
    """Per depth (``num_hidden_layers``): trials and how many ended at chance (within two test-set standard
    errors of 0.5: the model answers one class), over every study's completed trials."""
    out: dict[int, dict] = {}
    for ts in trials.values():
        for t in ts:
            depth = t["params"].get("num_hidden_layers")
            row = out.setdefault(depth, {"trials": 0, "at_chance": 0})
            row["trials"] += 1
            row["at_chance"] += at_chance(t["value"], n_test)
    return dict(sorted(out.items()))


def collapse_text(by_depth: dict[int, dict], lr: float, best_params: dict, epochs: float = 1.0,
                  warmup: float = 0.0) -> str:
    """What the collapsed trials mean for the search's winner; ``warmup``: the trials' warm-up fraction."""
    total = sum(r["trials"] for r in by_depth.values())
    flat = sum(r["at_chance"] for r in by_depth.values())
    per = "; ".join(f"{d} layers: {r['at_chance']} of {r['trials']} ({r['at_chance'] / r['trials']:.0%})"
                    for d, r in by_depth.items())
    setting = f"lr {lr:g}" + (f" with a linear warm-up over the first {warmup:.0%} of the steps" if warmup else "")
    if not flat:
        return f"No trial ended at chance ({total} trials at {setting}; per depth: {per})."
    fine = [d for d, r in by_depth.items() if r["at_chance"] == 0]
    text = (f"**{flat} of {total} trials ended at chance** (a model that answers one class), by depth: {per}. "
            f"These models did not leave chance at {setting} from random initialisation in {epochs:g} epoch"
            f"{'s' if epochs != 1 else ''}" + (f"; every {'/'.join(map(str, fine))}-layer one did" if fine else "")
            + ". ")
    deeper = [d for d, r in by_depth.items() if r["at_chance"] and d > min(by_depth)]
    if fine and deeper and warmup:
        text += (f"So even with warm-up the deeper models do not all train at this learning rate, and the winner "
                 f"({best_params.get('num_hidden_layers')} layers) reflects which depths train here as much as which "
                 "architecture is better; a learning rate scaled with depth, or searched, is the next setting to try.")
    elif fine and deeper:
        text += (f"So the winner ({best_params.get('num_hidden_layers')} layers) reflects which depths train at this "
                 "learning rate as much as which architecture is better: the deeper models were not given a setting "
                 "they train in (warm-up, a learning rate scaled with depth, or the learning rate searched), and until "
                 "they are, this search cannot say that the small architecture is the better one.")
    else:
        text += "The best trial is read among those that trained; the collapsed ones say nothing about their architecture."
    return text


def beats_control(g: dict) -> bool:
    """Post-training's gain over its control is established: median above 0 and beyond its spread (the
    lower quartile above 0 too, and at least three quarters of the trials above 0: with few trials the
    interpolated quartile alone can sit above 0 while half of them lost)."""
    return g["median"] > 0 and g["q1"] > 0 and g["above_zero"] >= 0.75 * g["trials"]


def control_text(g: dict | None, post_epochs: float, post_lr: float | None) -> str:
    """Post-training read against its equal-training control (``post_vs_control``), or that none was trained."""
    if g is None:
        return "No equal-training control was trained for these results (no trial records `accuracy_control`)."
    c = g["control_gain"]
    text = (f"Against its equal-training control (the same trained model, uncompressed, trained {post_epochs:g} epoch "
            + (f"at lr {post_lr:g} " if post_lr else "") + "with the same seed and batches), post-trained compressed "
            f"minus control per trial: **median {g['median']:+.4f}**, mean {g['mean']:+.4f}, interquartile range "
            f"{g['q1']:+.4f} to {g['q3']:+.4f}, range {g['min']:+.4f} to {g['max']:+.4f}; {g['above_zero']} of "
            f"{g['trials']} trials above 0 (the control itself moved by median {c['median']:+.4f} from its trained "
            "accuracy). ")
    if beats_control(g):
        return text + ("**The post-trained compressed models beat their equal-training control**: with compression "
                       "in place, the extra training ends above what the same training gives the uncompressed model.")
    if g["median"] < 0 and g["q3"] < 0:
        return text + ("The uncompressed model trained as long stays ahead: post-training does not recover all that "
                       "compression cost.")
    return text + ("The gain over the control is not established (its interquartile range reaches 0): post-training "
                   "brings the compressed models about as far as the same training brings the uncompressed ones.")


def chance_text(trials: list[dict], n_test: int) -> str:
    """Trials at chance after training, and how many of them post-training and the control lifted off it: a few
    such trials carry the mean of post-training's change, so the reader learns where it comes from."""
    both = [t for t in trials if {"accuracy_trained", "accuracy_post_trained", "accuracy_control"} <= t.keys()]
    flat = [t for t in both if at_chance(t["accuracy_trained"], n_test)]
    if not flat:
        return ""
    lifted = [t["accuracy_post_trained"] for t in flat if not at_chance(t["accuracy_post_trained"], n_test)]
    controls = sum(not at_chance(t["accuracy_control"], n_test) for t in flat)
    return (f" {len(flat)} of {len(both)} trials were at chance after training: post-training lifted "
            f"{len(lifted)} of their compressed copies off it"
            + (f" (to {min(lifted):.4f}-{max(lifted):.4f})" if lifted else "")
            + f", the same training {controls} of their controls."
            + (" These trials make the mean; the median reads the others." if lifted else ""))


def post_training_text(trials: list[dict], start_value: float, n_test: int, post_epochs: float,
                       post_lr: float | None = None) -> str:
    """Post-training's within-trial change with its median and spread, then read against its equal-training
    control where the trials recorded one (``control_text``), since the extra training helps on its own."""
    d = sorted(t["accuracy_post_trained"] - t["accuracy_compressed"] for t in trials
               if "accuracy_post_trained" in t and "accuracy_compressed" in t)
    if not d:
        return ""
    k = len(d)
    median = d[k // 2] if k % 2 else (d[k // 2 - 1] + d[k // 2]) / 2
    both = [t for t in trials if "accuracy_post_trained" in t and "accuracy_trained" in t]
    above = sum(t["accuracy_post_trained"] > t["accuracy_trained"] for t in both)
    clearly = sum(t["accuracy_post_trained"] > t["accuracy_trained"] + 2 * accuracy_se(t["accuracy_trained"], n_test)
                  for t in both)
    big = max(d)
    g = post_vs_control(trials)
    if median <= 0:
        return (f"Post-training's change per trial: mean {sum(d) / k:+.4f}, **median {median:+.4f}**, range {d[0]:+.4f} "
                f"to {big:+.4f} over {k} trials: the {post_epochs:g} epoch of training with compression in place did "
                "not raise accuracy here. " + control_text(g, post_epochs, post_lr) + chance_text(trials, n_test))
    if g is not None:
        return (f"Post-training's change per trial (over the compressed accuracy): mean {sum(d) / k:+.4f}, "
                f"**median {median:+.4f}**, range {d[0]:+.4f} to {big:+.4f} over {k} trials. "
                + control_text(g, post_epochs, post_lr) + chance_text(trials, n_test))
    return (f"Post-training's change per trial: mean {sum(d) / k:+.4f}, **median {median:+.4f}**, range {d[0]:+.4f} "
            f"to {big:+.4f} over {k} trials"
            + (f" (the largest, {big:+.4f}, carries the mean)" if big > 3 * abs(median) and k > 2 else "") + ". "
            f"{above} of {len(both)} post-trained models end above their own uncompressed accuracy ({clearly} by more "
            f"than two test-set standard errors): the {post_epochs:g} epoch of extra training helps on its own, which no equal-training "
            "control (the uncompressed model trained as long) separates here, so this search does not show that "
            "post-training recovers what compression cost (Lab 1 measures that control: extra training alone "
            "raised its fp32 model too). " + control_text(None, post_epochs, post_lr))


NAMES = ("samplers", "compression_aware")
ANSWERS_FILE = "answers.md"


def render(payloads: dict[str, dict | None]) -> str:
    """``figures/lab2/answers.md`` from the stored ``samplers`` and ``compression_aware`` results."""
    from ..labs.lab2_space import grid_space
    from ..search import grid_points
    from .sources import header

    parts = [header("Lab 2: architecture search with Optuna, then compression-aware search", payloads,
                    "notebooks/lab2_search.ipynb")]
    s_p, c_p = payloads.get("samplers"), payloads.get("compression_aware")
    if s_p is not None:
        s, num = s_p["settings"], s_p["numbers"]
        trials = [t for ts in num["trials"].values() for t in ts]
        n_test = next((t["n_test"] for t in trials if "n_test" in t), s.get("test_size") or 25_000)
        planned = s["trials"]
        done = num.get("completed") or {k: len(v) for k, v in num["trials"].items()}
        grid = len(grid_points(grid_space(s["space"])))
        best = num["best"]
        by_depth = collapse_by_depth(num["trials"], n_test)
        params = {k: v for k, v in best["params"].items() if "." not in k}
        parts += ["## Task 1: Random vs Grid vs TPE", table_md(sampler_rows(num["bands"])),
                  *([drawn_from(num["trials_from"])] if num.get("report_only") and num.get("trials_from") else []),
                  "- **Samplers.** " + shortfall(done, planned) + sampler_verdict(num["bands"], n_test, grid),
                  f"- **Best architecture.** {best['study']} trial {best['trial']}, accuracy {best['value']:.4f}: "
                  f"`{params}`, {sum(v == 'identity' for k, v in best['params'].items() if '.' in k)} Linear "
                  f"layers replaced by Identity. " + collapse_text(by_depth, s["lr"], params, s.get("epochs", 1.0),
                                                                   s.get("warmup", 0.0))]
    if c_p is not None:
        c, num = c_p["settings"], c_p["numbers"]
        effects = num["within_trial"]
        post = num["trials"]["compressed + post-training"]
        n_test = next((t["n_test"] for ts in num["trials"].values() for t in ts if "n_test" in t), 25_000)
        against = start_text(num["trials"], n_test)
        parts += ["## Task 2: compression-aware search",
                  "- **Compression-aware search.** "
                  + shortfall(num.get("completed") or {k: len(v) for k, v in num["best_so_far"].items()},
                              c["compression_trials"])
                  + compression_answer(num["best"], effects, num["start"], c["quant_width"], c["prune_sparsity"],
                                       c["post_epochs"], n_test, controlled=post_vs_control(post) is not None),
                  *(["- **Against the start.** " + against] if against else []),
                  "- **Post-training, read with its spread"
                  + (" and against its control.** " if post_vs_control(post) is not None else ".** ")
                  + post_training_text(post, num["start"]["value"], n_test, c["post_epochs"], c.get("post_lr"))]
    if s_p is None and c_p is None:
        parts.append("No stored numbers: nothing to render.")
    return "\n\n".join(parts) + "\n"


def table_md(rows: list[dict]) -> str:
    from ..report import table

    return table(rows)
