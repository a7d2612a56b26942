"""Lab 2's readings (notebook lab2_search): what its answers state, from samplers.json, compression_aware.json
and, once stored, remeasured.json (the searched bests and their comparators retrained with fresh seeds).

- Task 1: the samplers' mean best over their seeds (independent searches, so unpaired: ``stats.unpaired``); the best
  architecture is the best completed trial; the trials at chance by depth; and whether the best architecture is
  the best at all (a best of N trials on one training seed each: not established until it and the best trial of
  another architecture are retrained with fresh seeds).
- Task 2: compression's within-trial cost and post-training's change, per trial (``stats.replicates``: each trial
  is its own architecture), against the compressed model and against the equal-training control, with the trials
  at chance after training read apart; and each search's best against its start (Task 1's best, run first): a
  best of N, so not established until remeasured.json retrains both under that objective with fresh seeds.
"""
from __future__ import annotations

import dataclasses
import json

from . import stats
from .core import Reading, finding, quantities, selected

# the findings the committed results state, as claims (labkit.readings.core.compute): every bold one, the
# remeasures among them
CLAIMS = {"samplers.verdict": ('level',), "best.winner": ('level',), "collapse.by_depth": ('holds',),
          "compression.effect_remeasured": ('level',), "start.compressed.remeasured": ('level',),
          "start.any": ('fails',), "post.vs_control_trained": ('level',), "post.vs_compressed_trained": ('higher',)}

S, C, R = "samplers", "compression_aware", "remeasured"
CHANCE_SHARE = 0.1  # a depth that lost this share of its trials to chance is reported as collapsed
RULE_BEST_OF_N = ("a searched best is a best of N trials on one training seed: not established until it and its "
                  "comparator are retrained with >= 3 fresh seeds and compared by " + stats.RULE)
REMEASURE = "python -m labkit.labs.lab2_remeasure"


def readings(payloads: dict[str, dict | None]) -> list[Reading]:
    s, c, r = payloads.get(S), payloads.get(C), payloads.get(R)
    r = r["numbers"] if r else None
    out: list[Reading] = []
    if s is not None:
        num = s["numbers"]
        n = n_test(num["trials"], s["settings"])
        out += sampler_readings(num["bands"], n)
        out += best_readings(num["best"], num["trials"], n, r)
        out.append(collapse_reading(num["trials"], n))
    if c is not None:
        num, cs = c["numbers"], c["settings"]
        n = n_test(num["trials"], cs)
        effect = compression_reading(num["trials"]["compressed"], cs["quant_width"], cs["prune_sparsity"], n)
        again = compression_remeasured(r, cs["quant_width"], cs["prune_sparsity"], n)
        if again is None:
            out.append(effect)
        else:  # the fresh seeds' before/after pairs are the finding; the search's trials are context
            out += [dataclasses.replace(effect, says=effect.says.replace("**", ""), expect=()), finding(again)]
        out += start_readings(num["trials"], n, r)
        out += post_readings(num["trials"]["compressed + post-training"], n)
    return out


def n_test(trials: dict[str, list[dict]], settings: dict) -> int:
    """Test reviews behind each accuracy: what the trials recorded, else the settings' test size (full IMDb)."""
    return next((t["n_test"] for ts in trials.values() for t in ts if "n_test" in t),
                settings.get("test_size") or 25_000)


# --- Task 1 ---------------------------------------------------------------------------------------------

