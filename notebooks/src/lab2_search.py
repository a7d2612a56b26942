# %% [markdown]
# # Lab 2: architecture search with Optuna, then compression-aware search
#
# **Task 1** searches BERT architectures trained from random initialisation on IMDb (one epoch per trial in
# the full profile) with three samplers given the same budget: Random, Grid and TPE. Each sampler runs with
# several seeds, so its best-so-far curve is drawn as a mean with a band, and the verdict comes with its
# uncertainty. **Task 2** makes the search compression-aware: starting from Task 1's best architecture,
# three TPE searches differ only in what a trial returns: accuracy after training; after fixed-point
# quantization and L1 pruning inside the trial; and after a further short training with compression in place.
# A trial of the last kind also trains its uncompressed model as long (same learning rate, seed and batches):
# the equal-training control its gain is read against. Models train with a linear learning-rate warm-up
# (`warmup`, a fraction of the steps) where the profile sets one: post-LN BERTs from random initialisation
# collapse to chance without it at the deeper end of the space.
#
# The space uses real `BertConfig` fields: `num_hidden_layers` [2, 4, 8], `num_attention_heads`
# [2, 4, 8, 16], `hidden_size` [128..512], `intermediate_size` [512..2048], and for Random/TPE a
# Linear-or-Identity choice for every square Linear (Q, K, V, attention output) of every layer. Grid
# searches the four sizes only (a fixed grid cannot have depth-dependent dimensions).
#
# **How it runs.** Every study lives in Optuna storage (a journal file under `runs/optuna/` by default; set
# `storage` to a PostgreSQL URL to share it between machines). Trials run in worker processes: by default 8
# per GPU, one on a CPU; each worker takes a study that still has room, so all studies fill at once, and
# workers started by hand join them: `labkit search worker lab2 --profile full --storage URL`. A trial
# whose configuration was already trained in this storage reuses that result (marked `cached`), so
# re-running this notebook resumes where it stopped and costs nothing for finished studies.
# `labkit search status --storage journal:runs/optuna/lab2.journal` lists the studies; to explore them
# (each study's trials, history and parameter importances), run `labkit dashboard lab2` (or `make dashboard`)
# in a terminal and open the address it prints.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"trials": 10, "workers": 4, "storage": "postgresql://..."}

# %%
import copy
import math

import optuna

from labkit import redraw
from labkit.narrate import lab2_search as words
from labkit.exercises import check
from labkit.exercises import lab2_replay as replay
from labkit.labs import lab2, lab2_remeasure, lab2_tasks as tasks
from labkit.readings import tables
from labkit.run.profiles import lab_settings
from labkit.report import say, table
from labkit.results import provenance

optuna.logging.set_verbosity(optuna.logging.WARNING)
S = lab_settings("lab2_search", PROFILE, **OVERRIDES)
print(S)
print("device:", provenance()["device"])
storage = S["storage"] or lab2.default_storage(S)
workers = S["workers"]  # "auto": sized by run_studies to the GPUs' free memory (1 on a CPU); quick: 2

# %% [markdown]
# ## Exercise: the search space, define-by-run
#
# An Optuna objective draws its architecture from the `trial` as it goes: each `trial.suggest_categorical(name,
# choices)` returns the sampler's pick, and what is drawn later may depend on what was drawn before. Write the
# lab's space: the four `BertConfig` sizes, `num_hidden_layers` [2, 4, 8], `num_attention_heads` [2, 4, 8, 16],
# `hidden_size` [128, 192, 256, 384, 512], `intermediate_size` [512, 768, 1024, 1536, 2048], each under exactly
# that name; then, for each layer `i` the model has, one choice `"linear"` or `"identity"` for each square Linear
# (`SQUARE_LINEARS` below), named `layer<i>.<linear>`. Return `{"config": {the four sizes}, "linears":
# {"layer<i>.<linear>": choice}}`. Mind the traps: the depth drawn first decides how many per-layer choices there
# are; a head count must divide `hidden_size` (every combination of the lab's grid does, but an edited space may
# not): raise `optuna.TrialPruned` right after the four sizes, before any per-layer choice, so an invalid model is
# never built.
#
# The check calls your function with `optuna.trial.FixedTrial({...})`, a trial whose every answer is fixed: a
# misspelt name raises a `ValueError` naming the parameter it does not hold.
#
# *Hint:* `trial.suggest_categorical("hidden_size", [128, 192, 256, 384, 512])`; the key of a per-layer choice is
# also its parameter name.

# %% tags=["exercise"]
SQUARE_LINEARS = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense")


