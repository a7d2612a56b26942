# %% [markdown]
# # Lab 3 (part 1): every Linear number format, after PTQ and after QAT
#
# Lab 3 searches over the Linear precisions the course library offers. Before searching, this notebook
# checks that every one of them works: each registered format of `labkit.quant` (integer fixed point,
# two minifloats, log, three block formats, MXINT8 and three binary formats) quantizes the fine-tuned
# classifier of Lab 0, which we then evaluate (PTQ) and train further with the quantizers in place (QAT).
#
# **What is quantized.** Every `nn.Linear` of the model, the pooler and the classifier head included:
# its input (`data_in`) and weight always, its bias too except for the
# three binary formats (a bias binarized to ±1 is destroyed; binary networks keep biases in full
# precision). Embeddings, LayerNorm, softmax and GELU stay in fp32. Each format's exact value set is in
# its docstring; the table below prints the parameters it gets here.
#
# Every sentence below that quotes a number prints it from this run's variables. PTQ and QAT run once per training seed (`seeds`: an SFT model each, and
# each QAT with that seed); each comparison states an uncertainty combining the spread over seeds with the
# test-set error (`labkit.readings.seeds`) and calls a difference that is not established a tie.
#
# **Your part.** Three of the formats are yours to write (the denorm minifloat, the log format and block floating
# point), each checked on the spot against labkit's own; once a check passes, your function computes that format's
# values in place of labkit's in the grid, the SNR study and PTQ and QAT below, on every device (while it is
# installed labkit's Triton kernel, compiled formulas and CUDA graphs are off for that format, and no value labkit's
# function computed is reused). Two questions ask what the measurements mean.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"format_width": 6, "qat_epochs": 0.5}

# %%
import math

import torch

from labkit import recipes, redraw
from labkit.exercises import check
from labkit.labs import lab3_formats
from labkit.narrate import lab3_formats as words
from labkit.labs.lab3_precision import linear_layers
from labkit.quant import study
from labkit.records.lab3_formats import snr_widths
from labkit.report import say
from labkit.results import provenance
from labkit.run.profiles import lab_settings
from labkit.training import precision, train

S = lab_settings("lab3_formats", PROFILE, **OVERRIDES)
SEEDS = recipes.train_seeds(S)
print(S)
print("device:", provenance()["device"])
dl = recipes.loaders(S)
base, sft = recipes.finetuned_model(S, dl, seed=SEEDS[0])
fp32 = train.evaluate(base, dl.test, **precision.on(S), desc="fp32", progress=False)
linears = linear_layers(base)
say(words.base_text(S, fp32, dl.sizes, sft, linears))

# %% [markdown]
# ## The formats and their parameters
#
# Width formats use `format_width` bits per element (block formats add their shared exponent, amortised
# over the block); the others have their own width: MXINT8 8 bits + an 8-bit exponent per group of 32,
# binary 1 bit, binary scaling 1 bit + an fp32 scale per row, residual sign 2 bits + 2 fp32 scales per
# tensor. `bits/weight` and `bits/input` are what `average_bits` counts on the quantized model; bits/weight
# averages weights and biases, so the binary family's fp32 biases lift it above 1.

# %%
configs, plan = lab3_formats.study_plan(base, S["format_width"])  # every registered format, at format_width
say(words.plan_table(plan))

# %% [markdown]
# ## Exercise: the denorm minifloat
#
# `minifloat_denorm` stores a sign, `E = exponent_width` exponent bits and `M = width - E - 1` mantissa bits, with
# **no implicit leading 1**: a value is `m * 2^(e - M)` with `0 <= m <= 2^M - 1` and `-b <= e <= 2^E - 1 - b`, bias
# `b = 2^(E-1) - 1`. Write the quantizer as labkit rounds: saturate `|x|` at the largest value
# `(2^M - 1) * 2^(emax - M)` (emax = 2^E - 1 - b), take `e = clamp(ceil(log2|x|), -b, emax)` (so
# `|x|` lies in `(2^(e-1), 2^e]`), round `|x| / 2^(e-M)` half to even, multiply back and put the sign back, in `x`'s
# dtype. Traps: a power of two (its mantissa is exactly `2^M`: that is `2^e`, a value of the format; the sheet's
# "clamp the mantissa to 2^M - 1" would shrink it), ties, values beyond the largest, values below the smallest step
# (the exponent clamp keeps the grid at `2^(-b-M)` there), zero (`log2(0) = -inf`).
#
# *Hint:* `torch.ceil(torch.log2(a)).clamp(-b, emax)`; `torch.round` rounds half to even.

