# %% [markdown]
# # Lab 1b: pruning, random vs L1-norm, weights and activations
#
# Starting from the fine-tuned classifier of Lab 0 (same settings, so the cached SFT checkpoint is
# reused), we prune weights and activations of every Linear layer with a random or an L1-norm criterion,
# sweep the sparsity, and measure accuracy right after pruning and after fine-tuning with the masks in place.
# The sheet prunes its Task 1's best model; we prune the fp32 SFT model, so pruning is measured on its own.
#
# **Training seeds.** The whole sweep runs once per seed of `seeds` (its SFT model, the random masks, the
# fine-tuning and the control, all with that seed); every comparison states an uncertainty that includes
# the spread over seeds (`labkit.seeds`).

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"sparsities": [0.5], "seeds": [0]}

# %%
from labkit import per_seed as per_seed_runs, recipes, seeds
from labkit.profiles import lab_settings
from labkit.report import say, table
from labkit.results import load_results, provenance, save_answers, save_figure
from labkit.answers import lab1 as answers
from labkit.plots.lab1 import plot_pruning
from labkit.sweeps import pruning_seed

S = lab_settings("lab1", PROFILE, **OVERRIDES)
SEEDS = recipes.train_seeds(S)
print(S)
print("device:", provenance()["device"])
dl = recipes.loaders(S)
say(f"Training seeds {SEEDS}; {dl.sizes['test']:,} test reviews.")

# %% [markdown]
# ## Sparsity sweep: random vs L1-norm, weights and activations
#
# Each Linear's weights are masked (a parametrization: masked weights stay zero while fine-tuning) and its
# input is masked too (random: one fixed feature mask per layer; L1: the smallest-magnitude entries of
# every token vector). The main sweep's weight scope is the profile's `prune_scope`; L1 also runs with one
# global threshold over all layers at `global_sparsities`.

# %%
batch = next(iter(dl.test))
probe = {k: v[:8] for k, v in batch.items() if k != "labels"}
# one seed at a time; a finished seed's numbers are kept (runs/seeds), so a stopped run resumes after it
per_seed = per_seed_runs.run("lab1", "pruning", S, SEEDS, lambda seed: pruning_seed(S, dl, seed, probe))
for seed, r in zip(SEEDS, per_seed):
    print(f"seed {seed}: unpruned {r['fp32']:.4f}, control {r['control']['accuracy']:.4f}, SFT {r['sft_digest'][:12]}")
numbers = {**seeds.combine(per_seed, SEEDS), "dataset_sizes": dl.sizes}
say(table(numbers["rows"], ["method", "scope", "sparsity", "achieved_weight_sparsity", "achieved_activation_sparsity",
                            "pruned", "finetuned", "pruned_positive_share", "finetuned_positive_share"]))

# %%
save_figure(plot_pruning(numbers, S), "lab1", "pruning", numbers, S)

# %% [markdown]
# ## Answers from the numbers
#
# Rendered by `labkit.answers.lab1` from the JSON this notebook just saved (so the committed answers file and
# the numbers beside it cannot disagree); `python -m labkit.redraw lab1 --answers` re-renders it without measuring.

# %%
text = answers.render_prune({n: load_results("lab1", n, S["profile"]) for n in answers.PRUNE_NAMES})
save_answers("lab1", "prune", text, S["profile"])
say(text.split("\n\n", 2)[-1])
