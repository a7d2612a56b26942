"""Lab 2's exercises: the search space as a define-by-run sampler, the best-so-far curve of a study, and the
compression-aware objective's control flow (every step injected, so its cases run in microseconds).

``labkit.sandbox.harness.trace_objective`` runs an objective with stand-in steps that log what they are given; the
exercise's cases use it, and the notebook replays stored trials through the student's objective with it.
"""
from __future__ import annotations

import contextlib
import copy
import math
from collections import Counter
from types import SimpleNamespace

import optuna
import torch

from ..labs import lab2_objectives, lab2_space
from ..labs.lab2_space import LINEAR_CHOICES, SQUARE_LINEARS
from ..records.lab2_search import SPACE
from ..search import curves
from .core import Case, differs, exercise

# ---------------------------------------------------------------------------------------------------------------
# lab2.search_space


def _layers(n: int, identity: set[str] = frozenset()) -> dict:
    """Per-layer choices of an n-layer model: every square Linear "linear", those in ``identity`` "identity"."""
    return {f"layer{i}.{name}": "identity" if f"layer{i}.{name}" in identity else "linear"
            for i in range(n) for name in SQUARE_LINEARS}


def _sizes(layers, heads, hidden, inter) -> dict:
    return {"num_hidden_layers": layers, "num_attention_heads": heads, "hidden_size": hidden,
            "intermediate_size": inter}


def _space_case(name, params, hint=None, loose=False, show=None) -> Case:
    sizes = {k: params[k] for k in SPACE if k in params}
    n_id = sum(v == "identity" for k, v in params.items() if "." in k)
    n_layer = sum("." in k for k in params)
    shown = show or (f"FixedTrial({', '.join(f'{k}={v}' for k, v in sizes.items())}"
                     + (f", {n_layer} per-layer choices, {n_id} of them identity" if n_layer else "") + ")")
    return Case(name, kwargs={"params": params, "loose": loose}, show=shown, hint=hint)


def _space_cases() -> list[Case]:
    return [
        _space_case("smallest sizes, every Linear kept", {**_sizes(2, 2, 128, 512), **_layers(2)},
                    hint="return {'config': {the four sizes}, 'linears': {'layer<i>.<name>': choice}} with one "
                         "choice per square Linear of each of the num_hidden_layers layers"),
        _space_case("largest sizes, every Linear kept", {**_sizes(8, 16, 512, 2048), **_layers(8)},
                    hint="the depth decides how many per-layer choices there are: 8 layers x 4 square Linears"),
        _space_case("some Linear layers become Identity",
                    {**_sizes(4, 4, 256, 1024),
                     **_layers(4, {"layer0.attention.self.query", "layer1.attention.output.dense",
                                   "layer3.attention.self.value", "layer3.attention.self.key"})},
                    hint="each choice is trial.suggest_categorical('layer<i>.<name>', ['linear', 'identity']); "
                         "return what the trial gave, not a fixed 'linear'"),
        _space_case("per-layer choices only for the layers the model has",
                    {**_sizes(2, 8, 384, 768),
                     **_layers(8, {"layer1.attention.self.key", "layer5.attention.self.key"})},
                    hint="the trial holds choices for 8 layers but num_hidden_layers is 2: draw layer0 and layer1 "
                         "only (a define-by-run space: the depth drawn first decides what is drawn next)"),
        _space_case("hidden_size and intermediate_size are different fields",
                    {**_sizes(4, 2, 192, 1536), **_layers(4, {"layer2.attention.self.query"})},
                    hint="hidden_size from [128, 192, 256, 384, 512], intermediate_size from [512, 768, 1024, 1536, "
                         "2048], each under its own name"),
        _space_case("192 hidden with 16 heads is valid (12 per head)", {**_sizes(2, 16, 192, 512), **_layers(2)},
                    hint="a head count is valid when it divides hidden_size: nothing else is pruned"),
        _space_case("heads that do not divide hidden_size are pruned", _sizes(2, 16, 200, 512), loose=True,
                    show="a FixedTrial that gives hidden_size=200 (outside the lab's grid, as an edited space "
                         "could), 16 heads; no per-layer choices",
                    hint="if hidden_size % num_attention_heads != 0, raise optuna.TrialPruned right after the four "
                         "sizes, before any per-layer choice is drawn"),
    ]


