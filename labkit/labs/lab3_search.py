"""What the lab3_search notebook reads from its finished studies (``labkit.labs.lab3``): each task's numbers as its
JSON stores them (``search_integer``, ``search_formats``, ``search_pareto``), and the rows and numbers the notebook
shows beside them (``labkit.narrate.lab3_search`` words them). ``bit_cost`` arguments are the notebook's exercise
function (the student's once its check passed, labkit's otherwise), which counts the bits shown beside the searches'
own."""
from __future__ import annotations

import optuna

from ..quant import average_bits, quantize
from ..search.curves import best_so_far, trial_provenance
from ..search.plan import StudyPlan
from ..search.storage import shown_url
from . import lab3
from ..readings.tables import format_rows, front_of, short
from .lab3_precision import FORMAT_SPACE, config_tensors, sample_config, selection, uniform

# The uniform points counted both ways before the search: every layer in one format at these parameters.
UNIFORM = (("fp32", {}), ("integer", {"width": 8, "frac_width": 4}), ("block_fp", {"width": 6, "block_size": 16}),
           ("block_log", {"width": 4, "block_size": 32}), ("mxint8", {}), ("binary_scaling", {}))


def base_numbers(s: dict, sft: dict, fp32: float, n_test: int, layers: list[str], storage: str) -> dict:
    """The searches' base (``narrate.lab3_search.base_text`` words it): the SFT weights' digest, fp32 accuracy,
    test reviews, the Linear layers searched, and where the studies are (their shown URL and tag)."""
    return {"sft_digest": sft["sft_digest"], "fp32": fp32, "n_test": n_test, "layers": len(layers),
            "storage": shown_url(storage), "tag": lab3.study_tag(s)}


def uniform_rows(base, layers: list[str], fp32: float, bit_cost) -> list[dict]:
    """Each ``UNIFORM`` point's average weight bits counted by ``bit_cost`` and by ``average_bits`` on the model
    quantized by it."""
    rows = []
    for name, params in UNIFORM:
        config = uniform(layers, name, **params)
        counted = bit_cost(fp32, config_tensors(base, config), 0.0)["weight_bits"]
        model = quantize(base, selection(config)).model
        rows.append({"every layer": lab3.baseline_label(name, config[layers[0]][1]), "bit_cost": counted,
                     "labkit average_bits": average_bits(model)["weight_bits"]})
    return rows


def completed(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]


def config_of(trial: optuna.trial.FrozenTrial, layers: list[str], plan: StudyPlan) -> dict:
    """The per-layer configuration (``{layer: (format, params)}``) that ``trial`` of ``plan``'s study measured."""
    return sample_config(optuna.trial.FixedTrial(trial.params), layers, plan.options["formats"])


def uniform_trials(studies: dict[str, optuna.Study]) -> dict[str, optuna.trial.FrozenTrial]:
    """The uniform study's trials by format (one format each)."""
    return {next(iter(t.user_attrs["formats"])): t for t in completed(studies["uniform"])}


# --- Task 1 -------------------------------------------------------------------------------------------------

def task1(studies: dict[str, optuna.Study], plans: dict[str, StudyPlan], layers: list[str], fp32: float) -> dict:
    """What ``search_integer.json`` stores: ``lab3.task1_numbers`` (the baselines are the study's first
    trials), fp32 and the uniform study's int8 point."""
    integer = lab3.task1_numbers(studies["integer"], layers, plans["integer"].n_trials)
    points = uniform_trials(studies)
    integer.update(fp32=fp32, uniform_int8=points["integer"].values[0] if "integer" in points else None)
    return integer


def task1_choice_rows(integer: dict, layers: list[str]) -> list[dict]:
    """The best trial's choice per layer: its integer width and frac width, or fp32."""
    return [{"layer": short(layer), "choice": "fp32" if short(layer) in integer["fp32_layers"] else
             f"int{integer['widths'][short(layer)]} frac {integer['fracs'][short(layer)]}"} for layer in layers]


def task1_baseline_rows(integer: dict) -> list[dict]:
    return [{"baseline": b["label"], "accuracy": b["accuracy"], "weight bits": b["bits"]} for b in integer["baselines"]]


# --- Task 2 -------------------------------------------------------------------------------------------------

