# %% [markdown]
# # Lab 4 (part 3): MXINT8, a CuTe dequantization kernel, packed Linear layers, and memory
#
# MXINT8 stores groups of `group_size` int8 mantissas `m` in [-127, 127] that share one uint8 exponent
# `E` (bias 127): value = `m * 2^(E-127) / 64`. This notebook quantizes with labkit's pure-PyTorch
# reference (`labkit.quant.formats.mxint`), decodes with the sheet's bit assembly, runs labkit's CuTe
# kernel (`csrc/mxint8_dequant.cuh`, a PyTorch custom op) where a GPU is present, converts a BERT
# classifier's Linear layers to packed MXINT8 and measures what that saves, then answers 3a-3d.
#
# **Your tasks:** the quantizer (`quantize_mxint8`) and the sheet's decode by bit assembly (`decode_mxint8`),
# each checked on the spot against labkit's own; the notebook then round-trips a weight through them and
# decodes the 3b table with your decoder. Questions 3b and 3d ask what the decode's `bias` is for and why
# the memory saving falls short of the theory.

# %% [markdown] tags=["solution-only"]
# On a machine without CUDA the kernel cannot run: the notebook says so (next cell). Every number quoted
# below is computed in this run or read from a stored file labelled with its device.

# %% [markdown] tags=["student-only"]
# On a machine without CUDA the kernel cannot run: the notebook says so (next cell), and what needs a GPU (the
# kernel's bandwidth, the peak GPU memory) is not measured; every number quoted below is computed in this run.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"group_size": 16}

# %%
import torch

from labkit import redraw
from labkit.narrate import lab4_mxint8 as words
from labkit.exercises import check
from labkit.kernels import exclude
from labkit.exercises import lab4_yours as yours
from labkit.labs import lab4_checks as checks, lab4_kernel as kernel, lab4_memory as memory
from labkit.labs.lab4_accuracy import accuracy_numbers
from labkit.run.profiles import lab_settings
from labkit.report import say, table
from labkit.results import provenance, save_results

S = lab_settings("lab4_mxint8", PROFILE, **OVERRIDES)
G = S["group_size"]
print(S, "\ndevice:", provenance()["device"])
EXT = kernel.ready()  # on a GPU this builds the extension (once, cached)
say(words.path_text())

# %% [markdown]
# ## The format: quantization rules and error
#
# `E` is the float32 exponent field of the group's largest magnitude (0 for an all-zero or subnormal
# group, 255 for a group holding inf/NaN, which decodes to NaN); `m = sign(w) * clamp(round(|w| *
# 2^(133-E)), 0, 127)` with `torch.round` (half to even). A few hand-made groups show each rule.
#
# ## Exercise: the MXINT8 quantizer
#
# Write `quantize_mxint8(w, group_size)`: cut the last dimension of `w` into groups of `group_size`
# consecutive elements; per group, `E` = the float32 exponent field of `max|w|` (`floor(log2(max|w|)) + 127`
# for a normal number), `m = sign(w) * clamp(round(|w| / 2^(E-127) * 64), 0, 127)` (so `|w| * 2^(133-E)`);
# return `(m as int8 of w's shape, E as uint8 of shape (*w.shape[:-1], K // group_size))`. Traps: ties
# (half to even), a group max that is exactly a power of two, a max just below one (float32 `log2` rounds
# up there), saturation at 127 (a max that rounds to 128), an all-zero group (`E = 0`, as its exponent
# field), negatives, `group_size` 1. The check leaves inf/NaN and subnormal groups out.
#
# *Hint:* `torch.frexp(amax)` returns `amax = mantissa * 2^exponent` with the mantissa in [0.5, 1): the float
# exponent field is `exponent + 126`.

