"""Lab 3's searched bests measured again on fresh SFT models: each accuracy search's best configuration and the
baseline it is read against, paired per training seed, saved as ``figures/lab3/search_remeasured.json``.

A search picks its best among N trials measured on one SFT model (training seed ``seed``, 0) and one test set,
so its lead over its baseline is biased upwards. Here both configurations are measured by the search's own
objective (``lab3_precision.PrecisionObjective``, PTQ, the same bf16 evaluation path) on the SFT models of fresh
**training seeds** (1, 2, 3 by default: never the search's). A training seed is the seed of the SFT fine-tune
(the new head's initialisation, the batch order, dropout; ``recipes.finetuned_model(seed=...)``), the only
training a PTQ configuration has; the data seed, so the test reviews, stays the search's. Seeds 1 and 2 are
Lab 3 part 1's SFT models (cached once part 1 ran on the machine); the others are trained here (seconds on a GPU).

    python -m labkit.labs.lab3_remeasure --profile full [--seeds 3] [--storage journal:PATH]

The studies are read from the committed ``figures/lab3/studies.journal.xz`` (full profile) or the run's own
storage; the settings from the committed ``search_integer.json``. The pairs: Task 1's best searched trial against
its best baseline (and, where that is fp32, against the best uniform integer one), each per-format and the
all-formats search's best against its queued uniform point where the best is not that point, and the Pareto
headline (the fewest-bits PTQ point within 1 point of fp32 on the front over every study) against fp32.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import optuna

from .. import recipes
from ..results import load_results, result_dir, save_results
from ..search import make_storage
from ..search.storage import shown_url
from . import lab3
from .lab3_precision import PrecisionObjective, linear_layers

TRAINING_SEED = ("the SFT model's training seed (recipes.finetuned_model(seed=...): head initialisation, batch order, "
                 "dropout); the data seed, so the test reviews, stays the search's; each configuration is measured "
                 "by the search's PTQ objective on each seed's SFT model, paired per seed")


def fresh_seeds(s: dict, k: int) -> list[int]:
    """``k`` training seeds that are not the search's (``s["seed"]``)."""
    return [s["seed"] + 1 + i for i in range(k)]


def settings_for(profile: str) -> dict:
    """The stored search's settings (they name its studies and the SFT model it searched)."""
    stored = load_results("lab3", "search_integer", profile)
    if stored is None:
        raise FileNotFoundError(f"{result_dir('lab3', profile) / 'search_integer.json'}: no stored Lab 3 search of "
                                f"profile {profile!r} to re-measure; run the lab3_search notebook first "
                                "(labkit run lab3_search)")
    return dict(stored["settings"])


def default_storage(s: dict) -> str:
    committed = result_dir("lab3", s["profile"]) / "studies.journal.xz"
    return f"journal:{committed}" if committed.is_file() else (s.get("storage") or lab3.default_storage(s))