def _space_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        sizes = {k: rng.choice(v) for k, v in SPACE.items()}
        loose = i == 5
        if loose:  # outside the grid and not divisible: pruned
            sizes["hidden_size"], sizes["num_attention_heads"] = rng.choice([(130, 4), (200, 16), (100, 8)])
        n = max(SPACE["num_hidden_layers"]) if rng.random() < 0.5 else sizes["num_hidden_layers"]
        layers = {f"layer{j}.{name}": rng.choice(LINEAR_CHOICES) for j in range(n) for name in SQUARE_LINEARS}
        cases.append(_space_case(f"random {i}", {**sizes, **layers}, loose=loose))
    return cases


def _space_misnamed(trial):
    arch = {"num_layers": trial.suggest_categorical("num_layers", SPACE["num_hidden_layers"]),
            **{k: trial.suggest_categorical(k, v) for k, v in SPACE.items() if k != "num_hidden_layers"}}
    arch["num_hidden_layers"] = arch.pop("num_layers")
    if arch["hidden_size"] % arch["num_attention_heads"]:
        raise optuna.TrialPruned()
    return {"config": arch, "linears": {f"layer{i}.{n}": trial.suggest_categorical(f"layer{i}.{n}", LINEAR_CHOICES)
                                        for i in range(arch["num_hidden_layers"]) for n in SQUARE_LINEARS}}


def _space_no_identity(trial):
    arch = {k: trial.suggest_categorical(k, v) for k, v in SPACE.items()}
    if arch["hidden_size"] % arch["num_attention_heads"]:
        raise optuna.TrialPruned()
    return {"config": arch, "linears": {f"layer{i}.{n}": "linear" for i in range(arch["num_hidden_layers"])
                                        for n in SQUARE_LINEARS}}


def _space_swapped(trial):
    arch = {"num_hidden_layers": trial.suggest_categorical("num_hidden_layers", SPACE["num_hidden_layers"]),
            "num_attention_heads": trial.suggest_categorical("num_attention_heads", SPACE["num_attention_heads"]),
            "hidden_size": trial.suggest_categorical("intermediate_size", SPACE["intermediate_size"]),
            "intermediate_size": trial.suggest_categorical("hidden_size", SPACE["hidden_size"])}
    if arch["hidden_size"] % arch["num_attention_heads"]:
        raise optuna.TrialPruned()
    return {"config": arch, "linears": {f"layer{i}.{n}": trial.suggest_categorical(f"layer{i}.{n}", LINEAR_CHOICES)
                                        for i in range(arch["num_hidden_layers"]) for n in SQUARE_LINEARS}}


@exercise(
    id="lab2.search_space", spans=(), notebook="lab2_search", points=3,
    title="the architecture space, sampled define-by-run",
    task="Lab 2, Task 1: the search space (depth, heads, hidden and intermediate sizes, each square Linear "
         "kept or made Identity)",
    cases=_space_cases, hidden=_space_hidden, runner="fixed_trial",
    mutants={"a misnamed parameter": _space_misnamed, "ignores the Identity choices": _space_no_identity,
             "hidden and intermediate swapped": _space_swapped},
    hint="suggest the four sizes by their BertConfig names, prune an invalid head count, then one "
         "'linear'/'identity' choice per square Linear of each layer",
)
def sample_architecture(trial: optuna.Trial) -> dict:
    return lab2_space.sample_architecture(trial)


# ---------------------------------------------------------------------------------------------------------------
# lab2.best_so_far


