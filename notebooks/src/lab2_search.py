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
import time

import optuna

from labkit import redraw, search
from labkit.answers import lab2 as answers
from labkit.plots.lab2_search import plot_compression_aware, plot_samplers
from labkit.labs import lab2
from labkit.profiles import lab_settings
from labkit.report import say, table
from labkit.results import provenance, save_figure

optuna.logging.set_verbosity(optuna.logging.WARNING)
S = lab_settings("lab2", PROFILE, **OVERRIDES)
print(S)
print("device:", provenance()["device"])
storage = S["storage"] or lab2.default_storage(S)
workers = S["workers"]  # "auto": sized by run_studies to the GPUs' free memory (1 on a CPU); quick: 2

# %% [markdown]
# ## Task 1: Random vs Grid vs TPE

# %%
start = time.time()
task1 = search.run_studies(lab2.task1_plans(S), storage=storage, workers=workers, desc="Lab 2 task 1", mps=S["mps"],
                           report_only=S["report_only"])
task1_seconds = time.time() - start
curves = {sampler: [search.best_so_far(st, limit=S["trials"]) for st in sts]
          for sampler, sts in lab2.by_sampler(task1).items()}
bands = search.bands(curves)  # every sampler cut to the shortest search: equal budget
task1_done = {name: sum(t.state.name == "COMPLETE" for t in st.trials) for name, st in task1.items()}
task1_from = search.trial_provenance(task1.values())
if S["report_only"]:
    say(answers.drawn_from(task1_from))
say(answers.shortfall(task1_done, S["trials"]))
say(table(answers.sampler_rows(bands)))
best_study, best = lab2.best_trial(task1)
n_test = best.user_attrs["n_test"]
say(f"Best architecture overall: {best_study} trial {best.number}, accuracy {best.value:.4f}, "
    f"{best.user_attrs['parameters']:,} parameters: `{ {k: v for k, v in best.params.items() if '.' not in k} }`, "
    f"{sum(v == 'identity' for k, v in best.params.items() if '.' in k)} Linear layers replaced by Identity.")

# %%
samplers = {
    "bands": bands, "curves": curves, "rows": answers.sampler_rows(bands), "search_seconds": task1_seconds,
    "completed": task1_done, "trials_from": task1_from, "report_only": S["report_only"],
    "best": {"study": best_study, "trial": best.number, "value": best.value, "params": best.params},
    "trials": {name: [{"number": t.number, "value": t.value, "params": t.params, **t.user_attrs}
                      for t in st.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
               for name, st in task1.items()}}
save_figure(plot_samplers(samplers, S), "lab2", "samplers", samplers, S)

# %% [markdown]
# ## Task 2: compression-aware search from Task 1's best architecture
#
# Three TPE searches with the same budget and seed, each starting from Task 1's best architecture (queued
# as its first trial, so the uncompressed search reuses Task 1's result from the cache): the trained
# model's accuracy; its accuracy after fixed-point quantization and L1 pruning of every Linear (weights and
# activations); and that accuracy after a further short training with compression in place, beside its
# control: the uncompressed model given the same training.

# %%
start = time.time()
task2 = search.run_studies(lab2.task2_plans(S, best.params), storage=storage, workers=workers,
                           desc="Lab 2 task 2", mps=S["mps"], report_only=S["report_only"])
task2_seconds = time.time() - start
comp = lab2.by_objective(task2)
comp_trials = {label: [{"number": t.number, "value": t.value, **t.user_attrs}
                       for t in st.get_trials(deepcopy=False) if t.state.name == "COMPLETE"][: S["compression_trials"]]
               for label, st in comp.items()}
comp_curves = {label: search.best_so_far(st, limit=S["compression_trials"]) for label, st in comp.items()}
comp_best = {label: max(c) for label, c in comp_curves.items()}
comp_done = {label: len(c) for label, c in comp_curves.items()}
task2_from = search.trial_provenance(comp.values())
# how the trials ran, from their own records (worker processes, hosts, devices), not this process's count
say(answers.studies_header(search.storage.shown_url(storage), lab2.study_tag(S),
                           search.trial_provenance([*task1.values(), *task2.values()]), S)
    + (" Workers ran under CUDA MPS in this run." if S["mps"] and not S["report_only"] else ""))
say(answers.shortfall(comp_done, S["compression_trials"]))
effects = {"compression, no post-training": answers.within_trial(comp_trials["compressed"], "accuracy_compressed"),
           "post-training after compression": answers.within_trial(
               comp_trials["compressed + post-training"], "accuracy_post_trained", "accuracy_compressed")}
# each post-training trial also trained its uncompressed model as long (its equal-training control)
post_control = answers.post_vs_control(comp_trials["compressed + post-training"])
if post_control is not None:
    effects["post-training against its control"] = answers.within_trial(
        comp_trials["compressed + post-training"], "accuracy_post_trained", "accuracy_control")
say(table([{"objective": label, "best": comp_best[label], "first trial (Task 1's best)": comp_curves[label][0]}
           for label in comp]))
say(table([{"within-trial change": k, **v} for k, v in effects.items()]))

# %%
quant, prune = lab2.compression_configs(S)
compression = {
    "best_so_far": comp_curves, "best": comp_best, "within_trial": effects, "trials": comp_trials,
    "start": {"study": best_study, "trial": best.number, "value": best.value}, "search_seconds": task2_seconds,
    "quant": quant, "prune": prune, "completed": comp_done, "trials_from": task2_from,
    "post_vs_control": post_control, "report_only": S["report_only"]}
save_figure(plot_compression_aware(compression, S), "lab2", "compression_aware", compression, S)

# %% [markdown]
# ## Answers from the numbers
#
# Rendered by `labkit.answers.lab2` from the JSON just saved (read back), as `python -m labkit.redraw lab2
# --answers` renders them later: the samplers' verdict with its uncertainty, how many trials of each depth
# ended at chance, and post-training's change read with its median and spread and against its control.

# %%
answers_path, text = redraw.render_answers("lab2_search", S["profile"])
answers_path.write_text(text)
say(text.split("\n\n", 3)[-1])
trials_run = sum(len(st.trials) for st in list(task1.values()) + list(task2.values()))
cached = sum(bool(t.user_attrs.get("cached")) for st in list(task1.values()) + list(task2.values()) for t in st.trials)
if S["report_only"]:
    say(f"- **Cost.** Drawn from stored studies (no trial ran here): a trial took {task1_from['trial_seconds_mean']:.0f} s "
        f"on average in Task 1 and {task2_from['trial_seconds_mean']:.0f} s in Task 2 with the workers sharing the "
        f"device; {cached} of {trials_run} trials reused a cached result.")
else:
    say(f"- **Cost.** Task 1 took {task1_seconds / 60:.1f} min and Task 2 {task2_seconds / 60:.1f} min here (a "
        f"resumed run counts only what was left; the header says which workers ran the trials); {cached} of "
        f"{trials_run} trials reused a cached result.")