def _done(study: optuna.Study) -> list:
    return sorted((t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"), key=lambda t: t.number)


def _item(study_name: str, formats: list[str], trial, label: str) -> dict:
    return {"label": label, "study": study_name, "trial": trial.number, "formats": list(formats),
            "params": dict(trial.params), "stored": trial.user_attrs["accuracy"],
            "bits": trial.user_attrs["weight_bits"]}


def pairs_of(s: dict, storage: str, layers: list[str], pareto: dict | None = None) -> dict[str, dict]:
    """``{role: {"best": item, "baseline": item}}`` of the stored studies (the readings' roles: ``integer``,
    ``integer:integer``, ``format:<name>``, ``all``, ``pareto:headline``); a search whose best is one of its
    queued points has nothing to remeasure and no pair."""
    store = make_storage(storage)
    plans = lab3.phase1_plans(s, layers)
    have = {x.study_name for x in optuna.get_all_study_summaries(store, include_best_trial=False)}
    out: dict[str, dict] = {}
    labels = {lab3._key(p): label for label, p in lab3.integer_baselines(layers).items()}
    studies = {}
    for role, plan in plans.items():
        if plan.name not in have:
            continue
        studies[role] = optuna.load_study(study_name=plan.name, storage=store)
        if not plan.enqueue or plan.options["objective"] != "accuracy":
            continue
        done = _done(studies[role])
        queued = [t for t in done if "fixed_params" in t.system_attrs]
        searched = [t for t in done if "fixed_params" not in t.system_attrs]
        if not queued or not searched:
            continue
        best, base = max(searched, key=_acc), max(queued, key=_acc)
        fmts = plan.options["formats"]
        name = "Task 1's best searched configuration" if role == "integer" else f"the {role.split(':')[-1]} search's best"
        if _acc(best) > _acc(base):
            out[role] = {"best": _item(plan.name, fmts, best, name),
                         "baseline": _item(plan.name, fmts, base, labels.get(lab3._key(base.params), "uniform point"))}
        if role == "integer" and labels.get(lab3._key(base.params)) == "fp32":
            ints = [t for t in queued if labels.get(lab3._key(t.params)) not in (None, "fp32")]
            if ints and _acc(best) > _acc(bi := max(ints, key=_acc)):
                out["integer:integer"] = {"best": out.get(role, {}).get("best") or _item(plan.name, fmts, best, name),
                                          "baseline": _item(plan.name, fmts, bi, labels[lab3._key(bi.params)])}
    head = headline_trial(studies, plans, pareto)
    fp32 = [t for t in _done(studies["integer"]) if labels.get(lab3._key(t.params)) == "fp32"] if "integer" in studies else []
    if head is not None and fp32:
        out["pareto:headline"] = {"best": head, "baseline": _item(plans["integer"].name, plans["integer"].options["formats"],
                                                                  fp32[0], "fp32")}
    return out


def headline_trial(studies: dict, plans: dict, pareto: dict | None, max_bits: float = 6.0, within: float = 0.01):
    """The trial behind the Pareto headline's untrained point (the fewest bits within ``within`` of fp32 on the
    stored front over every study), found by its accuracy and bits among the phase-1 studies' trials."""
    from ..readings.lab3_search import MAX_BITS, WITHIN

    if not pareto or not pareto.get("front_all"):
        return None
    ok = [p for p in pareto["front_all"] if p["bits"] <= MAX_BITS and p["accuracy"] >= pareto["fp32"] - WITHIN]
    if not ok:
        return None
    p = min(ok, key=lambda p: p["bits"])
    for role, study in studies.items():
        for t in _done(study):
            if t.user_attrs.get("accuracy") == p["accuracy"] and t.user_attrs.get("weight_bits") == p["bits"]:
                return _item(plans[role].name, plans[role].options["formats"], t,
                             f"the {p['bits']:.2f}-bit front configuration")
    return None


def _acc(t) -> float:
    return t.user_attrs["accuracy"]


def measure(s: dict, dl, base, item: dict) -> dict:
    """One stored configuration measured by the search's own objective on ``base`` (PTQ)."""
    objective = PrecisionObjective(dl, s, base, formats=item["formats"], objective="accuracy", mode="ptq")
    trial = optuna.trial.FixedTrial(item["params"])
    objective(trial)
    return {"accuracy": trial.user_attrs["accuracy"], "bits": trial.user_attrs["weight_bits"],
            "seconds": trial.user_attrs["trial_seconds"]}


def remeasure(s: dict, storage: str | None = None, k: int = 3, dl=None, log=print) -> dict:
    """Measure every pair of ``pairs_of`` on ``k`` fresh seeds' SFT models; returns the numbers to save."""
    start = time.perf_counter()
    storage = storage or default_storage(s)
    dl = dl or recipes.loaders(s)
    seeds = fresh_seeds(s, k)
    pareto = (load_results("lab3", "search_pareto", s["profile"]) or {}).get("numbers")
    pairs, layers, sft, by_id = None, None, [], {}
    for seed in seeds:
        t0 = time.perf_counter()
        base, metrics = recipes.finetuned_model(s, dl, seed=seed)
        sft.append({"seed": seed, "accuracy": metrics["accuracy"], "sft_digest": metrics["sft_digest"],
                    "cached": "cached" in metrics, "seconds": time.perf_counter() - t0})
        log(f"seed {seed}: SFT model {'from the cache' if 'cached' in metrics else 'trained'} "
            f"({metrics['accuracy']:.4f}, {time.perf_counter() - t0:.1f} s)", flush=True)
        if pairs is None:
            layers = linear_layers(base)
            pairs = pairs_of(s, storage, layers, pareto)
            log(f"{len(pairs)} pairs from {shown_url(storage)}: {', '.join(pairs)}", flush=True)
        for role, pair in pairs.items():
            for side in ("best", "baseline"):
                item = pair[side]
                key = json.dumps([item["formats"], item["params"]], sort_keys=True)
                got = by_id.setdefault(key, {})
                if seed not in got:
                    got[seed] = measure(s, dl, base, item)
                    log(f"  seed {seed} {role} {side}: {got[seed]['accuracy']:.4f} ({got[seed]['seconds']:.1f} s; "
                        f"stored on seed {s['seed']}: {item['stored']:.4f})", flush=True)
                item["bits"] = got[seed]["bits"]
    # per side from the measurements by configuration: a configuration in two pairs (Task 1's best against fp32
    # and against int16) is one object, measured once per seed
    for pair in (pairs or {}).values():
        for side in ("best", "baseline"):
            item = pair[side]
            key = json.dumps([item["formats"], item["params"]], sort_keys=True)
            item["accuracy_seeds"] = [by_id[key][seed]["accuracy"] for seed in seeds]
    seconds = time.perf_counter() - start
    log(f"remeasured {len(pairs or {})} pairs on seeds {seeds} in {seconds:.0f} s", flush=True)
    return {"seeds": seeds, "search_seed": s["seed"], "training_seed": TRAINING_SEED, "n_test": dl.sizes["test"],
            "sft": sft, "pairs": pairs or {}, "storage": shown_url(storage), "seconds": seconds}


def run(s: dict, storage: str | None = None, k: int = 3, dl=None, log=print) -> dict:
    """``remeasure`` and save ``search_remeasured.json``; returns its numbers."""
    numbers = remeasure(s, storage, k, dl, log)
    path = save_results("lab3", "search_remeasured", numbers, {**s, "remeasure_seeds": numbers["seeds"]})
    log(f"saved {path}", flush=True)
    return numbers


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m labkit.labs.lab3_remeasure", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="full", choices=("smoke", "quick", "full"))
    ap.add_argument("--seeds", type=int, default=3, help="fresh training seeds (at least 3 for a verdict)")
    ap.add_argument("--storage", default=None, help="the studies (default: the committed journal of the profile)")
    args = ap.parse_args(argv)
    run(settings_for(args.profile), args.storage, args.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