# %% tags=["exercise"]
def minifloat_denorm(x, width, exponent_width):
    """x quantized to the denorm minifloat: `exponent_width` exponent bits, no implicit leading bit."""
    ### BEGIN SOLUTION
    m = width - exponent_width - 1                       # mantissa bits
    bias = 2 ** (exponent_width - 1) - 1
    emax = 2 ** exponent_width - 1 - bias
    largest = (2 ** m - 1) * 2.0 ** (emax - m)
    a = x.abs().clamp(max=largest)                       # saturate first
    e = torch.ceil(torch.log2(a)).clamp(-bias, emax)     # |x| in (2^(e-1), 2^e]; log2(0) = -inf clamps to -bias
    step = 2.0 ** (e - m)
    return (torch.sign(x) * torch.round(a / step) * step).to(x.dtype)
    ### END SOLUTION


# %% tags=["check"]
denorm = check("lab3.minifloat_denorm", minifloat_denorm)

# %% [markdown]
# ## Exercise: the log format
#
# `log` stores a sign and a `width - 1`-bit exponent code; code 0 is zero, so with bias `b` the values are 0 and
# `+-2^e` for `1 - b <= e <= 2^(width-1) - 1 - b`. Write `log_quantize(x, width, bias)` as labkit rounds: in the
# **log domain**, `e = clamp(round(log2|x|), 1 - b, 2^(width-1) - 1 - b)`, `q = sign(x) * 2^e`, except that `|x|`
# below `2^-b` (half the smallest magnitude) becomes 0. Traps: the cut between `2^k` and `2^(k+1)` is
# `sqrt(2) * 2^k` (log domain), not `1.5 * 2^k`; saturation at the top; the zero code (mapping 0 or tiny values to
# the smallest power is the reference's collapse); and exactness: for float32 values next to `sqrt(2) * 2^k`,
# `torch.log2` in float32 returns `k + 1/2` exactly.
#
# *Hint:* compute `log2` in float64 (`x.abs().double()`), then cast the result back to `x.dtype`.

# %% tags=["exercise"]
def log_quantize(x, width, bias):
    """x quantized to the log format: sign and 2^e, e in [1 - bias, 2^(width-1) - 1 - bias], or 0."""
    ### BEGIN SOLUTION
    emin, emax = 1 - bias, 2 ** (width - 1) - 1 - bias
    a = x.abs().double()                                 # float64: log2 next to sqrt(2) * 2^k must be exact
    e = torch.round(torch.log2(a)).clamp(emin, emax)     # round in the log domain
    q = torch.where(a < 2.0 ** (emin - 1), 0.0, 2.0 ** e)  # below half the smallest power: zero
    return (torch.sign(x) * q).to(x.dtype)
    ### END SOLUTION


# %% tags=["check"]
logq = check("lab3.log", log_quantize)

# %% [markdown]
# ## Exercise: block floating point
#
# `block_fp` cuts the **last dimension** into blocks of `block_size` consecutive elements (a last dimension that
# `block_size` does not divide ends in a shorter block, with its own exponent; blocks never span rows). Each block
# stores one shared exponent `s = clamp(floor(log2 max|x_block|), -b, 2^E - 1 - b)` (`E = exponent_width`,
# `b = 2^(E-1) - 1`), and each element a sign and `M = width - 1` bits: `q = k * 2^(s + 1 - M)` with
# `k = clamp(round(x / 2^(s+1-M)), -(2^M - 1), 2^M - 1)`. Traps: the ragged last block, an all-zero block (no NaN),
# an outlier that sets its block's step, the block max rounding up past `2^M - 1` (saturate), and an exact
# `floor(log2 max)` for a max just below a power of two.
#
# *Hint:* pad the last dimension with zeros to a multiple of `block_size` and reshape to `(..., n_blocks,
# block_size)`; take the max over the last axis; undo the padding at the end. float64 keeps `log2` exact.

