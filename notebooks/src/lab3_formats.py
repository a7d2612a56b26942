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
# `labkit.answers.lab3_formats`: each comparison of two accuracies cites one test-set standard error and
# calls differences within two of them a tie. The answers file beside the results (`formats_answers.md`)
# is rendered by the same functions from the JSON this run saves (`tools/render_answers.py lab3_formats`
# renders it again later).

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"format_width": 6, "qat_epochs": 0.5}

# %%
import copy
import inspect

import matplotlib.pyplot as plt
import numpy as np
import torch

from labkit import recipes, train
from labkit.answers import lab3_formats as answers
from labkit.answers import measured
from labkit.profiles import lab_settings
from labkit.quant import FORMATS, average_bits, make_format, quantize, study
from labkit.report import say
from labkit.results import load_results, provenance, save_figure

S = lab_settings("lab3", PROFILE, **OVERRIDES)
print(S)
print("device:", provenance()["device"])
dl = recipes.loaders(S)
base, sft = recipes.finetuned_model(S, dl)
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
# together, `10 log10(Σw² / Σ(w - q)²)`, against the bits each weight costs. Two dashed variants fit one
# parameter to each tensor's largest magnitude: integer with its frac width, log with its exponent bias.

# %%
snr_widths = sorted(set(S["snr_widths"]) | {S["format_width"]})
snr_rows = study.snr_sweep(base, snr_widths, names)
colors = dict(zip(names, plt.get_cmap("tab20").colors[::2] + plt.get_cmap("tab20").colors[1::2]))
fig, ax = plt.subplots(figsize=(8, 4.8))
for label in dict.fromkeys(r["format"] for r in snr_rows):
    pts = sorted((r["bits"], r["snr_db"]) for r in snr_rows if r["format"] == label)
    xs, ys = zip(*pts)
    base_name = label.split(" ")[0]  # a fitted variant is drawn dashed in its format's colour
    ax.plot(xs, ys, "--" if "fit" in label else "-", marker="o" if len(pts) > 1 else "s", ms=4, label=label,
            color=colors[base_name])
ax.set_xlabel("bits per weight (shared exponents and scales included)")
ax.set_ylabel("weight SNR (dB)")
ax.set_title(f"Linear weights of the SFT model ({S['model']}), widths {snr_widths}")
ax.grid(alpha=0.3)
ax.legend(fontsize=7, ncol=2)
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
results = {}
for n in names:
    results[n] = study.ptq_qat(lambda: copy.deepcopy(base), study.flat_config(n, configs[n]), dl, S,
                               freeze=recipes.freeze_embeddings)
    r = results[n]
    print(f"{n:22s} PTQ {r['ptq']['accuracy']:.4f}  QAT {r['qat']['accuracy']:.4f}  "
          f"({r['seconds']:.0f} s{', ' + r['qat_error'] if 'qat_error' in r else ''})")
formats = {n: {"params": configs[n], **results[n]} for n in names}
say(answers.qat_text(S, fp32, dl.sizes, formats))

# %%
fig, ax = plt.subplots(figsize=(10, 4.2))
x = np.arange(len(names))
ptq_acc = [results[n]["ptq"]["accuracy"] for n in names]
qat_acc = [results[n]["qat"]["accuracy"] for n in names]
b1 = ax.bar(x - 0.2, ptq_acc, 0.4, label="PTQ", color="#4c72b0")
b2 = ax.bar(x + 0.2, qat_acc, 0.4, label=f"QAT ({S['qat_epochs']} epochs)", color="#dd8452")
ax.bar_label(b1, fmt="%.3f", fontsize=6, rotation=90, padding=2)
ax.bar_label(b2, fmt="%.3f", fontsize=6, rotation=90, padding=2)
ax.axhline(fp32["accuracy"], ls="--", color="k", lw=0.8, label=f"fp32 {fp32['accuracy']:.3f}")
ax.set_xticks(x, [f"{n}\n{results[n]['bits']['weight_bits']:.2f} b" for n in names], rotation=45, ha="right",
              fontsize=7)
ax.set_ylim(0.0, 1.08)
ax.set_ylabel("IMDb test accuracy")
ax.set_title(f"Every Linear quantized (input, weight, bias; binary formats: bias fp32), width "
             f"{S['format_width']}; {dl.sizes['test']:,} test reviews, profile {S['profile']}", fontsize=9)
ax.legend(fontsize=7, loc="upper center", ncol=3)
numbers = {"fp32": fp32, "sft": sft, "formats": formats, "dataset_sizes": dl.sizes, "plan": plan,
           "linears": linears}
save_figure(fig, "lab3", "formats", numbers, S)
plt.show()

# %% [markdown]
# ## What the numbers say
#
# Rendered from the JSON just saved (read back), as `tools/render_answers.py lab3_formats` renders them later.

# %%
stored = {name: load_results("lab3", name, S["profile"]) for name in answers.NAMES}
num = stored["formats"]["numbers"]
say(answers.summary(num["formats"], num["fp32"], stored["weight_snr"]["numbers"]["rows"], S["format_width"],
                    stored["formats"]["provenance"]["created"]))
how = measured.NOTEBOOK.format(notebook="lab3_formats.ipynb", module="labkit.answers.lab3_formats",
                               lab="lab3_formats")
answers_path, text = answers.render_lab3_formats(S["profile"], how=how)
answers_path.write_text(text)
print("wrote", measured.shown_path(answers_path))
