"""Lab 3's mixed-precision studies as plans, run by the shared workers.

Phase 1 (all at once): Task 1, the per-layer integer search (TPE); Task 2, one search per format (every
Linear in that format, its parameters chosen per layer) and one over all formats; the cost searches
(accuracy - lambda x average weight bits, one per lambda); the multi-objective search (accuracy up, average
weight bits down); and the uniform-format points (every layer in one format at 8 bits) drawn beside its
front. Phase 2: a short QAT of the front's configurations, re-measured.
"""
from __future__ import annotations

import optuna

from ..quant.study import STUDY_ORDER
from ..search import plan as _plan_mod
from ..search.plan import StudyPlan
from ..search.storage import default_url
from .lab3_precision import FORMAT_SPACE, params_of, uniform

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


def uniform_points(layers: list[str]) -> dict[str, dict]:
    """Every layer in one format at its Lab 3 study setting (8 bits; fixed-width formats at their own),
    as parameters of the all-formats space."""
    from ..quant.study import study_params

    out = {}
    for name in STUDY_ORDER:
        params = {k: v for k, v in study_params(name, 8)["weight"].items() if k in FORMAT_SPACE[name]}
        out[name] = params_of(uniform(layers, name, **params), list(FORMAT_SPACE))
    return out


def phase1_plans(s: dict, layers: list[str]) -> dict[str, StudyPlan]:
    """Plans by role: ``integer`` (Task 1, which is also Task 2's integer search), ``format:<name>`` (each
    other format), ``all``, ``cost:<lambda>``, ``pareto``, ``uniform``."""
    all_formats = list(FORMAT_SPACE)
    plans = {"integer": _plan(s, "int", ["integer"], s["search_trials"])}  # also Task 2's integer search
    for name in STUDY_ORDER:
        if name == "integer":
            continue
        searched = bool(FORMAT_SPACE[name])  # a fixed format has one configuration: one trial
        plans[f"format:{name}"] = _plan(s, f"fmt-{name}", [name], s["format_trials"] if searched else 1)
    plans["all"] = _plan(s, "all", all_formats, s["search_trials"])
    for lam in s["lambdas"]:
        plans[f"cost:{lam:g}"] = _plan(s, f"cost-{lam:g}", all_formats, s["cost_trials"], objective="cost", lam=lam)
    plans["pareto"] = _plan(s, "pareto", all_formats, s["pareto_trials"], objective="pareto")
    points = uniform_points(layers)
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


def run_all(s: dict, storage: str | None = None, progress=True, workers=None, first_worker: int = 0):
    """Phase 1 then the QAT phase; returns ``(phase-1 studies by role, qat study)``."""
    from .. import recipes
    from .lab3_precision import linear_layers
    from ..search.run import run_studies

    workers = s["workers"] if workers is None else workers  # None: the settings' own ("auto" or a count)
    url = storage or s["storage"] or default_storage(s)
    base, metrics = recipes.finetuned_model(s)  # trained once here, before any worker needs it
    plans = phase1_plans(s, linear_layers(base))
    check_same_sft(list(plans.values()), url, metrics["sft_digest"])
    studies = run_studies(list(plans.values()), storage=url, workers=workers, progress=progress,
                          desc="Lab 3 search", mps=s["mps"], first_worker=first_worker)
    by_role = {role: studies[p.name] for role, p in plans.items()}
    candidates = qat_candidates(by_role["pareto"], s["front_qat"])
    plan = qat_plan(s, candidates)
    qat = run_studies([plan], storage=url, workers=workers, progress=progress, desc="Lab 3 QAT of the front",
                      mps=s["mps"], first_worker=first_worker)[plan.name]
    return by_role, qat
