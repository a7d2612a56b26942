"""Lab 3's mixed-precision studies as plans, run by the shared workers.

Phase 1 (all at once): Task 1, the per-layer integer search (TPE); Task 2, one search per format (every
Linear in that format, its parameters chosen per layer) and one over all formats; the cost searches
(accuracy - lambda x average weight bits, one per lambda); the multi-objective search (accuracy up, average
weight bits down); and the uniform-format points (every layer in one format at 8 bits) drawn beside its
front. Phase 2: a short QAT of the front's configurations, re-measured.
"""
from __future__ import annotations

import json
import time

import optuna

from ..quant.study import STUDY_ORDER
from ..search import plan as _plan_mod
from ..search.plan import StudyPlan
from ..search.storage import default_url
from .lab3_precision import FORMAT_SPACE, FP32, params_of, uniform

# Task 1's space: the sheet's integer widths per layer, or the layer left in full precision.
INTEGER_FORMATS = ["integer", FP32]

PARETO = ["maximize", "minimize"]  # accuracy, average weight bits


def default_storage(s: dict) -> str:
    return default_url("lab3")


def _search_settings(s: dict) -> dict:
    """The settings the search's studies depend on: Lab 3's ``seeds`` are the formats notebook's training
    seeds; the search measures the SFT model of ``seed`` alone, so they neither name nor change its studies."""
    return {k: v for k, v in s.items() if k != "seeds"}


def study_settings(s: dict) -> dict:
    return _plan_mod.study_settings(_search_settings(s))


def study_tag(s: dict) -> str:
    return _plan_mod.study_tag(_search_settings(s))


def _name(s: dict, what: str) -> str:
    return f"lab3-{s['profile']}-{what}-{study_tag(s)}"


def _plan(s: dict, what: str, formats, n: int, objective: str = "accuracy", lam: float = 0.0, mode: str = "ptq",
          enqueue=(), sampler: str = "tpe", directions=None) -> StudyPlan:
    return StudyPlan(name=_name(s, what), objective="lab3", settings=study_settings(s),
                     options={"formats": list(formats), "objective": objective, "lam": lam, "mode": mode},
                     sampler=sampler, seed=s["search_seed"], n_trials=n, enqueue=list(enqueue),
                     directions=directions or (PARETO if objective == "pareto" else ["maximize"]))


def _uniform_at_study_setting(layers: list[str], name: str) -> dict:
    """Every layer in format ``name`` at its Lab 3 study setting (8 bits; fixed-width formats at their own)."""
    from ..quant.study import study_params

    params = {k: v for k, v in study_params(name, 8)["weight"].items() if k in FORMAT_SPACE[name]}
    return uniform(layers, name, **params)


def uniform_points(layers: list[str]) -> dict[str, dict]:
    """Every layer in one format at its Lab 3 study setting, as parameters of the all-formats space."""
    return {name: params_of(_uniform_at_study_setting(layers, name), list(FORMAT_SPACE)) for name in STUDY_ORDER}


def baseline_label(name: str, params: dict) -> str:
    """How the answers name a uniform point: ``int8 frac 4``, ``fp32``, ``block_fp width 6 block_size 16``."""
    if name == FP32:
        return "fp32"
    if name == "integer":
        return f"int{params['width']} frac {params['frac_width']}"
    return " ".join([name, *(f"{k} {params[k]}" for k in FORMAT_SPACE[name])])


def integer_baselines(layers: list[str]) -> dict[str, dict]:
    """Task 1's obvious baselines, as parameters of its space: every layer at the same width and frac width
    (all 9 of the sheet's pairs) and every layer in fp32, by label (``int8 frac 4``, ``fp32``)."""
    out = {}
    for width in FORMAT_SPACE["integer"]["width"]:
        for frac in FORMAT_SPACE["integer"]["frac_width"]:
            out[baseline_label("integer", {"width": width, "frac_width": frac})] = params_of(
                uniform(layers, "integer", width=width, frac_width=frac), INTEGER_FORMATS)
    out[baseline_label(FP32, {})] = params_of(uniform(layers, FP32), INTEGER_FORMATS)
    return out


def format_baseline(layers: list[str], name: str) -> dict:
    """A per-format search's baseline: every layer in the format at its Lab 3 study setting (the uniform
    study's point, so its measurement is cached), as parameters of the one-format space."""
    return params_of(_uniform_at_study_setting(layers, name), [name])


