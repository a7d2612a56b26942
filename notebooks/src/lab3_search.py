# %% [markdown]
# # Lab 3 (part 2): mixed-precision search over formats and widths
#
# Lab 3's task is a search: for every Linear layer of the fine-tuned classifier, choose a number format and
# its widths, and find how accuracy trades against bits. Each trial quantizes the model per its per-layer
# configuration (input, weight and bias of a layer in the layer's format; the binary family keeps biases in
# fp32) and evaluates it without training (PTQ); the best trade-offs then get a short QAT.
#
# - **Task 1**: the sheet's per-layer integer search: width in {8, 16, 32} and frac width in {2, 4, 8} per
#   layer, or the layer left in fp32; TPE, best-so-far accuracy. Its baselines (every layer at one width and
#   frac width, and every layer in fp32) are queued as its first trials, and `search_trials` more are searched.
# - **Task 2**: one search per format (every Linear in that format, its own parameters per layer: minifloat
#   exponent widths, block sizes, ...; fixed-width formats have one configuration) and one over all formats,
#   with the format counts of its best trial. Each starts from its uniform points (every layer in one format).
# - **Cost**: accuracy - lambda x average weight bits (labkit's bit accounting: what is stored, shared
#   exponents and fp32 scales included), for a few lambdas; and a multi-objective search (accuracy up,
#   average weight bits down) whose Pareto front is drawn beside the uniform-format points.
#
# The studies run on the same engine as Lab 2 (`runs/optuna/lab3.journal`, concurrent workers, resumable;
# a configuration measured once is reused by every study, whatever it optimises). Part 1
# (`lab3_formats`) checks each format alone; run it first on a new machine, it trains the SFT model.
#
# **Your part.** The cost objective's bit count is yours to write (`bit_cost`: average weight bits of a per-layer
# configuration and accuracy - lambda x bits), checked on the spot against labkit's accounting; once it passes, the
# bits shown for the cost searches' winners and for the Pareto front are counted by your function. Two questions
# ask what the searches say.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"pareto_trials": 200, "workers": 4}

# %%
import optuna

from labkit import recipes, redraw
from labkit.narrate import lab3_search as words
from labkit.exercises import check
from labkit.labs.lab3_precision import config_tensors
from labkit.labs import lab3, lab3_search as results
from labkit.labs.lab3_precision import linear_layers
from labkit.readings.tables import cost_rows
from labkit.report import say, table
from labkit.results import provenance
from labkit.run.profiles import lab_settings
from labkit.training import precision, train

optuna.logging.set_verbosity(optuna.logging.WARNING)
S = lab_settings("lab3_search", PROFILE, **OVERRIDES)
print(S)
print("device:", provenance()["device"])
dl = recipes.loaders(S)
base, sft = recipes.finetuned_model(S, dl)  # cached after part 1; workers load it from the cache
fp32 = train.evaluate(base, dl.test, **precision.on(S), progress=False)["accuracy"]
layers = linear_layers(base)
storage = S["storage"] or lab3.default_storage(S)
workers = S["workers"]  # "auto": sized by run_studies to the GPUs' free memory (1 on a CPU)
say(words.base_text(results.base_numbers(S, sft, fp32, dl.sizes["test"], layers, storage)))

# %% [markdown]
# ## Exercise: the bit cost of a configuration
#
# The cost searches maximise `accuracy - lam * weight_bits`, where `weight_bits` is the average stored bits per
# weight element over every Linear weight and bias of the model. Write `bit_cost(accuracy, tensors, lam)`, returning
# `{"weight_bits": ..., "cost": ...}`. `tensors` lists the stored tensors, each a dict `{"shape": (...), "width": w,
# "shared_bits": s, "block_size": g}`: every element stores `w` bits, and a format with shared fields (block
# formats' exponents, MXINT8's, a binary format's fp32 scales) adds one field of `s` bits per block of `g`
# consecutive elements **along the last dimension** (`g` None: one field for the whole tensor; `s` 0: none). An
# unquantized tensor is `width` 32. Traps: the average is weighted by element count (a classifier head of 2 x 384
# weights barely moves it); a last dimension that `g` does not divide ends in a shorter block that still stores
# its field (so a row of `n` elements holds `ceil(n / g)` fields, not `n / g`); blocks never span rows; a 1-D bias is
# blocked along its own length; the price `lam` lowers the cost; no tensor at all is a `ValueError`.
#
# *Hint:* per tensor, `bits = width + shared_bits * ceil(n / g) / n` with `n = shape[-1]` (or `shared_bits / numel`
# when `g` is None); then `sum(bits * numel) / sum(numel)`.

