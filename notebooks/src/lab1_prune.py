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
import matplotlib.pyplot as plt

from labkit import prune, recipes
from labkit.profiles import lab_settings
from labkit.report import say, table
from labkit.results import load_results, provenance, save_answers, save_figure
from labkit.answers import lab1 as answers
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
fig, ax = plt.subplots(figsize=(7, 4.6))
series = [("random", S["prune_scope"], "#c44e52", "o"), ("l1-norm", S["prune_scope"], "#4c72b0", "s"),
          ("l1-norm", other, "#55a868", "^")]
for k, (method, scope, color, marker) in enumerate(series):
    rows = [r for r in prows if r["method"] == method and r["scope"] == scope]
    if not rows:
        continue
    # a small horizontal offset per series: points at equal accuracy (e.g. 0.5) stay visible side by side
    xs = [r["sparsity"] + (k - 1) * 0.008 for r in rows]
    ax.plot(xs, [r["pruned"] for r in rows], marker + "--", color=color, alpha=0.55, mfc="none",
            label=f"{method} ({scope}), pruned")
    ax.plot(xs, [r["finetuned"] for r in rows], marker + "-", color=color,
            label=f"{method} ({scope}), + {S['prune_epochs']:g} epoch")
ax.axhline(fp32, ls="--", color="k", lw=0.8, label=f"unpruned ({fp32:.3f})")
ax.axhline(control["accuracy"], ls=":", color="k", lw=1.2,
           label=f"unpruned + {S['prune_epochs']:g} epoch ({control['accuracy']:.3f})")
ax.set_xlabel("sparsity (weights and activations)")
ax.set_ylabel("IMDb test accuracy")
ax.set_title(f"Unstructured pruning (profile {S['profile']})")
ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, frameon=False)
save_figure(fig, "lab1", "pruning", {"fp32": fp32, "rows": prows, "dataset_sizes": dl.sizes, "control": control}, S)

# %% [markdown]
# ## Answers from the numbers
#
# Rendered by `labkit.answers.lab1` from the JSON this notebook just saved (so the committed answers file and
# the numbers beside it cannot disagree); `tools/render_answers.py lab1` re-renders it without measuring.

# %%
text = answers.render_prune({n: load_results("lab1", n, S["profile"]) for n in answers.PRUNE_NAMES})
save_answers("lab1", "prune", text, S["profile"])
say(text.split("\n\n", 2)[-1])