# %% tags=["exercise"]
def block_fp(x, width, block_size, exponent_width=8):
    """x quantized to block floating point: blocks of `block_size` along the last dimension share an exponent."""
    ### BEGIN SOLUTION
    m = width - 1
    bias = 2 ** (exponent_width - 1) - 1
    emax = 2 ** exponent_width - 1 - bias
    xs = x.double().reshape(1) if x.dim() == 0 else x.double()
    n = xs.shape[-1]
    pad = (-n) % block_size                              # a ragged last block: pad with zeros
    blocks = torch.nn.functional.pad(xs, (0, pad)).reshape(*xs.shape[:-1], (n + pad) // block_size, block_size)
    top = blocks.abs().amax(dim=-1, keepdim=True)
    s = torch.floor(torch.log2(top)).clamp(-bias, emax)  # an all-zero block: -inf clamps to -bias
    step = 2.0 ** (s + 1 - m)
    k = torch.round(blocks / step).clamp(-(2 ** m - 1), 2 ** m - 1)
    q = (k * step).reshape(*xs.shape[:-1], n + pad)[..., :n]
    return q.reshape(x.shape).to(x.dtype)
    ### END SOLUTION


# %% tags=["check"]
bfp = check("lab3.block_fp", block_fp)

# %% [markdown]
# ## The three formats on a small grid
#
# Each format's values of a few numbers from -300 to 300: the function this notebook uses (yours once its check
# passes, labkit's otherwise) beside labkit's format. Block FP cuts the row into blocks of 4, so each group of four
# shares the exponent of its largest magnitude.

# %%
say(words.grid_table(lab3_formats.grid_rows(denorm.fn, logq.fn, bfp.fn)))

# %% [markdown]
# ## Quantization error on the real weights, against bits per element
#
# For every format and width, the signal-to-quantization-noise ratio of all Linear weights of the SFT model
# (the first training seed's) together, `10 log10(Σw² / Σ(w - q)²)`, against the bits each weight costs. Two dashed variants fit one
# parameter to each tensor's largest magnitude: integer with its frac width, log with its exponent bias. The
# minifloat denorm, log (both variants) and block FP rows quantize the weights with your functions once their checks
# pass (labkit's formats call `minifloat_denorm`, `log_quantize` and `block_fp` of `labkit.quant.formats`, which
# `installed()` replaces for the duration of the block; a format with another exponent bias than the default,
# as the fitted log variant's, still calls yours: `log_quantize` takes the bias).

# %%
with denorm.installed(), logq.installed(), bfp.installed():  # your quantizers, where their checks passed
    snr_rows = study.snr_sweep(base, snr_widths(S), list(configs))
redraw.show("lab3_formats", "weight_snr", lab3_formats.snr_numbers(snr_rows, configs), S)

# %%
say(words.snr_table(snr_rows))

# %% [markdown]
# **Question 3a.** Why does the log format collapse at small widths (look at its SNR and at the share of weights it
# rounds to zero as the width shrinks), and what does fitting its bias to each tensor change, and what not?

# %% [markdown] tags=["answer"] question=3a points=2
# Model answer: a log format with `w` bits has `2^(w-1) - 1` magnitudes, consecutive powers of two, so its range
# spans `2^(w-1) - 2` binades and nothing else: each bit fewer halves the range it covers. With the default bias the
# window is centred on 1, which suits activations but not BERT's weights, almost all far below 1: at a small width
# the window's bottom lies above most weights, and everything below half its smallest power flushes to zero, so the
# layer's output loses most of its signal. Fitting the bias per tensor slides the window to the tensor's largest
# magnitude and keeps far more weights non-zero, but it cannot widen the window (the small weights of a tensor with
# one large weight still flush) nor refine it: a power of two is off by up to a factor sqrt(2), so the SNR stays
# low at every width; a block format with a per-block bias (block log) or a mantissa (minifloat) does better.

# %% [markdown]
# ## PTQ and QAT on IMDb
#
# Each format starts from a fresh copy of the SFT model: quantize, evaluate (PTQ), train `qat_epochs`
# epochs with the quantizers in place at `qat_lr` (embeddings frozen, as in SFT; the straight-through
# estimators carry the gradients), evaluate again (QAT).
#
# **What runs.** Inside `installed()` each of your three functions whose check passed computes its format's values
# in every quantized Linear of the minifloat denorm, log and block FP models (input, weight and bias, in PTQ and in
# every QAT step's forward), on the CPU and on a GPU alike: labkit's fast paths for those formats are off while yours
# is in place, so they run eagerly. The straight-through gradient's mask (where it passes) is labkit's, and the
# other eight formats are labkit's own. A function whose check failed is not installed: labkit's runs there. Numbers
# measured with your functions are kept apart from labkit's (`runs/seeds` keys them by your functions' code).

# %%
# one seed at a time; a finished seed's numbers are kept (runs/seeds), so a stopped run resumes after it
with denorm.installed(), logq.installed(), bfp.installed():  # your quantizers, where their checks passed
    numbers = lab3_formats.run(S, dl, SEEDS, configs, plan, linears)
say(words.qat_text(S, numbers["fp32"], dl.sizes, numbers["formats"]))

# %%
redraw.show("lab3_formats", "formats", numbers, S)

# %% [markdown]
# **Question 3b.** Block floating point gives a block one exponent, set by its largest magnitude. What does one
# large value do to the other values of its block, and what do smaller blocks buy and cost (count the bits)?

# %% [markdown] tags=["answer"] question=3b points=2
# Model answer: the shared exponent puts the block's step at `2^(s+1-M)` with `s` the exponent of the block max, so
# every other value of the block is rounded on the grid of the largest one: a value `2^j` times smaller keeps about
# `M - j` bits, and values more than `2^M` below the max flush to zero. One outlier thus costs its neighbours their
# precision, which is why block FP sits between integer (one grid for the whole tensor) and a per-element float.
# Smaller blocks confine an outlier to fewer neighbours and let each block's grid follow its own range, at
# `shared_bits / block_size` extra bits per element (an 8-bit exponent costs 0.5 bits at blocks of 16, 0.25 at
# 32), which the bit count of the search in part 2 charges.

# %% [markdown] tags=["answer-key"]
# ## What the numbers say
#
# Rendered from the JSON just saved (read back), as `python -m labkit.redraw lab3_formats --answers` renders them later.

# %% tags=["answer-key"]
from labkit import redraw
redraw.close("lab3_formats", S)