def sampler_readings(bands: dict[str, dict], n: int) -> list[Reading]:
    """The leader against the runner-up (``samplers.verdict``) and against each sampler below it."""
    ranked = sorted(bands, key=lambda k: -bands[k]["final_mean"])
    top, out = ranked[0], []
    for other in ranked[1:]:
        q = {**stats.unpaired(bands[top]["final"], bands[other]["final"], n), "a_name": top, "b_name": other}
        v = q.pop("verdict")
        pm = f"{q['difference']:+.4f} ± {q['se']:.4f} (SE over seeds {q['se_seed']:.4f}, test-set {q['se_test']:.4f})"
        if other == ranked[1]:
            says = {"higher": f"**{top.upper()} wins**: mean best {q['a']:.4f} against {other}'s {q['b']:.4f}, {pm}, "
                              f"{q['why']}",
                    "level": f"**No sampler can be called better at this budget**: {top} ({q['a']:.4f}) and {other} "
                             f"({q['b']:.4f}) are level, {pm}: {q['why']}",
                    "not established": f"**No sampler can be called better at this budget**: with one seed per "
                                       f"sampler the spread over seeds is not measured; {top} leads {other} by "
                                       f"{q['difference']:.4f}, {'within' if abs(q['difference']) <= 2 * q['se_test'] else 'beyond'} "
                                       f"2 test-set SE (2 x {q['se_test']:.4f})"}[v]
            key = "samplers.verdict"
        else:
            says = {"higher": f"{other.capitalize()} trails {top} by {q['difference']:.4f} ± {q['se']:.4f}, "
                              f"{q['why']}",
                    "level": f"{other.capitalize()} is level with {top} as well ({-q['difference']:+.4f} ± "
                             f"{q['se']:.4f}: {q['why']})",
                    "not established": f"{other.capitalize()} is {q['difference']:.4f} below {top} on one seed: not "
                                       "established"}[v]
            key = f"samplers.{other}_vs_{top}"
        out.append(Reading(key, v, says, stats.RULE_UNPAIRED, q, S))
    return out


def architecture(params: dict) -> str:
    """An architecture as the model it builds: its sizes and the Linear layers it replaces by Identity (a Grid
    trial names no per-layer choice, a searched trial names "linear" for every layer it keeps)."""
    return json.dumps({k: v for k, v in params.items() if "." not in k or v != "linear"}, sort_keys=True)


def runner_up(best: dict, trials: dict[str, list[dict]]) -> tuple[str, dict] | None:
    """The best completed trial of another architecture than ``best``'s: ``(study, trial)``."""
    mine = architecture(best["params"])
    others = [(name, t) for name, ts in trials.items() for t in ts if architecture(t["params"]) != mine]
    return max(others, key=lambda x: x[1]["value"]) if others else None


def best_readings(best: dict, trials: dict[str, list[dict]], n: int, remeasured: dict | None) -> list[Reading]:
    """The stored best is the best completed trial (a claim); and whether it is established as the best
    architecture: a best of N on one seed is not, until remeasured.json retrains it and the runner-up."""
    every = [t["value"] for ts in trials.values() for t in ts]
    top = max(every)
    out = [Reading("best.is_best_trial", "holds" if abs(best["value"] - top) < 1e-12 else "fails",
                   f"{best['study']} trial {best['trial']}, accuracy {best['value']:.4f}, is the best of the "
                   f"{len(every)} completed trials" if abs(best["value"] - top) < 1e-12 else
                   f"the stored best ({best['value']:.4f}) is not the best completed trial ({top:.4f})",
                   "the stored best equals the highest completed trial's value", {"best": best["value"], "top": top,
                                                                                    "trials": len(every)}, S)]
    ru = runner_up(best, trials)
    if ru is None:
        return out
    def se_to(v):
        return stats.difference([best["value"]], [v], n).se_test

    within = sum(best["value"] - v <= 2 * se_to(v) for v in every)
    name, t = ru
    z = (best["value"] - t["value"]) / se_to(t["value"])
    q = {"best": best["value"], "runner_up": t["value"], "runner_up_study": name, "runner_up_trial": t["number"],
         "runner_up_se": z, "within_2se": within, "trials": len(every)}
    lead = (f"{within} of the {len(every)} trials (itself included) lie within 2 SE of the difference from it, and "
            f"the best trial of another architecture ({name} trial {t['number']}, {t['value']:.4f}) is {z:.2f} SE "
            "below it")
    task1 = (remeasured or {}).get("task1")
    if task1 and (task1["best"].get("study"), task1["best"]["trial"]) != (best["study"], best["trial"]):
        task1 = None  # retrains of another search's best (a stale file): not this one's
    if not task1:
        return out + [Reading("best.winner", "not established",
                              f"**This architecture is not established as the best one**: {lead}; each trial trained "
                              f"once on one seed, so its lead is that of a best of {len(every)} (retrained with fresh "
                              f"seeds by `{REMEASURE}`: not stored)", RULE_BEST_OF_N, q, S)]
    a, b, seeds = task1["best"]["accuracy"], task1["runner_up"]["accuracy"], remeasured["seeds"]
    d = stats.difference(a, b, remeasured.get("n_test", n))
    v = stats.verdict(d)
    k = len(seeds)
    head = {"higher": f"**Retrained with {k} fresh seeds, the best architecture stays ahead of the runner-up**",
            "level": f"**Retrained with {k} fresh seeds, the best architecture and the runner-up are level**: "
                     "neither is established as the better one",
            "lower": f"**Retrained with {k} fresh seeds, the runner-up is ahead of the search's best**"}[v]
    return out + [Reading("best.winner", v, f"{head} (best minus runner-up {d.text()}, seeds {seeds}); in the search "
                          f"{lead}", RULE_BEST_OF_N,
                          {**q, **quantities(d, a, b, ("best", "runner-up")), "fresh_seeds": seeds}, S)]


