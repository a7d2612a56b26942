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
# Every sentence below that quotes a number prints it from this run's variables, through
# `labkit.answers.lab3_formats`. PTQ and QAT run once per training seed (`seeds`: an SFT model each, and
# each QAT with that seed); each comparison states an uncertainty combining the spread over seeds with the
# test-set error (`labkit.seeds`) and calls a difference that is not established a tie. The answers file beside the results (`formats_answers.md`)
# is rendered by the same functions from the JSON this run saves (`python -m labkit.redraw lab3_formats --answers`
# renders it again later).

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"format_width": 6, "qat_epochs": 0.5}

# %%
import inspect

import matplotlib.pyplot as plt
import torch

from labkit import per_seed as per_seed_runs, recipes, seeds
from labkit.training import train
from labkit.answers import lab3_formats as answers
from labkit.answers import measured
from labkit.profiles import lab_settings
from labkit.quant import FORMATS, average_bits, make_format, quantize, study
from labkit.report import say
from labkit.plots.lab3_formats import plot_formats, plot_snr
from labkit.results import load_results, provenance, save_figure

S = lab_settings("lab3", PROFILE, **OVERRIDES)
SEEDS = recipes.train_seeds(S)
print(S)
print("device:", provenance()["device"])
dl = recipes.loaders(S)
base, sft = recipes.finetuned_model(S, dl, seed=SEEDS[0])
fp32 = train.evaluate(base, dl.test, device=S["device"], desc="fp32", progress=False)
linears = [n for n, m in base.named_modules() if isinstance(m, torch.nn.Linear)]
say(answers.base_text(S, fp32, dl.sizes, sft, linears))

# %% [markdown]
# ## The formats and their parameters
#
# Width formats use `format_width` bits per element (block formats add their shared exponent, amortised
# over the block); the others have their own width: MXINT8 8 bits + an 8-bit exponent per group of 32,
# binary 1 bit, binary scaling 1 bit + an fp32 scale per row, residual sign 2 bits + 2 fp32 scales per
# tensor. `bits/weight` and `bits/input` are what `average_bits` counts on the quantized model; bits/weight
# averages weights and biases, so the binary family's fp32 biases lift it above 1.

# %%
names = [n for n in study.STUDY_ORDER if n in FORMATS]
assert set(names) == set(FORMATS), f"formats without a place in the study: {set(FORMATS) - set(names)}"
configs = {n: study.study_params(n, S["format_width"]) for n in names}
plan = []
for n in names:
    probe = quantize(base, study.flat_config(n, configs[n])).model
    bits = average_bits(probe)
    fmt = make_format(n, **configs[n]["weight"])
    # every format but integer states its value set with its parameters; integer's docstring opens with it
    value_set = fmt.value_set() if hasattr(fmt, "value_set") else inspect.getdoc(fmt).split("\n")[0]
    plan.append({"format": n, "roles": ", ".join(configs[n]), "parameters": fmt.describe(),
                 "bits/weight": bits["weight_bits"], "bits/input": bits["data_in_bits"],
                 "value set": value_set.replace("|", "\\|")})  # a bare | would split the Markdown cell
del probe
say(answers.plan_text(plan))

# %% [markdown]
# ## Quantization error on the real weights, against bits per element
#
# For every format and width, the signal-to-quantization-noise ratio of all Linear weights of the SFT model
# (the first training seed's) together, `10 log10(Σw² / Σ(w - q)²)`, against the bits each weight costs. Two dashed variants fit one
# parameter to each tensor's largest magnitude: integer with its frac width, log with its exponent bias.

# %%
snr_widths = sorted(set(S["snr_widths"]) | {S["format_width"]})
snr_rows = study.snr_sweep(base, snr_widths, names)
fig = plot_snr(snr_rows, names, S, snr_widths)
integer_frac = configs["integer"]["weight"]["frac_width"]
save_figure(fig, "lab3", "weight_snr", {"rows": snr_rows, "integer_frac": integer_frac}, S)
plt.show()
say(answers.snr_text(snr_rows, S["format_width"], integer_frac))
log_small = answers.log_small_text(snr_rows, S["format_width"])  # empty when no smaller width was swept
if log_small:
    say(log_small)

# %% [markdown]
# ## PTQ and QAT on IMDb
#
# Each format starts from a fresh copy of the SFT model: quantize, evaluate (PTQ), train `qat_epochs`
# epochs with the quantizers in place at `qat_lr` (embeddings frozen, as in SFT; the straight-through
# estimators carry the gradients), evaluate again (QAT).

# %%
# one seed at a time; a finished seed's numbers are kept (runs/seeds), so a stopped run resumes after it
per_seed = per_seed_runs.run("lab3", "formats", S, SEEDS, lambda seed: study.formats_seed(S, dl, seed, configs))
numbers = {**seeds.combine(per_seed, SEEDS), "dataset_sizes": dl.sizes, "plan": plan, "linears": linears}
say(answers.qat_text(S, numbers["fp32"], dl.sizes, numbers["formats"]))

# %%
fig = plot_formats(numbers, S)
save_figure(fig, "lab3", "formats", numbers, S)
plt.show()

# %% [markdown]
# ## What the numbers say
#
# Rendered from the JSON just saved (read back), as `python -m labkit.redraw lab3_formats --answers` renders them later.

# %%
stored = {name: load_results("lab3", name, S["profile"]) for name in answers.NAMES}
num = stored["formats"]["numbers"]
say(answers.summary(num["formats"], num["fp32"], stored["weight_snr"]["numbers"]["rows"], S["format_width"],
                    stored["formats"]["provenance"]["created"], seeds.count(num)))
how = measured.NOTEBOOK.format(notebook="lab3_formats.ipynb", module="labkit.answers.lab3_formats",
                               lab="lab3_formats")
answers_path, text = answers.render_lab3_formats(S["profile"], how=how)
answers_path.write_text(text)
print("wrote", measured.shown_path(answers_path))