def sample_architecture(trial):
    """The architecture `trial` draws: {"config": the four BertConfig sizes, "linears": "layer<i>.<linear>" ->
    "linear" or "identity" for each of SQUARE_LINEARS in each layer}; optuna.TrialPruned if the heads do not
    divide hidden_size."""
    ### BEGIN SOLUTION
    config = {
        "num_hidden_layers": trial.suggest_categorical("num_hidden_layers", [2, 4, 8]),
        "num_attention_heads": trial.suggest_categorical("num_attention_heads", [2, 4, 8, 16]),
        "hidden_size": trial.suggest_categorical("hidden_size", [128, 192, 256, 384, 512]),
        "intermediate_size": trial.suggest_categorical("intermediate_size", [512, 768, 1024, 1536, 2048]),
    }
    if config["hidden_size"] % config["num_attention_heads"] != 0:
        raise optuna.TrialPruned(f"{config['num_attention_heads']} heads do not divide {config['hidden_size']}")
    linears = {}
    for i in range(config["num_hidden_layers"]):
        for linear in SQUARE_LINEARS:
            name = f"layer{i}.{linear}"
            linears[name] = trial.suggest_categorical(name, ["linear", "identity"])
    return {"config": config, "linears": linears}
    ### END SOLUTION


# %% tags=["check"]
space = check("lab2.search_space", sample_architecture)

# %% [markdown]
# ## Exercise: the best-so-far curve
#
# Task 1 compares samplers by their best-so-far curve: after each completed trial, the best accuracy any trial
# of the study has reached. Write it from a study's trial values in trial order, where `None` stands for a trial
# that did not complete (pruned, failed). Traps: a trial that did not complete is no point of the curve (no entry,
# not `-inf`, and the curve goes on from the best before it); Optuna fails a trial whose objective returned NaN, so
# NaN is skipped like `None` (`max` with a NaN depends on the argument order); `limit` keeps the first `limit`
# *completed* trials (concurrent workers can finish a few more than asked); no trials give `[]`.
#
# *Hint:* one pass with a running maximum that starts at `-inf`.

# %% tags=["exercise"]
def best_so_far(values, limit=None):
    """The best value after each completed trial (values: floats in trial order, None for a trial that did not
    complete, NaN for a failed one), for the first `limit` completed trials (all if None)."""
    ### BEGIN SOLUTION
    best, curve = float("-inf"), []
    for value in values:
        if value is None or math.isnan(value):
            continue
        best = max(best, value)
        curve.append(best)
    return curve if limit is None else curve[:limit]
    ### END SOLUTION


# %% tags=["check"]
running = check("lab2.best_so_far", best_so_far)

# %% [markdown]
# ## Task 1: Random vs Grid vs TPE

# %%
task1 = tasks.run_task1(S, storage, workers)  # the studies, with their curves, bands over seeds and best trial
say(words.shortfall(task1.done, S["trials"]))
say(table(tables.sampler_rows(task1.bands)))
say(words.best_architecture(task1.best_study, task1.best))

# %% [markdown]
# What the searches drew, read back through your `sample_architecture` (each study's first completed trial; a
# Grid trial's parameters keep every Linear), and each study's best-so-far curve through your `best_so_far`:
# both must agree with what the workers recorded.

# %%
say(table(replay.drawn(task1, space.fn)))
replay.rebuilt_best(task1, space.fn)  # its parameter count, rebuilt from your sampler, is the trial's
say(table(replay.sampler_curves(task1, running.fn, S)))

# %%
redraw.show("lab2_search", "samplers", tasks.samplers_numbers(task1, S), S)

# %% [markdown]
# **Question 2a.** Can you tell the samplers apart at this budget? Read the mean best of each sampler against
# the spread over seeds and against the test set's standard error, and explain why Random, TPE and Grid can end
# level (or not) after this many trials.

# %% [markdown] tags=["answer"] question=2a points=2
# Model answer: The samplers can only be called different where their mean best differs by more than the spread
# over seeds (and more than a test-set standard error); at a budget of a few dozen trials over a space of hundreds
# of size combinations (and, for Random and TPE, a huge number of Identity patterns) they usually cannot. TPE's
# first trials are random start-up trials, so much of a short search is Random sampling, and its model only then
# proposes architectures near the good ones; Grid walks a shuffled fraction of a sizes-only grid and never drops a
# Linear. Many architectures reach similar accuracy after one epoch, so the best of a few draws is close for every
# sampler; what decides the best more is which depths train at all at this learning rate. A longer budget and more
# seeds would be needed before TPE's guidance shows.

# %% [markdown]
# ## Exercise: the compression-aware objective
#
# A Task 2 trial trains the architecture, then scores it the way its search asks (`mode`): `"none"` returns the
# trained model's accuracy; `"compress"` the accuracy of `compress(model)` (fixed-point quantization and L1
# pruning, applied to a copy); `"compress+train"` the accuracy of that compressed model after `post_train` (a short
# training at its own learning rate with compression in place). A `"compress+train"` trial also post-trains the
# trained, *uncompressed* model as long (the equal-training control), so its gain can be read against what the
# extra training does on its own. Every step is handed to you as a function, so the check runs in microseconds:
# `build(arch)` returns a model, `train(model)` and `post_train(model)` train it in place, `compress(model)` returns
# the compressed copy, `evaluate(model)` returns an accuracy, and `record(name, accuracy)` stores one of
# `accuracy_trained`, `accuracy_compressed`, `accuracy_post_trained`, `accuracy_control` with the trial (each
# accuracy recorded right after it is measured). Return the accuracy the mode scores.
#
# Traps: the compressed model is what `compress` returns (the model you pass is left as it was); the value is the
# last accuracy of the scored model, even when it is lower than an earlier one; the control starts from the trained
# model before compression.
#
# *Hint:* the check prints each call with the model's steps so far, e.g. `post_train(built+trained+compressed)`.