def collapse_by_depth(trials: dict[str, list[dict]], n: int) -> dict[int, dict]:
    """Per depth (``num_hidden_layers``): trials and how many ended at chance (``stats.at_chance``)."""
    out: dict[int, dict] = {}
    for ts in trials.values():
        for t in ts:
            row = out.setdefault(t["params"].get("num_hidden_layers"), {"trials": 0, "at_chance": 0})
            row["trials"] += 1
            row["at_chance"] += stats.at_chance(t["value"], n)
    return dict(sorted(out.items()))


def collapse_reading(trials: dict[str, list[dict]], n: int) -> Reading:
    """Holds when some depth lost ``CHANCE_SHARE`` of its trials or more to chance (a claim for the committed
    results: their eight-layer trials did); says the counts by depth either way."""
    by = collapse_by_depth(trials, n)
    total, flat = sum(r["trials"] for r in by.values()), sum(r["at_chance"] for r in by.values())
    per = "; ".join(f"{d} layers: {r['at_chance']} of {r['trials']} ({r['at_chance'] / r['trials']:.0%})"
                    for d, r in by.items())
    lost = [d for d, r in by.items() if r["at_chance"] >= CHANCE_SHARE * r["trials"] and r["at_chance"]]
    says = (f"**{flat} of {total} trials ended at chance** (within 2 test-set SE of 0.5: a model that answers one "
            f"class), by depth: {per}" if lost else
            f"No depth lost a tenth of its trials to chance ({flat} of {total} trials at chance; by depth: {per})")
    return Reading("collapse.by_depth", "holds" if lost else "fails", says,
                   f"a depth with >= {CHANCE_SHARE:.0%} of its trials within 2 test-set SE of 0.5",
                   {"by_depth": [{"depth": d, **r} for d, r in by.items()], "at_chance": flat, "trials": total,
                    "lost": lost}, S)


# --- Task 2 ---------------------------------------------------------------------------------------------

