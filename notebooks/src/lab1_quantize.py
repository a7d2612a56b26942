# %% [markdown]
# # Lab 1a: fixed-point quantization, PTQ and QAT
#
# Starting from the fine-tuned classifier of Lab 0 (same settings, so the cached SFT checkpoint is
# reused), we quantize every Linear layer (input, weight and bias) to signed fixed point and sweep the
# width: accuracy right after quantization (PTQ) and after more training with the quantizers in place (QAT).
# Pruning is Lab 1b (`lab1_prune`).
#
# **Frac-width rule: range calibration.** For each layer and each of its tensors, the most fractional bits
# that still cover the tensor's largest magnitude: `frac = width - 1 - ceil(log2(max|x|))`, with inputs
# measured on one training batch. A single rule for every tensor cannot serve both: BERT's weights are mostly
# below 0.1 (the sheet's int8 with 4 fractional bits has a grid of 1/16 and rounds most of them to zero),
# while LayerNorm outputs and GELU inputs reach beyond +-8. The sheet's rule (`frac = width // 2`) is
# measured below for comparison.

#
# **Training seeds.** Every trained model is trained once per seed of `seeds` (the SFT model, each QAT run and
# the control, all with that seed), and every comparison below states an uncertainty that includes the
# spread over seeds (`labkit.readings.seeds`). Training is deterministic, so a rerun reproduces each seed's weights.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"widths": [4, 8], "seeds": [0]}

# %%
import torch

from labkit import quant, recipes, redraw
from labkit.narrate import lab1_quantize as words
from labkit.labs import per_seed as per_seed_runs
from labkit.labs import lab1_quantize as lab
from labkit.labs.lab1_sweeps import combined, quantization_seed
from labkit.exercises import check
from labkit.quant import fixed_point
from labkit.run.profiles import lab_settings
from labkit.report import say
from labkit.results import provenance

S = lab_settings("lab1_quantize", PROFILE, **OVERRIDES)
SEEDS = recipes.train_seeds(S)
print(S)
print("device:", provenance()["device"])
dl = recipes.loaders(S)
base, base_metrics = recipes.finetuned_model(S, dl, seed=SEEDS[0])
say(words.base_text(base_metrics, dl.sizes, SEEDS))

# %% [markdown]
# ## Exercise: a fixed-point quantizer
#
# Signed fixed point stores an integer `k` of `width` bits (two's complement, so `k` lies in
# `[-2^(width-1), 2^(width-1) - 1]`) and reads it as `k / 2^frac_width`. Write the quantizer: scale, round
# **half to even** (`torch.round`), saturate at both ends, scale back, and keep `x`'s shape and dtype. Mind the
# traps: ties (0.5, 2.5), the asymmetric range, a negative `frac_width`, an empty tensor.
#
# *Hint:* `q = clamp(round(x * 2^f), -2^(w-1), 2^(w-1) - 1) / 2^f`.

# %% tags=["exercise"]
def quantize_fixed(x, width, frac_width):
    """x quantized to signed fixed point with `width` bits, `frac_width` of them fractional."""
    ### BEGIN SOLUTION
    scale = 2.0 ** frac_width
    k = torch.round(x * scale).clamp(-(2 ** (width - 1)), 2 ** (width - 1) - 1)
    return (k / scale).to(x.dtype)
    ### END SOLUTION


# %% tags=["check"]
fixed = check("lab1.fixed_point", quantize_fixed)

# %% [markdown]
# ## Exercise: the average-bits analysis
#
# How many bits does the quantized model store per number? Each tensor stores `numel` elements of `width`
# bits, so the model's average is **weighted by element count**: `sum(numel * width) / sum(numel)`. Write
# `average_bits(layers)`: `layers` is a list of dicts `{"numel": n, "width": w, "frac_width": f}`, one per
# stored tensor; `frac_width` is `None` for an unquantized (floating-point) tensor, whose `width` is its
# float width (32 for fp32). Traps: the fractional bits are *among* the `width` bits (int8 with 4 fractional
# bits stores 8 bits, not 12: the course's reference library added them), a big layer counts more than a small
# one, a layer of 0 elements counts nothing, and with no element at all there is no average (raise
# `ValueError`).
#
# *Hint:* one pass for `sum(numel * width)` and `sum(numel)`, then a true division (`/`, not `//`).

# %% tags=["exercise"]
def average_bits(layers):
    """The element-weighted average of stored bits per element over `layers`, a list of dicts
    {"numel": n, "width": w, "frac_width": f or None}; ValueError when there is no element to count."""
    ### BEGIN SOLUTION
    elements = sum(t["numel"] for t in layers)
    if elements == 0:
        raise ValueError("no elements to count: an average of stored bits needs at least one element")
    return sum(t["numel"] * t["width"] for t in layers) / elements
    ### END SOLUTION


# %% tags=["check"]
avg = check("lab1.average_bits", average_bits)

# %% [markdown]
# ## What the quantized model is
# One config, the course's dict shape, selects every Linear by type. The caller's dict is never changed. The
# average-bits analysis below is your `average_bits` (labkit's once it is checked, otherwise) over every
# Linear's weight and bias, and over its input (`in_features` elements per token), printed beside labkit's
# `quant.average_bits`.

# %%
config = {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": fixed_point(8)}}
q8 = quant.quantize(base, config)
bits = lab.bits_check(q8, base, avg.fn)  # avg.fn: your average_bits once its check passes
print(words.bits_line(bits))
say(words.bits_text(bits))

# %% [markdown]
# ## Width sweep: PTQ and QAT, per training seed

# %%
# one seed at a time; a finished seed's numbers are kept (runs/seeds), so a stopped run resumes after it
with fixed.installed():  # your quantizer (once its check passes) quantizes every Linear below
    per_seed = per_seed_runs.run("lab1", "quantization", S, SEEDS, lambda seed: quantization_seed(S, dl, seed))
for seed, r in zip(SEEDS, per_seed):
    print(f"seed {seed}: fp32 {r['fp32']:.4f}, control {r['control']['accuracy']:.4f}, SFT {r['sft_digest'][:12]}")
numbers = combined(per_seed, SEEDS, dl.sizes)
say(words.sweep_text(numbers, S, lab.calibrated_int8_widths(base, per_seed[0]["input_ranges"]), SEEDS[0]))

# %%
redraw.show("lab1_quantize", "quantization", numbers, S)

# %% [markdown]
# **Question 1a.** From your table: below which width does PTQ lose accuracy, and how much of it does QAT win
# back? Why can training with the quantizer in place recover what rounding alone loses, and why is the
# equal-training control the fair comparison for QAT?

# %% [markdown] tags=["answer"] question=1a points=2
# Model answer: PTQ falls below fp32 at the widths where the rounding step of a Linear's weights or inputs
# becomes comparable to the values themselves (read the width off your table); QAT trains with
# the rounding in the forward pass (straight-through gradients), so the weights move to values the grid keeps.
# Extra training alone also lifts accuracy, so QAT's gain is read against the fp32 model trained for the same
# extra steps.

# %% [markdown] tags=["answer-key"]
# ## Answers from the numbers
#
# Rendered by `labkit.answers.lab1_quantize` from the JSON this notebook just saved (so the committed answers file and
# the numbers beside it cannot disagree); `python -m labkit.redraw lab1_quantize --answers` re-renders it without measuring.

# %% tags=["answer-key"]
from labkit import redraw

redraw.close("lab1_quantize", S)