# %% tags=["exercise"]
def bit_cost(accuracy, tensors, lam):
    """Average weight bits of a configuration's stored tensors, and its cost accuracy - lam * bits."""
    ### BEGIN SOLUTION
    total_bits = total = 0
    for t in tensors:
        numel = 1
        for d in t["shape"]:
            numel *= d
        bits = t["width"]
        if t["shared_bits"]:
            if t["block_size"] is None:                  # one shared field for the whole tensor
                bits += t["shared_bits"] / numel
            else:                                        # one per block of the last dimension, ragged ones too
                last = t["shape"][-1]
                bits += t["shared_bits"] * -(-last // t["block_size"]) / last
        total_bits += bits * numel
        total += numel
    if total == 0:
        raise ValueError("no tensors to count")
    weight_bits = total_bits / total
    return {"weight_bits": weight_bits, "cost": accuracy - lam * weight_bits}
    ### END SOLUTION


# %% tags=["check"]
cost = check("lab3.average_bits", bit_cost)

# %% [markdown]
# Every layer of the model in one format (the uniform points of the search below), counted by the function this
# notebook uses (yours once its check passes) and by labkit's `average_bits` on the quantized model.
# `config_tensors(model, config)` lists a per-layer configuration's stored tensors as `bit_cost` takes them.

# %%
say(table(results.uniform_rows(base, layers, fp32, cost.fn)))

# %% [markdown]
# ## The searches
#
# All of them are handed to the workers at once (each worker takes the study with the fewest running trials),
# then the QAT of the front follows.

# %%
plans, studies, search_seconds = lab3.run_phase1(S, layers, storage, sft["sft_digest"], workers,
                                                 report_only=S["report_only"])

# %% [markdown]
# ## Task 1: per-layer integer widths

# %%
# the baselines (every layer at one width and frac, every layer in fp32) are the study's first trials
integer = results.task1(studies, plans, layers, fp32)
say(table(results.task1_choice_rows(integer, layers)))
say(table(results.task1_baseline_rows(integer)))
redraw.show("lab3_search", "search_integer", integer, S)

# %% [markdown]
# ## Task 2: one search per format, and all formats together

# %%
formats = results.task2(studies, plans, fp32)
say(table(formats["rows"]))
redraw.show("lab3_search", "search_formats", formats, S)

# %% [markdown]
# ## Cost: accuracy - lambda x bits, and the Pareto front

# %%
per_lambda = results.per_lambda(studies, S["lambdas"])
crows = cost_rows(per_lambda)
say(table(crows))
# each lambda's best configuration counted again by bit_cost (yours once its check passed)
say(table(results.counted_rows(per_lambda, studies, plans, base, layers, cost.fn)))

qat_study, qat_seconds = lab3.run_qat(S, studies["pareto"], storage, workers, report_only=S["report_only"])
pareto = results.pareto_numbers(studies, qat_study, crows, fp32, search_seconds, qat_seconds)
redraw.show("lab3_search", "search_pareto", pareto, S)
# the front's average weight bits counted by bit_cost (yours once its check passed) from each configuration
say(table(results.front_rows(studies, plans, base, layers, cost.fn)))
say(words.cost_text(results.search_cost(studies, qat_study, search_seconds, qat_seconds)))

# %% [markdown]
# ## The searched bests on fresh seeds
#
# Each search's best is the best of its trials on one SFT model and one test set, so its lead over its baseline is
# biased upwards. Here each best that lies above its baseline, its baseline, and the Pareto headline's untrained
# configuration are measured again by the same PTQ objective on the SFT models of fresh training seeds (the seed of
# the SFT fine-tune: head initialisation, batch order, dropout; never the search's seed), paired per seed, and
# saved as `search_remeasured.json`: the answers read each lead over those seeds.

# %%
from labkit.labs import lab3_remeasure

remeasured = lab3_remeasure.run(S, storage, k=3, dl=dl)

# %% [markdown]
# **Question 3c.** Each cost search returns one configuration, the multi-objective search a front. What does the
# Pareto front say that a single lambda does not, and how would you pick a configuration from it?

# %% [markdown] tags=["answer"] question=3c points=2
# Model answer: a lambda is a price per bit fixed before the search; maximising accuracy - lambda x bits returns the
# one point of the trade-off where the front's slope matches that price, and a different lambda may jump to a quite
# different configuration (or to the same one, where the front has a kink). The front lists every configuration
# that no other beats on both accuracy and bits, so it shows the whole trade-off at once: where accuracy holds flat
# as bits fall (bits that buy nothing), and the knee below which it drops. One picks from it by a constraint rather
# than a price: the fewest bits within a tolerated accuracy loss of fp32 (or the best accuracy within a bit
# budget), and then checks that point with QAT and a second seed, since a front of PTQ measurements on one test
# set also selects lucky noise.

# %% [markdown]
# **Question 3d.** Why is the average weighted by element count, and what does that weighting mean for which layers
# a bit-aware search keeps at high precision?

# %% [markdown] tags=["answer"] question=3d points=2
# Model answer: the cost stands for memory (and bandwidth): a tensor of n elements stores n times its bits per
# element, so the model's bits per weight is the element-weighted mean; an unweighted mean over layers would make a
# 2 x 384 classifier head cost as much as a 1536 x 384 feed-forward matrix. Consequently the search can leave small
# layers (the classifier, the pooler, biases) at high precision or fp32 almost for free, and must save its bits in
# the large attention and feed-forward matrices; shared fields amortise over their blocks, so a block format's
# exponent adds shared_bits / block_size per element (more in a ragged last block), a price that falls as blocks
# grow and is paid back in coarser rounding of the values that share a block with a large one.

# %% [markdown] tags=["answer-key"]
# ## Answers from the numbers
#
# Rendered by `labkit.answers.lab3_search` from the JSON just saved (read back), as `python -m labkit.redraw
# lab3_search --answers` renders them later: each search read against the baselines inside its own space,
# each lambda's best under every lambda's objective, and the front over every configuration measured.

# %% tags=["answer-key"]
from labkit import redraw
redraw.close("lab3_search", S)