def _replicates(key: str, pairs: list[tuple[float, float]], says: dict[str, str], n: int,
                extra: dict | None = None) -> Reading:
    """Per-trial differences a - b of accuracy ``pairs`` (each on the same ``n`` test reviews) by
    ``stats.replicates``, the test set's part included; ``says[verdict]`` formats ``{mean}``, ``{se}``, ``{k}``,
    ``{median}``, ``{lo}``, ``{hi}``, ``{above}``, ``{below}`` and ``{why}`` (beyond or within t SE, or not
    resolvable at n reviews); fewer than two trials: not established."""
    diffs = [a - b for a, b in pairs]
    means = (sum(a for a, _ in pairs) / len(pairs), sum(b for _, b in pairs) / len(pairs)) if pairs else None
    d = stats.replicates(diffs, means, n) if diffs else None
    s = sorted(diffs)
    k = len(s)
    why = "" if d is None or k < 2 else (f"beyond {d.t:.2f} SE" if d.established else
                                         d.verdict().removeprefix("not established (").removesuffix(")"))
    q = {"mean": d.mean if d else float("nan"), "se": d.se if d else float("nan"), "k": k,
         "median": (s[(k - 1) // 2] + s[k // 2]) / 2 if k else float("nan"), "lo": s[0] if s else float("nan"),
         "hi": s[-1] if s else float("nan"), "above": sum(x > 0 for x in s), "below": sum(x < 0 for x in s),
         "differences": list(diffs), "t": d.t if d and k > 1 else float("nan"),
         "se_test": d.se_test if d else float("nan"), "why": why, **(extra or {})}
    v = "not established" if k < 2 else stats.verdict(d)
    text = says[v].format(**q) if v in says else f"{k} trial{'s' if k != 1 else ''}: not established"
    return Reading(key, v, text, stats.RULE_REPLICATES, q, C)


SPREAD = "{mean:+.4f} ± {se:.4f} over {k} trials (median {median:+.4f}, range {lo:+.4f} to {hi:+.4f})"
ABOVE = "{mean:+.4f} ± {se:.4f} over {k} trials (median {median:+.4f}, range {lo:+.4f} to {hi:+.4f}; {above} of {k} above 0)"


def _flat_after_training(t: dict, n: int) -> bool:
    """Trial ``t``'s trained model ended at chance (it answers one class: what follows it reads nothing)."""
    return "accuracy_trained" in t and stats.at_chance(t["accuracy_trained"], n)


def compression_reading(trials: list[dict], width: int, sparsity: float, n: int = 25_000) -> Reading:
    """Compressed minus trained accuracy of the same model, over the compressed search's trials that left chance in
    training: a model at chance answers one class before and after, and its zero says nothing about compression."""
    done = [t for t in trials if "accuracy_compressed" in t and "accuracy_trained" in t]
    flat = [t for t in done if _flat_after_training(t, n)]
    d = [(t["accuracy_compressed"], t["accuracy_trained"]) for t in done if t not in flat]
    left = (f"; {len(flat)} trial{'s' if len(flat) != 1 else ''} at chance after training left out" if flat else "")
    what = (f"int{width} + {sparsity:.0%} L1 pruning changed the same trained model's accuracy by {{mean:+.4f}} ± "
            f"{{se:.4f}} over {{k}} trials (median {{median:+.4f}}, range {{lo:+.4f}} to {{hi:+.4f}}; {{below}} of {{k}} "
            f"below 0{left})")
    return _replicates("compression.effect", d, {
        "lower": f"**Compression costs accuracy**: {what}, {{why}}",
        "level": f"**Compression's cost is not established**: {what}, {{why}}",
        "higher": f"**Compression raised accuracy on average**: {what}, {{why}}"}, n, {"at_chance": len(flat)})


def compression_remeasured(remeasured: dict | None, width: int, sparsity: float, n: int) -> Reading | None:
    """Compressed minus trained accuracy of the same model in every fresh run of the compressed search's remeasure
    (its best and its start, each retrained with fresh seeds: independent before/after pairs), by the rule of
    replicates with the shared test set's part; None where no fresh run recorded both."""
    fresh = ((remeasured or {}).get("task2") or {}).get("compressed") or {}
    runs = [(role, run) for role in ("best", "start") for run in (fresh.get(role) or {}).get("runs") or []
            if "accuracy_compressed" in run and "accuracy_trained" in run]
    if len(runs) < 2:
        return None
    pairs = [(run["accuracy_compressed"], run["accuracy_trained"]) for _, run in runs]
    k = len(remeasured.get("seeds") or [])
    what = (f"int{width} + {sparsity:.0%} L1 pruning lowered accuracy in {{below}} of {{k}} before/after pairs (the "
            f"compressed search's best and its start, each retrained with {k} fresh seeds): {{mean:+.4f}} ± {{se:.4f}} "
            "(range {lo:+.4f} to {hi:+.4f})")
    return _replicates("compression.effect_remeasured", pairs, {
        "lower": f"**Compression costs accuracy**: {what}, {{why}}",
        "level": f"**Compression's cost is not established**: {what}, {{why}}",
        "higher": f"**Compression raised accuracy**: {what}, {{why}}"}, remeasured.get("n_test", n))


def start_of(trials: list[dict]) -> dict | None:
    """A Task 2 search's start: Task 1's best queued as trial 0, or that point run again after a failure."""
    return next((t for t in trials if t.get("number") == 0 or t.get("retry_of") == 0), None)


def start_readings(trials: dict[str, list[dict]], n: int, remeasured: dict | None) -> list[Reading]:
    """Each search's best against its start, and whether any search is established above its start."""
    out = []
    fresh = (remeasured or {}).get("task2") or {}
    for label, ts in trials.items():
        key, start = f"start.{label}", start_of(ts)
        if start is None:
            out.append(Reading(key, "not established", f"{label}: its start (Task 1's best) is not among its "
                               "completed trials", RULE_BEST_OF_N, {}, C))
            continue
        best = max(ts, key=lambda t: t["value"])
        q = {"start": start["value"], "best": best["value"], "start_trial": start["number"],
             "best_trial": best["number"], "trials": len(ts)}
        if best["value"] <= start["value"] or best is start:
            out.append(Reading(key, "not established", f"{label}: its best is its start ({start['value']:.4f}): no "
                               "trial beat it", RULE_BEST_OF_N, q, C))
            continue
        d = stats.difference([best["value"]], [start["value"]], n)
        q.update(difference=d.mean, se=d.se_test, z=d.mean / d.se_test)
        searched = Reading(key, "not established",
                           f"{label}: in the search {start['value']:.4f} -> best {best['value']:.4f} (trial "
                           f"{best['number']}), {d.mean:+.4f} ± {d.se_test:.4f} (SE of the difference, {q['z']:+.1f} "
                           f"SE), the best of {len(ts)} trials on one training seed", RULE_BEST_OF_N, q, C)
        f = fresh.get(label)
        if f and (f["best"]["trial"], f["start"]["trial"]) != (best["number"], start["number"]):
            f = None  # retrains of other trials (a stale file): not this search's
        if not f:
            out += selected(searched, len(ts))
            continue
        a, b = f["best"]["accuracy"], f["start"]["accuracy"]
        n_fresh = remeasured.get("n_test", n)
        r = stats.difference(a, b, n_fresh)
        v = stats.verdict(r)
        k = len(remeasured["seeds"])
        side = "below" if all(x < 0 for x in r.per_seed) else "above" if all(x > 0 for x in r.per_seed) else ""
        rel = {"higher": "is above its start", "lower": "is below its start",
               "level": "and its start are not told apart"
                        + (f" (its best {side} its start in every fresh seed)" if side else "")}[v]
        flat = [f"its {role}'s seed {seed} ({x:.4f})" for role, xs in (("best", a), ("start", b))
                for seed, x in zip(remeasured["seeds"], xs) if stats.at_chance(x, n_fresh)]
        flat_says = (f"; {' and '.join(flat)} ended at chance: that architecture does not always train at this "
                     "setting" if flat else "")
        again = Reading(f"{key}.remeasured", v, f"retrained under its objective with {k} fresh seeds, **its best "
                        f"(trial {best['number']}) {rel}**: {r.text()}{flat_says}", RULE_BEST_OF_N,
                        {**q, **quantities(r, a, b, ("best", "start")), "fresh_seeds": remeasured["seeds"],
                         "fresh_at_chance": len(flat)}, C)
        out += selected(searched, len(ts), again)
    beat = [r.key.split(".")[1] for r in out if r.key.endswith(".remeasured") and r.verdict == "higher"]
    why = "" if fresh else f" (no search's best was retrained with fresh seeds: `{REMEASURE}`)"
    out.append(Reading("start.any", "holds" if beat else "fails",
                       f"**{', '.join(beat)} beat {'its' if len(beat) == 1 else 'their'} start**, retrained with fresh "
                       "seeds" if beat else f"**No search's best is established above its start**{why}",
                       "a search beat its start when its start reading is higher", {"beat": beat}, C))
    return out


def post_readings(trials: list[dict], n: int) -> list[Reading]:
    """Post-training per trial: minus the compressed model and minus the equal-training control, over every
    trial and over those that left chance in training; and what the trials at chance after training did."""
    both = [t for t in trials if "accuracy_post_trained" in t and "accuracy_compressed" in t]
    ctl = [t for t in both if "accuracy_control" in t]
    flat = [t for t in both if _flat_after_training(t, n)]
    trained = [t for t in both if t not in flat]
    out = [_replicates("post.vs_compressed", [(t["accuracy_post_trained"], t["accuracy_compressed"]) for t in both], {
        "higher": f"**Post-training raised the compressed models**: post-trained minus compressed {SPREAD}, {{why}}",
        "level": f"**Post-training's change is not established**: post-trained minus compressed {SPREAD}, {{why}}",
        "lower": f"**Post-training lowered the compressed models**: post-trained minus compressed {SPREAD}, {{why}}"},
        n)]
    if not ctl:
        out.append(Reading("post.vs_control", "not established",
                           "No equal-training control was trained for these results (no trial records "
                           "`accuracy_control`): what post-training adds is not separated from what the extra training "
                           "does on its own", stats.RULE_REPLICATES, {}, C))
        return out
    vs = f"post-trained minus control {ABOVE}"
    out.append(_replicates("post.vs_control", [(t["accuracy_post_trained"], t["accuracy_control"]) for t in ctl], {
        "higher": f"**The post-trained compressed models end above their equal-training control**: {vs}, {{why}}",
        "level": f"**The post-trained compressed models and their equal-training control are not told apart**: {vs}, "
                 "{why}",
        "lower": f"**The uncompressed model given the same training stays ahead**: {vs}, {{why}}"}, n))
    if not flat:
        return out
    lifted = [t["accuracy_post_trained"] for t in flat if not stats.at_chance(t["accuracy_post_trained"], n)]
    controls = [t for t in flat if "accuracy_control" in t]
    up = sum(not stats.at_chance(t["accuracy_control"], n) for t in controls)
    out.append(Reading("post.at_chance", "holds",
                       f"{len(flat)} of {len(both)} trials were at chance after training: post-training lifted "
                       f"{len(lifted)} of their compressed copies off it"
                       + (f" (to {min(lifted):.4f}-{max(lifted):.4f})" if lifted else "")
                       + f", the same training {up} of their {len(controls)} controls",
                       "at chance: within 2 test-set SE of 0.5", {"at_chance": len(flat), "trials": len(both),
                                                                  "lifted": len(lifted), "controls_lifted": up}, C))
    rest = f"Over the {len(trained)} trials that left chance in training"
    tc = [t for t in trained if "accuracy_control" in t]
    out.append(_replicates("post.vs_control_trained", [(t["accuracy_post_trained"], t["accuracy_control"]) for t in tc], {
        "higher": f"Against their equal-training control, post-training **ends above the control**: {vs}, {{why}}",
        "level": f"Against their equal-training control, post-trained and control are **not told apart**: {vs}, {{why}}",
        "lower": f"Against their equal-training control, **the uncompressed model given the same training stays "
                 f"ahead**: {vs}, {{why}}"}, n))
    same = rest
    out.append(_replicates("post.vs_compressed_trained",
                           [(t["accuracy_post_trained"], t["accuracy_compressed"]) for t in trained], {
        "higher": f"{same}, **post-training raised the compressed models**: post-trained minus compressed {SPREAD}, "
                  "{why}",
        "level": f"{same}, **post-training's change is not established**: post-trained minus compressed {SPREAD}, "
                 "{why}",
        "lower": f"{same}, **post-training lowered the compressed models**: post-trained minus compressed {SPREAD}, "
                 "{why}"}, n))
    # trials at chance after training move both readings over every trial (0.5 -> 0.8 is no recovery from
    # compression): those over the trials that trained are the findings, the rest context
    context = ("post.vs_compressed", "post.vs_control")
    return [dataclasses.replace(r, says=r.says.replace("**", "")) if r.key in context else
            finding(r) if r.key.endswith("_trained") else r for r in out]