# %% tags=["exercise"]
def compression_objective(arch, mode, build, train, compress, evaluate, post_train, record):
    """One Task 2 trial: the accuracy `mode` ("none", "compress", "compress+train") scores, recording each
    accuracy measured on the way (and, for "compress+train", the control's)."""
    ### BEGIN SOLUTION
    model = build(arch)
    train(model)
    value = evaluate(model)
    record("accuracy_trained", value)
    if mode == "none":
        return value
    control = copy.deepcopy(model) if mode == "compress+train" else None
    model = compress(model)
    value = evaluate(model)
    record("accuracy_compressed", value)
    if mode == "compress+train":
        post_train(model)
        value = evaluate(model)
        record("accuracy_post_trained", value)
        post_train(control)
        record("accuracy_control", evaluate(control))
    return value
    ### END SOLUTION


# %% tags=["check"]
objective = check("lab2.compression_objective", compression_objective)

# %% [markdown]
# ## Task 2: compression-aware search from Task 1's best architecture
#
# Three TPE searches with the same budget and seed, each starting from Task 1's best architecture (queued
# as its first trial, so the uncompressed search reuses Task 1's result from the cache): the trained
# model's accuracy; its accuracy after fixed-point quantization and L1 pruning of every Linear (weights and
# activations); and that accuracy after a further short training with compression in place, beside its
# control: the uncompressed model given the same training.

# %%
task2 = tasks.run_task2(S, storage, workers, task1.best.params)  # the three searches from Task 1's best
facts = tasks.run_facts(storage, S, task1, task2)  # where the studies are, how their trials ran, what it cost
say(words.run_header(facts, S))
say(words.run_cost(facts, S))
say(words.shortfall(task2.done, S["compression_trials"]))
say(table(tables.start_rows(task2.best, task2.starts)))
say(table(tables.effect_rows(task2.effects)))

# %% [markdown]
# Each search's start (Task 1's best architecture) replayed through your `compression_objective`, with its
# steps standing in for the real ones: `evaluate` returns the accuracy the trial recorded for the model's state. Your
# objective must return the trial's value and record what it recorded; and your `best_so_far` must give each
# search's curve.

# %%
say(table(replay.objectives(task2, space.fn, objective.fn, running.fn, S)))

# %%
redraw.show("lab2_search", "compression_aware", tasks.compression_numbers(task1, task2, S), S)

# %% [markdown]
# ## Remeasure: each searched best against its comparator, with fresh training seeds
#
# A searched best is the best of N trials, each trained once on one seed, so its lead over the next architecture or
# over its start is partly the luck of the draw. The answers call it better only after both sides are retrained with
# at least three fresh training seeds (never the search's), the same seed on both sides: Task 1's best against the
# best trial of another architecture, and each Task 2 search's best against its start under that search's objective
# (a search whose best is its start has nothing to retrain). `python -m labkit.labs.lab2_remeasure --profile full`
# runs the same from the stored results.

# %%
say(words.remeasured_table(lab2_remeasure.in_notebook(S, k=3, storage=storage)))

# %% [markdown]
# **Question 2b.** What does post-training do to a compressed model, and why is its gain read against the
# uncompressed model given the same training rather than against the compressed accuracy alone?

# %% [markdown] tags=["answer"] question=2b points=2
# Model answer: Post-training runs a short training with the quantizers and pruning masks in place, so the
# remaining weights adapt to the rounding and to the removed ones (straight-through gradients through the
# quantizers), recovering part of what compression cost. But the extra steps are also more training: a model that
# had not converged, or that was still at chance after its first epoch, gains from them whether or not it is
# compressed. The control trains the same trained model, uncompressed, for the same steps, learning rate, seed and
# batches, so post-trained minus control isolates what recovering from compression adds; its median and spread over
# trials matter more than the mean, which a few models leaving chance can dominate.

# %% [markdown] tags=["answer-key"]
# ## Answers from the numbers
#
# Rendered by `labkit.answers.lab2_search` from the readings of the JSON just saved (read back; the readings are stored in
# it first), as `python -m labkit.redraw lab2_search --answers` renders them later: the samplers' verdict with its
# uncertainty, whether the best architecture and each search's best are established (only with fresh seeds), how
# many trials of each depth ended at chance, and post-training's change per trial, against its control.

# %% tags=["answer-key"]
from labkit import redraw
redraw.close("lab2_search", S)