def phase1_plans(s: dict, layers: list[str]) -> dict[str, StudyPlan]:
    """Plans by role: ``integer`` (Task 1, which is also Task 2's integer search), ``format:<name>`` (each
    other format), ``all``, ``cost:<lambda>``, ``pareto``, ``uniform``.

    The accuracy searches start from their baselines, queued as their first trials (marked ``enqueued`` in
    their user attributes): Task 1 from ``integer_baselines``, each searched format from its uniform point,
    the all-formats search from every uniform point. Their trial settings count the trials beyond the
    baselines: ``n_trials`` = baselines + ``search_trials`` (``format_trials``)."""
    all_formats = list(FORMAT_SPACE)
    base = integer_baselines(layers)
    # also Task 2's integer search; "int-fp32": the space with the full-precision choice (a new study name, as
    # Optuna refuses other categorical choices for a stored parameter)
    plans = {"integer": _plan(s, "int-fp32", INTEGER_FORMATS, len(base) + s["search_trials"], enqueue=base.values())}
    for name in STUDY_ORDER:
        if name == "integer":
            continue
        if not FORMAT_SPACE[name]:  # a fixed format has one configuration: one trial
            plans[f"format:{name}"] = _plan(s, f"fmt-{name}", [name], 1)
            continue
        plans[f"format:{name}"] = _plan(s, f"fmt-{name}-base", [name], 1 + s["format_trials"],
                                        enqueue=[format_baseline(layers, name)])
    points = uniform_points(layers)
    plans["all"] = _plan(s, "all-base", all_formats, len(points) + s["search_trials"], enqueue=points.values())
    for lam in s["lambdas"]:
        plans[f"cost:{lam:g}"] = _plan(s, f"cost-{lam:g}", all_formats, s["cost_trials"], objective="cost", lam=lam)
    plans["pareto"] = _plan(s, "pareto", all_formats, s["pareto_trials"], objective="pareto")
    plans["uniform"] = _plan(s, "uniform", all_formats, len(points), objective="pareto", enqueue=points.values(),
                             sampler="random")
    return plans


