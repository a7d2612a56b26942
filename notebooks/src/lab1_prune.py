# %% [markdown]
# # Lab 1b: pruning, random vs L1-norm, weights and activations
#
# Starting from the fine-tuned classifier of Lab 0 (same settings, so the cached SFT checkpoint is
# reused), we prune weights and activations of every Linear layer with a random or an L1-norm criterion,
# sweep the sparsity, and measure accuracy right after pruning and after fine-tuning with the masks in place.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"sparsities": [0.5]}

# %%
from labkit import prune, recipes
from labkit.profiles import lab_settings
from labkit.report import say, table
from labkit.results import load_results, provenance, save_answers, save_figure
from labkit.answers import lab1 as answers
from labkit.compression_figures import plot_pruning
from labkit.sweeps import fp32_control, pruning_sweep

S = lab_settings("lab1", PROFILE, **OVERRIDES)
print(S)
print("device:", provenance()["device"])
dl = recipes.loaders(S)
base, base_metrics = recipes.finetuned_model(S, dl)
fp32 = base_metrics["accuracy"]
say(f"Base: the SFT model of Lab 0, **{fp32:.4f}** accuracy on {dl.sizes['test']:,} test reviews "
    f"({'from the cache' if 'cached' in base_metrics else 'trained now'}).")

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
prows = pruning_sweep(base, S["sparsities"], ["random", "l1-norm"], dl, S, inputs=probe)
other = "global" if S["prune_scope"] == "local" else "local"
prows += pruning_sweep(base, S["global_sparsities"], ["l1-norm"], dl, S, inputs=probe, scope=other)
control = fp32_control(base, dl, S, S["prune_epochs"])  # the same fine-tuning, nothing pruned
say(table(prows, ["method", "scope", "sparsity", "achieved_weight_sparsity", "achieved_activation_sparsity",
                  "pruned", "finetuned", "pruned_positive_share", "finetuned_positive_share"]))

# %%
numbers = {"fp32": fp32, "rows": prows, "dataset_sizes": dl.sizes, "control": control}
save_figure(plot_pruning(numbers, S), "lab1", "pruning", numbers, S)

# %% [markdown]
# ## Answers from the numbers
#
# Rendered by `labkit.answers.lab1` from the JSON this notebook just saved (so the committed answers file and
# the numbers beside it cannot disagree); `tools/render_answers.py lab1` re-renders it without measuring.

# %%
text = answers.render_prune({n: load_results("lab1", n, S["profile"]) for n in answers.PRUNE_NAMES})
save_answers("lab1", "prune", text, S["profile"])
say(text.split("\n\n", 2)[-1])
