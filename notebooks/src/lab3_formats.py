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
# Every sentence below that quotes a number prints it from this run's variables.

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
from labkit.profiles import lab_settings
from labkit.quant import FORMATS, average_bits, make_format, quantize, study
from labkit.report import say, table
from labkit.results import provenance, save_figure

S = lab_settings("lab3", PROFILE, **OVERRIDES)
print(S)
print("device:", provenance()["device"])
dl = recipes.loaders(S)
base, sft = recipes.finetuned_model(S, dl)
fp32 = train.evaluate(base, dl.test, device=S["device"], desc="fp32", progress=False)
linears = [n for n, m in base.named_modules() if isinstance(m, torch.nn.Linear)]
say(f"Base: the SFT model ({S['model']}, {S['max_length']} tokens; "
    f"{'from the cache' if 'cached' in sft else 'trained now'}): fp32 accuracy **{fp32['accuracy']:.4f}** on "
    f"{dl.sizes['test']:,} test reviews. It has {len(linears)} Linear layers, the last two "
    f"`{linears[-2]}` and `{linears[-1]}`; all of them are quantized below.")

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
say(table(plan, ["format", "parameters", "roles", "bits/weight", "bits/input", "value set"], floatfmt=".3f"))

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
save_figure(fig, "lab3", "weight_snr", {"rows": snr_rows}, S)
plt.show()

at_w = {r["format"]: r for r in snr_rows if r["width"] in (S["format_width"], None)}
best = max((r for r in at_w.values() if "fit" not in r["format"]), key=lambda r: r["snr_db"])
say(f"At {S['format_width']} bits the highest weight SNR is **{best['format']}** ({best['snr_db']:.1f} dB at "
    f"{best['bits']:.2f} bits). Integer with frac {configs['integer']['weight']['frac_width']} reaches "
    f"{at_w['integer']['snr_db']:.1f} dB and rounds **{100 * at_w['integer']['zeroed']:.0f}%** of the non-zero "
    f"weights to 0 (one fixed range for all layers); fitting the frac width per tensor gives "
    f"{at_w['integer (frac fit per tensor)']['snr_db']:.1f} dB. log at its default bias: "
    f"{at_w['log']['snr_db']:.1f} dB, {100 * at_w['log']['zeroed']:.1f}% zeroed.")
small = 4 if 4 in snr_widths else min(snr_widths)  # 2 bits leave log a single magnitude: nothing to fit
log_small = {r["format"]: r for r in snr_rows if r["width"] == small}
if small < S["format_width"]:
    say(f"At {small} bits the default log bias flushes **{100 * log_small['log']['zeroed']:.0f}%** of the "
        f"weights to zero ({log_small['log']['snr_db']:.1f} dB): the range 2^-b..2^(2^(w-1)-1-b) cannot hold "
        f"both weights and activations. Fitting the bias to each tensor keeps "
        f"{100 * (1 - log_small['log (bias fit per tensor)']['zeroed']):.0f}% non-zero "
        f"({log_small['log (bias fit per tensor)']['snr_db']:.1f} dB); the log quantizer module warns when "
        "most of a tensor flushes, instead of collapsing silently as the reference did.")

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
rows = [{"format": n, "bits/weight": results[n]["bits"]["weight_bits"],
         "bits/input": results[n]["bits"]["data_in_bits"], "PTQ": results[n]["ptq"]["accuracy"],
         "QAT": results[n]["qat"]["accuracy"], "QAT - PTQ": results[n]["qat"]["accuracy"] -
         results[n]["ptq"]["accuracy"], "seconds": results[n]["seconds"]} for n in names]
steps = next((r["qat_train"]["steps"] for r in results.values() if "qat_train" in r), 0)
say(f"fp32: **{fp32['accuracy']:.4f}**. QAT: {steps} steps "
    f"({S['qat_epochs']} epochs of {dl.sizes['train']:,} reviews, batch {S['batch_size']}) at lr "
    f"{S['qat_lr']}.\n\n"
    + table(rows, ["format", "bits/weight", "bits/input", "PTQ", "QAT", "QAT - PTQ", "seconds"], floatfmt=".4f"))

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
numbers = {"fp32": fp32, "sft": sft, "formats": {n: {"params": configs[n], **results[n]} for n in names},
           "dataset_sizes": dl.sizes}
save_figure(fig, "lab3", "formats", numbers, S)
plt.show()

# %% [markdown]
# ## What the numbers say

# %%
order = sorted(names, key=lambda n: -results[n]["ptq"]["accuracy"])
near = [n for n in names if results[n]["ptq"]["accuracy"] >= fp32["accuracy"] - 0.01]
gain = max(names, key=lambda n: np.nan_to_num(results[n]["qat"]["accuracy"] - results[n]["ptq"]["accuracy"],
                                               nan=-1.0))
chance = [n for n in names if results[n]["ptq"]["accuracy"] <= 0.55]
say(f"- **PTQ.** {len(near)} of {len(names)} formats stay within 1 point of fp32 "
    f"({fp32['accuracy']:.4f}) right after quantization: {', '.join(near) or 'none'}. Best "
    f"{order[0]} ({results[order[0]]['ptq']['accuracy']:.4f}), worst {order[-1]} "
    f"({results[order[-1]]['ptq']['accuracy']:.4f}).\n"
    f"- **At chance after PTQ** (≤ 0.55): {', '.join(chance) or 'none'}.\n"
    f"- **QAT** helps most for {gain}: {results[gain]['ptq']['accuracy']:.4f} → "
    f"{results[gain]['qat']['accuracy']:.4f} after {steps} steps.\n"
    f"- **Cost.** Weights at {min(r['bits/weight'] for r in rows):.2f} to "
    f"{max(r['bits/weight'] for r in rows):.2f} "
    "bits per element; the Lab 3 search trades these bits against the accuracies above.")