def front(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The Pareto front of a (accuracy, bits) study, fewest bits first, one trial per point (a sampler
    that revisits a configuration gets its cached values again)."""
    points = {}
    for t in sorted(study.best_trials, key=lambda t: t.number):
        points.setdefault(tuple(t.values), t)
    return sorted(points.values(), key=lambda t: (t.values[1], -t.values[0]))


def qat_candidates(study: optuna.Study, k: int, max_bits: float = 8.0) -> list[optuna.trial.FrozenTrial]:
    """Up to ``k`` front configurations at or under ``max_bits``, spread evenly over their bits range."""
    pts = [t for t in front(study) if t.values[1] <= max_bits]
    if len(pts) <= k:
        return pts
    idx = sorted({round(i * (len(pts) - 1) / (k - 1)) for i in range(k)}) if k > 1 else [len(pts) - 1]
    return [pts[i] for i in idx]


def qat_plan(s: dict, candidates: list[optuna.trial.FrozenTrial]) -> StudyPlan:
    return _plan(s, "qat", list(FORMAT_SPACE), max(1, len(candidates)), objective="pareto", mode="qat",
                 enqueue=[t.params for t in candidates], sampler="random")


def check_same_sft(plans: list[StudyPlan], url: str, digest: str) -> None:
    """Stored trials measured on another SFT model (a GPU call that retrained it with other weights) must not
    be mixed with this model's: an error naming both digests and what to do."""
    from ..search.storage import make_storage

    store = make_storage(url)
    have = {s.study_name for s in optuna.get_all_study_summaries(store, include_best_trial=False)}
    for plan in plans:
        if plan.name not in have:
            continue
        trials = optuna.load_study(study_name=plan.name, storage=store).get_trials(deepcopy=False)
        other = {t.user_attrs["sft_digest"] for t in trials if t.user_attrs.get("sft_digest", digest) != digest}
        if other:
            raise RuntimeError(f"study {plan.name!r} in {url} holds trials measured on another SFT model (weights "
                               f"sha256 {', '.join(sorted(d[:12] for d in other))}; this one is {digest[:12]}): "
                               "move that storage aside to start the search over on this model")


def run_phase1(s: dict, layers: list[str], url: str, digest: str, workers, progress=True, first_worker: int = 0,
               report_only: bool = False) -> tuple[dict[str, StudyPlan], dict[str, optuna.Study], float]:
    """Phase 1's studies, all handed to the workers at once: ``(plans by role, studies by role, seconds)``.
    ``digest``: the SFT model's weights sha256, which every stored trial must share."""
    from ..search.run import run_studies

    start = time.time()
    plans = phase1_plans(s, layers)
    if not report_only:  # stored trials of another SFT model (retrained on another machine) never mix in
        check_same_sft(list(plans.values()), url, digest)
    done = run_studies(list(plans.values()), storage=url, workers=workers, progress=progress, desc="Lab 3 search",
                       mps=s["mps"], first_worker=first_worker, report_only=report_only)
    return plans, {role: done[p.name] for role, p in plans.items()}, time.time() - start


def run_qat(s: dict, pareto: optuna.Study, url: str, workers, progress=True, first_worker: int = 0,
            report_only: bool = False) -> tuple[optuna.Study, float]:
    """Phase 2, the QAT of up to ``front_qat`` configurations of the ``pareto`` study's front: ``(study, seconds)``."""
    from ..search.run import run_studies

    start = time.time()
    plan = qat_plan(s, qat_candidates(pareto, s["front_qat"]))
    qat = run_studies([plan], storage=url, workers=workers, progress=progress, desc="Lab 3 QAT of the front",
                      mps=s["mps"], first_worker=first_worker, report_only=report_only)[plan.name]
    return qat, time.time() - start


def run_all(s: dict, storage: str | None = None, progress=True, workers=None, first_worker: int = 0):
    """Phase 1 then the QAT phase; returns ``(phase-1 studies by role, qat study)``."""
    from .. import recipes
    from .lab3_precision import linear_layers

    workers = s["workers"] if workers is None else workers  # None: the settings' own ("auto" or a count)
    url = storage or s["storage"] or default_storage(s)
    base, metrics = recipes.finetuned_model(s)  # trained once here, before any worker needs it
    _, by_role, _ = run_phase1(s, linear_layers(base), url, metrics["sft_digest"], workers, progress, first_worker)
    qat, _ = run_qat(s, by_role["pareto"], url, workers, progress, first_worker)
    return by_role, qat


def task1_numbers(study: optuna.Study, layers: list[str], n_trials: int) -> dict:
    """What Task 1's figure and answers read from its study: the best-so-far curve over its first ``n_trials``
    trials (baselines first), every completed trial with ``baseline`` (its label, or None for a searched trial),
    the baselines alone, and the best trial's per-layer choice (``widths``/``fracs`` of its integer layers,
    ``fp32_layers``) and average weight bits. Layer names are shortened as the answers print them."""
    from ..readings.tables import short
    from ..search.curves import best_so_far

    labels = {_key(p): label for label, p in integer_baselines(layers).items()}
    done = sorted((t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"), key=lambda t: t.number)
    # a queued point (enqueued, or the retry of one that failed: Optuna stores its fixed_params) is a baseline;
    # a sampled one is the search's
    queued = {t.number for t in done if "fixed_params" in t.system_attrs}
    trials = [{"number": t.number, **t.user_attrs,
               "baseline": labels.get(_key(t.params), "queued") if t.number in queued else None} for t in done]
    best = study.best_trial
    chosen = {layer: best.params.get(f"{layer}:format", "integer") for layer in layers}
    ints = [layer for layer in layers if chosen[layer] == "integer"]
    return {"best_so_far": best_so_far(study, key="accuracy", limit=n_trials),
            "best": best.user_attrs["accuracy"], "best_bits": best.user_attrs["weight_bits"],
            "best_trial": best.number,
            "widths": {short(x): best.params[f"{x}:integer.width"] for x in ints},
            "fracs": {short(x): best.params[f"{x}:integer.frac_width"] for x in ints},
            "fp32_layers": [short(x) for x in layers if chosen[x] == FP32], "layers": len(layers),
            "baselines": [{"label": t["baseline"], "number": t["number"], "accuracy": t["accuracy"],
                           "bits": t["weight_bits"]} for t in trials if t["baseline"] is not None],
            "trials": trials}


def _key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)