def study_of(values: list) -> optuna.Study:
    """An in-memory study whose trials return ``values`` in order: ``None`` a pruned trial, NaN a failed one
    (Optuna fails a trial whose objective returns NaN), anything else a completed trial of that value."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # each failed trial would log a warning
    try:
        study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
        it = iter(values)

        def objective(trial):
            value = next(it)
            if value is None:
                raise optuna.TrialPruned()
            return value

        study.optimize(objective, n_trials=len(values))
    finally:
        optuna.logging.set_verbosity(verbosity)
    return study


def trial_values(study: optuna.Study) -> list:
    """A study's trial values in trial order, ``None`` for a trial that did not complete (pruned, failed,
    still running): the input of ``best_so_far`` below."""
    return [t.value if t.state == optuna.trial.TrialState.COMPLETE else None
            for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)]


def _curve_cases() -> list[Case]:
    nan = float("nan")
    return [
        Case("increasing", ([0.5, 0.6, 0.7],)),
        Case("decreasing, below zero", ([-0.1, -0.2, -0.3],),
             hint="the running best keeps the first value while later ones are lower; start from -inf (or the "
                  "first value), not 0"),
        Case("ties", ([0.5, 0.5, 0.6, 0.6, 0.55],)),
        Case("a failed trial first", ([None, 0.6, 0.5],),
             hint="a trial that did not complete is no point of the curve: no entry for it, not -inf or None"),
        Case("a failed trial in the middle", ([0.5, None, 0.4, 0.7],),
             hint="skip the failed trial and keep the best so far: the curve goes on from it"),
        Case("NaN: Optuna fails a trial whose objective returned NaN", ([0.5, nan, 0.6],),
             hint="treat NaN like None (math.isnan); max(0.5, nan) and max(nan, 0.5) do not agree"),
        Case("a single trial", ([0.52],)),
        Case("no trials", ([],), hint="no completed trial, no curve: []"),
        Case("limit counts completed trials", ([0.5, None, 0.6, 0.7, 0.9],), {"limit": 3},
             hint="limit: the first `limit` completed trials (the failed one does not count)"),
    ]


def _curve_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        n = rng.randint(0, 15)
        values = [None if rng.random() < 0.2 else float("nan") if rng.random() < 0.05
                  else round(rng.uniform(-1.0, 1.0), rng.choice([1, 3, 6])) for _ in range(n)]
        kwargs = {"limit": rng.randint(0, n)} if rng.random() < 0.4 else {}
        cases.append(Case(f"random {i}: {n} trials", (values,), kwargs))
    return cases


def _done(values):
    return [v for v in values if v is not None and not math.isnan(v)]


def _curve_sorted(values, limit=None):
    return sorted(_done(values))[:limit]


def _curve_restarts(values, limit=None):
    best, out = float("-inf"), []
    for v in values:
        if v is None or math.isnan(v):
            best = float("-inf")
            continue
        best = max(best, v)
        out.append(best)
    return out[:limit]


def _curve_min(values, limit=None):
    best, out = float("inf"), []
    for v in _done(values)[:limit]:
        best = min(best, v)
        out.append(best)
    return out


@exercise(
    id="lab2.best_so_far", notebook="lab2_search", points=2,
    title="the best-so-far curve of a study",
    task="Lab 2, Task 1: the samplers' best-so-far curves (best accuracy after each completed trial)",
    cases=_curve_cases, hidden=_curve_hidden,
    mutants={"sorted values": _curve_sorted, "restarts after a failed trial": _curve_restarts,
             "running minimum": _curve_min},
    hint="walk the values in trial order, skip None and NaN, keep the running maximum, one entry per completed "
         "trial, the first `limit` of them",
)
def best_so_far(values: list, limit: int | None = None) -> list[float]:
    return curves.best_so_far(study_of(values), limit=limit)


# ---------------------------------------------------------------------------------------------------------------
# lab2.compression_objective


TRAINED, COMPRESSED = "built+trained", "built+trained+compressed"
POST_TRAINED, CONTROL = "built+trained+compressed+post-trained", "built+trained+post-trained"
LABELS = {TRAINED: "trained", COMPRESSED: "compressed", POST_TRAINED: "post-trained", CONTROL: "control"}
RECORDED = ("accuracy_trained", "accuracy_compressed", "accuracy_post_trained", "accuracy_control")


def accuracies_of(user_attrs: dict) -> dict:
    """A stored trial's recorded accuracies as ``trace_objective``'s table: each model state -> its accuracy."""
    return {state: user_attrs[key] for state, key in zip((TRAINED, COMPRESSED, POST_TRAINED, CONTROL), RECORDED)
            if key in user_attrs}


@contextlib.contextmanager
def _injected(build, train, compress, evaluate, post_train):
    """labkit's ``NASObjective._run`` with its steps replaced by the given callables (main training and
    post-training told apart by their learning rates)."""
    mod = lab2_objectives

    def fit(model, loader, epochs, lr, **_):
        out = (post_train if lr == "post" else train)(model)
        return out if isinstance(out, dict) else {"train_seconds": 0.0}

    fakes = {"build_model": lambda arch, seed: build(arch), "count_parameters": lambda m: 0,
             "compress": lambda m, quant, prune, **_: SimpleNamespace(model=compress(m)),
             "train": SimpleNamespace(train=fit, evaluate=lambda m, loader, **_: {"accuracy": evaluate(m)},
                                      pick_device=lambda device: torch.device("cpu"))}
    before = {k: getattr(mod, k) for k in fakes}
    try:
        for k, v in fakes.items():
            setattr(mod, k, v)
        yield
    finally:
        for k, v in before.items():
            setattr(mod, k, v)


def _compare_objective(expected: dict, got: dict) -> str | None:
    why = differs(expected["value"], got["value"], where="the returned value")
    if why:
        return why
    want, have = Counter(expected["calls"]), Counter(got["calls"])
    if want != have:
        missing, extra = sorted((want - have).elements()), sorted((have - want).elements())
        return ("calls differ (each names the model's steps so far):"
                + (f" missing {missing}" if missing else "") + (f" unexpected {extra}" if extra else ""))
    return differs(expected["recorded"], got["recorded"], where="record")


_compare_objective.tolerance = "exact (value, calls in any order the data allows, recorded accuracies)"


def _accuracies(trained, compressed=None, post=None, control=None) -> dict:
    table = {TRAINED: trained, COMPRESSED: compressed, POST_TRAINED: post, CONTROL: control}
    return {k: v for k, v in table.items() if v is not None}


def _objective_case(name, mode, acc, hint=None) -> Case:
    arch = {"config": _sizes(2, 4, 128, 512), "linears": _layers(2, {"layer1.attention.self.key"})}
    shown = f"mode={mode!r}, accuracies " + ", ".join(f"{LABELS[k]} {v:g}" for k, v in acc.items())
    return Case(name, (arch, mode), {"accuracies": acc}, show=shown, hint=hint)


def _objective_cases() -> list[Case]:
    return [
        _objective_case("no compression: the trained accuracy", "none", _accuracies(0.81, 0.7, 0.79, 0.82),
                        hint="mode 'none': build, train, evaluate, record accuracy_trained and return it; nothing "
                             "is compressed"),
        _objective_case("compressed: its accuracy after compression", "compress", _accuracies(0.81, 0.74),
                        hint="the value is the compressed model's accuracy: model = compress(model), then evaluate "
                             "that model"),
        _objective_case("compressed: the value even when compression helps", "compress", _accuracies(0.62, 0.66),
                        hint="return the compressed accuracy, not the best of the two"),
        _objective_case("compressed + post-training, with its control", "compress+train",
                        _accuracies(0.81, 0.74, 0.80, 0.83),
                        hint="post-train the compressed model and return its accuracy; then post-train a copy of "
                             "the trained, uncompressed model as long (the control) and record its accuracy"),
        _objective_case("post-training that lowers accuracy is still the value", "compress+train",
                        _accuracies(0.70, 0.66, 0.64, 0.71),
                        hint="the value is the accuracy after post-training, whatever it is"),
        _objective_case("an untrained model at chance", "compress+train", _accuracies(0.5, 0.5, 0.5, 0.5),
                        hint="every step runs even when every accuracy is 0.5"),
    ]


def _objective_hidden(rng) -> list[Case]:
    cases = []
    for i in range(6):
        mode = rng.choice(lab2_objectives.MODES)
        acc = _accuracies(*(round(rng.uniform(0.45, 0.9), 4) for _ in range(4)))
        cases.append(_objective_case(f"random {i}", mode, acc))
    return cases


def _objective_eval_first(arch, mode, build, train, compress, evaluate, post_train, record):
    model = build(arch)
    train(model)
    value = evaluate(model)
    record("accuracy_trained", value)
    if mode != "none":
        control = copy.deepcopy(model)
        model = compress(model)
        record("accuracy_compressed", value)
        if mode == "compress+train":
            post_train(model)
            record("accuracy_post_trained", value)
            post_train(control)
            record("accuracy_control", evaluate(control))
    return value


def _objective_post_trains_uncompressed(arch, mode, build, train, compress, evaluate, post_train, record):
    model = build(arch)
    train(model)
    value = evaluate(model)
    record("accuracy_trained", value)
    if mode != "none":
        control = copy.deepcopy(model)
        compressed = compress(model)
        value = evaluate(compressed)
        record("accuracy_compressed", value)
        if mode == "compress+train":
            post_train(model)  # the uncompressed model, not the compressed one
            value = evaluate(model)
            record("accuracy_post_trained", value)
            post_train(control)
            record("accuracy_control", evaluate(control))
    return value


def _objective_no_post_training(arch, mode, build, train, compress, evaluate, post_train, record):
    model = build(arch)
    train(model)
    value = evaluate(model)
    record("accuracy_trained", value)
    if mode != "none":
        model = compress(model)
        value = evaluate(model)
        record("accuracy_compressed", value)
    return value


@exercise(
    id="lab2.compression_objective", spans=("mode",), notebook="lab2_search", points=3,
    title="the compression-aware objective's steps",
    task="Lab 2, Task 2: the compression-aware objective (train, compress, optionally post-train, with the "
         "equal-training control)",
    cases=_objective_cases, hidden=_objective_hidden, runner="objective", compare=_compare_objective,
    mutants={"evaluates before compressing": _objective_eval_first,
             "post-trains the uncompressed model": _objective_post_trains_uncompressed,
             "ignores post-training": _objective_no_post_training},
    hint="build, train, evaluate; for a compressing mode evaluate compress(model); for 'compress+train' "
         "post-train that compressed model and evaluate it, then post-train the trained uncompressed model (the "
         "control) and record its accuracy; return the last accuracy of the model the mode scores",
)
def compression_objective(arch, mode, build, train, compress, evaluate, post_train, record) -> float:
    # labkit's own trial code (NASObjective._run) with its steps injected; the trial records only accuracies here
    obj = lab2_objectives.NASObjective(
        SimpleNamespace(train=None, test=None, sizes={"test": 0}),
        {"device": "cpu", "seed": 0, "epochs": 1, "lr": "train", "post_epochs": 1, "post_lr": "post"},
        mode=mode, quant={} if mode != "none" else None, prune=None)
    trial = SimpleNamespace(set_user_attr=lambda k, v: record(k, v) if k in RECORDED else None)
    with _injected(build, train, compress, evaluate, post_train):
        return obj._run(trial, arch)