def task2(studies: dict[str, optuna.Study], plans: dict[str, StudyPlan], fp32: float) -> dict:
    """What ``search_formats.json`` stores: each format's search (its best-so-far curve, best and bits) and the
    all-formats search (its curve, best and the format counts of its best trial)."""
    per_format, curves = {}, {}
    for name in FORMAT_SPACE:
        role = "integer" if name == "integer" else f"format:{name}"  # Task 1 is the integer search
        n = plans[role].n_trials  # each search's own count: its baselines and the trials beyond them
        # Task 1 also offers fp32 layers: the integer row keeps its trials with every layer in integer
        own = [t for t in sorted(completed(studies[role]), key=lambda t: t.number)[:n]
               if set(t.user_attrs["formats"]) == {name}]
        curves[name] = [max(t.user_attrs["accuracy"] for t in own[: i + 1]) for i in range(len(own))]
        best = max(own, key=lambda t: t.user_attrs["accuracy"])
        per_format[name] = {"best": best.user_attrs["accuracy"], "bits": best.user_attrs["weight_bits"],
                            "trials": len(curves[name])}
    all_best = studies["all"].best_trial
    all_formats = {"best": all_best.user_attrs["accuracy"], "bits": all_best.user_attrs["weight_bits"],
                   "counts": all_best.user_attrs["formats"]}
    curves["all formats"] = best_so_far(studies["all"], key="accuracy", limit=plans["all"].n_trials)
    return {"best_so_far": curves, "rows": format_rows(per_format, fp32), "all_formats": all_formats, "fp32": fp32}


# --- cost and the Pareto front --------------------------------------------------------------------------------

def per_lambda(studies: dict[str, optuna.Study], lambdas: list[float]) -> dict[float, dict]:
    """Each cost search's best trial: its accuracy, weight bits and format counts."""
    out = {}
    for lam in lambdas:
        t = studies[f"cost:{lam:g}"].best_trial
        out[lam] = {"accuracy": t.user_attrs["accuracy"], "bits": t.user_attrs["weight_bits"],
                    "counts": t.user_attrs["formats"]}
    return out


def counted_rows(best: dict[float, dict], studies: dict[str, optuna.Study], plans: dict[str, StudyPlan], base,
                 layers: list[str], bit_cost) -> list[dict]:
    """Each lambda's best configuration (``per_lambda``) counted again by ``bit_cost``."""
    rows = []
    for lam, r in best.items():
        role = f"cost:{lam:g}"
        c = bit_cost(r["accuracy"], config_tensors(base, config_of(studies[role].best_trial, layers, plans[role])), lam)
        rows.append({"lambda": lam, "accuracy": r["accuracy"], "weight bits (bit_cost)": c["weight_bits"],
                     "cost (bit_cost)": c["cost"]})
    return rows


def point(t: optuna.trial.FrozenTrial) -> dict:
    return {"accuracy": t.user_attrs["accuracy"], "bits": t.user_attrs["weight_bits"],
            "formats": t.user_attrs["formats"], "ptq": t.user_attrs["accuracy_ptq"]}


def pareto_numbers(studies: dict[str, optuna.Study], qat_study: optuna.Study, cost: list[dict], fp32: float,
                   search_seconds: float, qat_seconds: float) -> dict:
    """What ``search_pareto.json`` stores: the multi-objective study's front, every configuration any phase-1
    study measured (PTQ) and the front over all of them, the uniform points, the QAT'd front, the cost searches'
    rows (``cost_rows``), fp32, the seconds each phase took and the front's configurations."""
    front = lab3.front(studies["pareto"])
    cloud = [{"accuracy": t.user_attrs["accuracy"], "bits": t.user_attrs["weight_bits"]}
             for st in studies.values() for t in completed(st)]
    return {"front": [point(t) for t in front], "front_all": front_of(cloud), "cloud": cloud,
            "uniform": [{"format": name, **point(t)} for name, t in uniform_trials(studies).items()],
            "qat": [point(t) for t in completed(qat_study)], "cost": cost, "fp32": fp32,
            "search_seconds": search_seconds, "qat_seconds": qat_seconds, "front_configs": [t.params for t in front]}


def front_rows(studies: dict[str, optuna.Study], plans: dict[str, StudyPlan], base, layers: list[str],
               bit_cost) -> list[dict]:
    """The multi-objective study's front, each configuration's average weight bits counted by ``bit_cost``."""
    return [{"bits": bit_cost(t.user_attrs["accuracy"], config_tensors(base, config_of(t, layers, plans["pareto"])),
                              0.0)["weight_bits"],
             "accuracy": t.user_attrs["accuracy"],
             "formats": ", ".join(f"{k} x{v}" for k, v in t.user_attrs["formats"].items())}
            for t in lab3.front(studies["pareto"])]


def search_cost(studies: dict[str, optuna.Study], qat_study: optuna.Study, search_seconds: float,
                qat_seconds: float) -> dict:
    """What the searches and the QAT cost here (``narrate.lab3_search.cost_text`` words it): their seconds, how many
    trials reused a measured configuration, and how the trials ran (``search.trial_provenance``)."""
    every = list(studies.values()) + [qat_study]
    return {"search_seconds": search_seconds, "qat_seconds": qat_seconds,
            "trials": sum(len(st.trials) for st in every),
            "cached": sum(bool(t.user_attrs.get("cached")) for st in every for t in st.trials),
            "provenance": trial_provenance(every)}
