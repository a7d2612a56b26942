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
# the spread over seeds (`labkit.readings.seeds`).

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"sparsities": [0.5], "seeds": [0]}

# %%
import torch

from labkit import recipes, redraw
from labkit.labs import per_seed as per_seed_runs
from labkit.labs import lab1_prune as lab
from labkit.narrate import lab1_prune as words
from labkit.labs.lab1_sweeps import combined, pruning_seed
from labkit.exercises import check
from labkit.run.profiles import lab_settings
from labkit.report import say
from labkit.results import provenance

S = lab_settings("lab1_prune", PROFILE, **OVERRIDES)
SEEDS = recipes.train_seeds(S)
print(S)
print("device:", provenance()["device"])
dl = recipes.loaders(S)
say(f"Training seeds {SEEDS}; {dl.sizes['test']:,} test reviews.")

# %% [markdown]
# ## Exercise: the L1-norm weight mask
#
# L1-norm (magnitude) pruning of a weight tensor at sparsity `s` zeroes its `k = round(s * numel)`
# smallest-magnitude entries. Write `l1_mask(weight, sparsity)`: return a boolean mask of the weight's shape,
# `True` where the weight is kept, with **exactly** `k` entries `False`. Traps: rank `|w|`, not `w` (a large
# negative weight is important); rank the whole tensor at once (not row by row); count with Python's `round`
# (half to even: `round(0.5) = 0`, `round(2.5) = 2`), not `int()` (`0.29 * 100` is `28.999999999999996`);
# ties in `|w|` at the cut: a threshold `|w| <= t` would prune every tied entry and overshoot `k` (which of
# the tied entries you prune is up to you); a sparsity outside `[0, 1)` is an error (`ValueError`), as in
# labkit's `prune`.
#
# *Hint:* `torch.topk(weight.abs().flatten(), k, largest=False).indices` are the entries to prune.

# %% tags=["exercise"]
def l1_mask(weight, sparsity):
    """Keep-mask (bool, weight's shape) that prunes exactly round(sparsity * numel) smallest-|w| entries."""
    ### BEGIN SOLUTION
    if not 0 <= sparsity < 1:
        raise ValueError(f"sparsity must be in [0, 1), got {sparsity}")
    k = round(sparsity * weight.numel())
    order = torch.argsort(weight.detach().abs().flatten(), stable=True)
    keep = torch.ones(weight.numel(), dtype=torch.bool, device=weight.device)
    keep[order[:k]] = False
    return keep.view(weight.shape)
    ### END SOLUTION


# %% tags=["check"]
l1 = check("lab1.l1_mask", l1_mask)

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
numbers = combined(per_seed, SEEDS, dl.sizes)
say(words.sweep_table(numbers))

# %%
redraw.show("lab1_prune", "pruning", numbers, S)

# %% [markdown]
# ## Your mask on one layer
#
# Your `l1_mask` (labkit's until it passes its check) on the first Linear of the SFT model (seed `SEEDS[0]`),
# at each sparsity of the sweep, beside the mask labkit's `prune` puts on the same layer (local L1-norm). The
# achieved sparsities agree; the masks may differ only where equal `|w|` straddle the cut. Every pruned `|w|`
# lies at or below every kept one: that is what the L1 criterion buys over a random mask.

# %%
sft, _ = recipes.finetuned_model(S, dl, seed=SEEDS[0])
say(words.mask_text(lab.mask_check(sft, S["sparsities"], l1.fn)))  # l1.fn: your l1_mask once its check passes

# %% [markdown]
# **Question 1b.** From your table: from which sparsity is random pruning at chance (a constant answer on
# balanced reviews), and how does L1 fare at the same sparsities? Why does removing the smallest-magnitude
# weights and inputs hurt so much less than a random mask of the same sparsity, and why does fine-tuning with
# the masks in place bring random pruning back at some sparsities and not at others?

# %% [markdown] tags=["answer"] question=1b points=2
# Model answer: random pruning reaches chance at a moderate sparsity, where L1 is still close to the unpruned
# model; L1 only collapses near the highest sparsities. A layer's output is a sum of weight-times-input
# terms, and both magnitudes are heavy-tailed: most terms are small, so dropping the smallest ones leaves
# the sum (and the function) nearly unchanged. A random mask removes the few large terms as often as the small
# ones, so every layer loses that fraction of its signal, in every layer at once (the classifier's input
# included); the errors compound through the network until the logits no longer depend on the review and the
# model answers one class. Fine-tuning keeps the masks, so it has to rebuild the features from the surviving
# weights. That argument holds at every sparsity, so it cannot by itself say where fine-tuning succeeds: read it
# from the numbers. At a moderate sparsity (0.3 in the full profile) a short budget at a small learning rate
# brings random pruning back above chance, though still clearly below L1 at the same sparsity; from a higher
# one (0.5 up) it settles on the constant answer (a cheap minimum of the loss on balanced data). L1's pruned
# model starts close to a good solution and recovers at every sparsity where it is not already at chance.

# %% [markdown] tags=["answer-key"]
# ## Answers from the numbers
#
# Rendered by `labkit.answers.lab1_prune` from the JSON this notebook just saved (so the committed answers file and
# the numbers beside it cannot disagree); `python -m labkit.redraw lab1_prune --answers` re-renders it without measuring.

# %% tags=["answer-key"]
from labkit import redraw

redraw.close("lab1_prune", S)
