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
from labkit.results import provenance, save_figure
from labkit.sweeps import pruning_sweep

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
# every token vector). Scope is the profile's `prune_scope`.

# %%
batch = next(iter(dl.test))
probe = {k: v[:8] for k, v in batch.items() if k != "labels"}
prows = pruning_sweep(base, S["sparsities"], ["random", "l1-norm"], dl, S, inputs=probe)
say(table(prows, ["method", "sparsity", "achieved_weight_sparsity", "achieved_activation_sparsity",
                  "pruned", "finetuned"]))

# %%
fig, ax = plt.subplots(figsize=(6.5, 4))
for method, color in [("random", "#c44e52"), ("l1-norm", "#4c72b0")]:
    rows = [r for r in prows if r["method"] == method]
    xs = [r["sparsity"] for r in rows]
    ax.plot(xs, [r["pruned"] for r in rows], "o--", color=color, alpha=0.6, label=f"{method}, pruned")
    ax.plot(xs, [r["finetuned"] for r in rows], "s-", color=color,
            label=f"{method}, + {S['prune_epochs']:g} epoch fine-tuning")
ax.axhline(fp32, ls="--", color="k", lw=0.8, label=f"unpruned ({fp32:.3f})")
ax.set_xlabel("sparsity (weights and activations)")
ax.set_ylabel("IMDb test accuracy")
ax.set_title(f"Unstructured pruning, {S['prune_scope']} scope (profile {S['profile']})")
ax.legend(fontsize=8)
save_figure(fig, "lab1", "pruning", {"fp32": fp32, "rows": prows, "dataset_sizes": dl.sizes}, S)

# %% [markdown]
# ## Answers from the numbers

# %%
mid = [r for r in prows if abs(r["sparsity"] - 0.5) < 1e-9]
l1_better = [r["sparsity"] for r in prows if r["method"] == "l1-norm" and r["finetuned"] >= next(
    x["finetuned"] for x in prows if x["method"] == "random" and x["sparsity"] == r["sparsity"])]
err = max(abs(r["achieved_weight_sparsity"] - r["sparsity"]) for r in prows)
say(f"- **Pruning.** Achieved weight sparsity is within {100 * err:.3f} points of the request everywhere "
    f"(exact counts per layer) and stays so after fine-tuning "
    f"(max drift {max(abs(r['weight_sparsity_after_training'] - r['achieved_weight_sparsity']) for r in prows):.1e}). "
    + (f"At 0.5: L1 {next(r['pruned'] for r in mid if r['method'] == 'l1-norm'):.4f} right after pruning, "
       f"{next(r['finetuned'] for r in mid if r['method'] == 'l1-norm'):.4f} after fine-tuning; random "
       f"{next(r['pruned'] for r in mid if r['method'] == 'random'):.4f} / "
       f"{next(r['finetuned'] for r in mid if r['method'] == 'random'):.4f} "
       "(the course's reference: 0.555 right after pruning, 0.836 after 5 epochs). " if mid else "")
    + f"L1-norm is at or above random after fine-tuning at {len(l1_better)} of {len(S['sparsities'])} "
    "sparsities: removing the smallest weights and the smallest activations disturbs the function least, "
    "while a random mask removes large, important values as often as small ones.")