# %% tags=["exercise"]
def quantize_mxint8(w, group_size):
    """MXINT8 of w: int8 mantissas (w's shape) and one uint8 exponent per group of `group_size` along the last dim."""
    ### BEGIN SOLUTION
    groups = w.float().reshape(*w.shape[:-1], w.shape[-1] // group_size, group_size)
    amax = groups.abs().amax(dim=-1)
    _, e2 = torch.frexp(amax)                          # amax = f * 2^e2, f in [0.5, 1)
    E = torch.where(amax > 0, e2 + 126, 0).clamp(min=0)  # float32 exponent field; 0 for an all-zero group
    scale = torch.pow(2.0, (133 - E).double()).unsqueeze(-1)   # 64 / 2^(E-127), exact in float64
    mag = torch.round(groups.abs().double() * scale).clamp(0, 127)
    m = torch.where(groups < 0, -mag, mag)
    return m.to(torch.int8).reshape(w.shape), E.to(torch.uint8)
    ### END SOLUTION


# %% tags=["check"]
quant = check("lab4.mxint8_quantize", quantize_mxint8)

# %%
FORMAT = checks.format_numbers(G, S["seed"], S["table_exponent"], kernel.cuda_decode if EXT else None)
save_results("lab4", "mxint8_format", FORMAT, S)
say(table(FORMAT["rules"]))

# %% [markdown]
# The same groups through your quantizer (labkit's until yours passes). The last three rows are outside
# the check's cases (a subnormal max, a max near float32's largest, an infinity): compare what yours does.

# %%
say(table(yours.rule_rows(quant.fn, FORMAT["rules"])))

# %% [markdown]
# ## 3a. What MXINT8 buys custom hardware when weights and activations are both MXINT8
#
# Within a group both operands share their scales, so a dot product over a group is an integer dot
# product of the mantissas plus one exponent addition: `sum(w*x) = (sum m_w m_x) * 2^(E_w + E_x - 254) / 4096`.
# The check below computes it both ways on real tensors.

# %%
say(words.dot_text(FORMAT["dot"]))

# %% [markdown]
# ## 3b. The decode by bit assembly: what `dont_need_abs` and `bias` do
#
# `sign = (x & 0x80) << 8`, `exp = E << 7`, `frac = (|x| & 0x3F) << 1`; `out = bits(sign|exp|frac)`,
# `bias = bits(sign|exp)`; `y = dont_need_abs ? out : out - bias` with `dont_need_abs = |x| & 0x40`.
#
# ## Exercise: decode by bit assembly
#
# Write `decode_mxint8(mantissa, exponent, group_size)` -> bf16 of `mantissa`'s shape with exactly these
# steps, per element `x` (int8, widened to int32) with its group's `E` (uint8; `exponent` has one per group of
# `group_size` along the last dim): the fields above, `out` and `bias` as bf16 values *from those bit
# patterns* (a 16-bit pattern `b` in 0..0xFFFF becomes bf16 through int16: `b - 0x10000` when `b >= 0x8000`,
# then `.to(torch.int16).view(torch.bfloat16)`), and `y = out` where `|x| & 0x40`, else `out - bias`
# (subtract in float32, convert to bf16 once). The check compares bf16 bit patterns with labkit's exact
# decode `m * 2^(E-127) / 64` on the format's domain: `m` in [-127, 127], `E` in [1, 254], and all-zero
# groups with `E = 0`. Traps: `m = 0`, `|m| = 64` (bit 6 alone), negatives (the sign is bit 7 of the byte),
# `E = 254` (near bf16's largest), `E = 1` (subnormal results), each group its own exponent.
#
# *Hint:* `exponent.to(torch.int32).repeat_interleave(group_size, dim=-1)` gives every element its `E`.

# %% tags=["exercise"]
def decode_mxint8(mantissa, exponent, group_size):
    """bf16 values of MXINT8 (int8 mantissas, one uint8 exponent per group) by the sheet's bit assembly."""
    ### BEGIN SOLUTION
    x = mantissa.to(torch.int32)
    E = exponent.to(torch.int32).repeat_interleave(group_size, dim=-1)
    a = x.abs()
    sign = (x & 0x80) << 8                 # bit 7 of the byte -> bf16's sign bit 15
    exp = E << 7                           # E -> bf16's exponent bits 14..7
    frac = (a & 0x3F) << 1                 # low 6 bits of |m| -> fraction bits 6..1

    def bf16(bits):                        # 16-bit patterns (int32) -> bf16 values
        return torch.where(bits >= 0x8000, bits - 0x10000, bits).to(torch.int16).view(torch.bfloat16)

    out, bias = bf16(sign | exp | frac), bf16(sign | exp)
    dont_need_abs = (a & 0x40) != 0
    return torch.where(dont_need_abs, out, (out.float() - bias.float()).to(torch.bfloat16))
    ### END SOLUTION


# %% tags=["check"]
dec = check("lab4.mxint8_decode", decode_mxint8)

# %%
say(yours.decode_text(dec.fn, FORMAT["decode"]["table"], S["table_exponent"]))
if not EXT:
    say(words.not_run_text())

# %% [markdown]
# **A weight through your quantizer and your decoder** (labkit's until yours pass): a seeded 768 x 3072
# Gaussian weight (std 0.02) at three group sizes, your round trip's relative error beside labkit's, and
# whether your mantissas, exponents and decoded bf16 bits are labkit's.

# %%
say(table(yours.round_trip_rows(quant.fn, dec.fn, FORMAT["errors"], S["seed"])))

# %% [markdown]
# **Question 3b.** From the table: what are `dont_need_abs` and `bias` for? What goes wrong without `bias`
# (always `out`), and what without `dont_need_abs` (always `out - bias`)?

# %% [markdown] tags=["answer"] question=3b points=2
# Model answer: bf16, like every IEEE format, stores no leading 1: a normal number reads 1.frac x 2^(E-127).
# An MXINT8 mantissa is a plain integer with no implicit 1: |m|/64 is 1.xxxxxx when bit 6 of |m| is set and
# 0.xxxxxx when it is not. The assembly puts the low 6 bits of |m| into bf16's fraction, so `out` always reads
# 1.frac x 2^(E-127). `dont_need_abs` (bit 6 of |m|) says whether that leading 1 is real: then `out` is the
# value. Otherwise `bias` = bits(sign|exp) = +-2^(E-127) is exactly the spurious leading 1, and `out - bias`
# removes it, the float subtraction also renormalising the result. Without `bias`, every |m| < 64 (m = 0
# included) decodes one unit of 2^(E-127) too large in magnitude; without `dont_need_abs`, every |m| >= 64
# loses its real leading 1.

# %% [markdown]
# ## The kernel's bandwidth
#
# Bytes per element: 1 (mantissa) + 1/group_size (exponent) read, 2 (bf16) written. The ceiling is a
# device-to-device copy moving the same bytes, so the figure gives each implementation's bandwidth as a
# percentage of that copy's, at every size measured and at the group size in its title (GB/s are in the
# table and the figure's JSON). On a GPU this runs a sweep of the group size in the settings (the one over
# all group sizes is `python -m labkit.kernels.bandwidth`).

# %% [markdown] tags=["solution-only"]
# Elsewhere it shows that step's stored results. Answer 3c below uses these numbers.

# %% [markdown] tags=["student-only"]
# Elsewhere nothing is measured here; answer 3c from a GPU's run, yours or the course's.

# %%
if EXT:  # this run's sweep of the group size in the settings
    redraw.show("lab4_mxint8", "mxint8_bandwidth_plot", kernel.measured_bandwidth(S), S)
else:
    say(words.cannot_run_text())

# %% tags=["answer-key"]
if not EXT and (STORED_BW := kernel.stored_bandwidth(G)):  # the stored GPU results, as the answer
    redraw.show("lab4_mxint8", "mxint8_bandwidth_plot", STORED_BW, S)
elif not EXT:
    say(words.none_stored_text())

# %% [markdown]
# ## 3c. How `cta_tiler` and `layout_sX` partition data and threads
#
# The sheet's kernel gives each of a CTA's 1,024 threads one element of a (BLK_M, BLK_K) tile. labkit keeps
# that structure in `dequant_tile_kernel` (256 threads, 4 elements each) and adds a vectorised fast path,
# `dequant_vec_kernel`; the drawing shows labkit's kernels, with the constants read out of
# `csrc/mxint8_dequant.cuh`. The answer below takes the sheet's layout first, then contrasts labkit's, with
# the bandwidth measured above.

# %%
# the maps are recomputed from these numbers (labkit.plots.lab4_mxint8): a (32, 80) view, its third tile ragged
redraw.show("lab4_mxint8", "mxint8_tiling", kernel.tiling_numbers(), S)

# %% [markdown]
# ## 3d. Memory: fp32 vs MXINT8, measured
#
# Two models: labkit's default classifier and a DeBERTa-v2-xlarge-sized BERT (random weights) built from a
# config. Every Linear layer except the classifier becomes an `MXINT8Linear`; parameter bytes are counted
# exactly here (the large model on the meta device), resident and peak bytes need a GPU
# (`torch.cuda.max_memory_allocated` during one fp32 inference forward).

# %%
KEEP = exclude("classifier")  # every Linear layer except the classifier becomes an MXINT8Linear
PARAMETERS = memory.parameter_rows(S, KEEP)
say(words.parameter_table(PARAMETERS, G))
if torch.cuda.is_available():
    MEMORY = memory.measure(S, KEEP, PARAMETERS)
    say(words.here_text(MEMORY["measured"], torch.cuda.get_device_name(0)))
    redraw.show("lab4_mxint8", "mxint8_memory", MEMORY, S)
else:
    say(words.NO_GPU)

# %% tags=["answer-key"]
from labkit.results import load_results

if not torch.cuda.is_available():  # the stored full-profile GPU results, as the answer
    STORED_MEMORY = load_results("lab4", "mxint8_memory", "full")
    say(words.stored_text(STORED_MEMORY))
    if STORED_MEMORY and STORED_MEMORY["numbers"]["measured"]:
        redraw.plot("lab4_mxint8", "mxint8_memory", STORED_MEMORY)  # drawn here, shown when the cell ends

# %% [markdown]
# **Question 3d.** The theory for a quantized tensor at group size 32 is (32 - 8.25) / 32 = 74.2% saved (the
# sheet misprints 86.7%). From the parameter table (and the peak memory, where a GPU measured it): why does a
# whole model save less than that?

# %% [markdown] tags=["answer"] question=3d points=2
# Model answer: 74.2% is the saving of each converted tensor (8 + 8/32 bits instead of 32), but only the Linear
# layers' weights are converted. The embeddings (a large share of a small BERT's bytes), LayerNorm weights,
# biases and the classifier stay fp32, so the model's bytes shrink by the quantizable share times 74.2%, which
# is less, and least for the small model, whose embedding table is a larger share of its bytes. The inference
# peak saves less again: besides the weights it holds activations, attention scores and logits, the same size
# in both formats, plus the dequantized bf16 copy of the Linear weight being used (and its cast), which exists
# only in the MXINT8 model.

# %% [markdown]
# ## Accuracy of the converted classifier on IMDb
#
# The fine-tuned (SFT) model of these settings for each training seed of `seeds` (trained once and cached, as
# in Lab 0), evaluated in fp32 and after `convert_to_mxint8` (every Linear but the classifier, group size from
# the settings). The difference is judged over seeds (`labkit.readings.seeds`).

# %%
redraw.show("lab4_mxint8", "mxint8_accuracy", accuracy_numbers(S, KEEP), S)

# %% [markdown] tags=["answer-key"]
# The answers file beside the results comes from the same stored JSON (`python -m labkit.redraw
# lab4_mxint8 --answers` writes it again without measuring).

# %% tags=["answer-key"]
from labkit import redraw
redraw.close("lab4_mxint8", S)
