# %% [markdown]
# # Lab 4 (part 3): MXINT8, a CuTe dequantization kernel, packed Linear layers, and memory
#
# MXINT8 stores groups of `group_size` int8 mantissas `m` in [-127, 127] that share one uint8 exponent
# `E` (bias 127): value = `m * 2^(E-127) / 64`. This notebook quantizes with labkit's pure-PyTorch
# reference (`labkit.kernels.mxint8_ref`), decodes with the sheet's bit assembly, runs labkit's CuTe
# kernel (`csrc/mxint8_dequant.cuh`, a PyTorch custom op) where a GPU is present, converts a BERT
# classifier's Linear layers to packed MXINT8 and measures what that saves, then answers 3a-3d.
#
# On a machine without CUDA the kernel cannot run: the notebook says so (next cell) and shows the GPU
# numbers stored by the last GPU run, labelled with their device. Every number quoted below is computed
# in this run or read from such a stored file.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"group_size": 16}

# %%
import json

import matplotlib.pyplot as plt
import torch

from labkit import models, per_seed as per_seed_runs, recipes, seeds
from labkit.training import train
from labkit.kernels.accuracy import mxint8_accuracy_seed
from labkit.answers import lab4_mxint8 as answers
from labkit.kernels import bench, checks, convert_to_mxint8, dequantize, exclude, extension, memory, tiling
from labkit.plots import lab4_mxint8 as figures
from labkit.profiles import lab_settings
from labkit.report import say, show, table
from labkit.results import load_results, provenance, result_dir, save_answers, save_figure, save_results

S = lab_settings("lab4_mxint8", PROFILE, **OVERRIDES)
G = S["group_size"]
print(S)
print("device:", provenance()["device"])
ON_GPU = torch.cuda.is_available()
EXT = extension.available() if ON_GPU else False  # on a GPU this builds the extension (once, cached)
say(f"**Which MXINT8 path runs here:** {extension.describe()}")
PAYLOADS = {}  # what the answers render from: the JSON saved here, or the stored GPU results


def saved(name):
    """The payload just saved under ``name`` (read back, so the answers render from the stored JSON)."""
    return load_results("lab4", name, S["profile"])


# %% [markdown]
# ## The format: quantization rules and error
#
# `E` is the float32 exponent field of the group's largest magnitude (0 for an all-zero or subnormal
# group, 255 for a group holding inf/NaN, which decodes to NaN); `m = sign(w) * clamp(round(|w| *
# 2^(133-E)), 0, 127)` with `torch.round` (half to even). A few hand-made groups show each rule.

# %%
kernel = (lambda m, e: dequantize(m.cuda(), e.cuda(), 1, backend="cuda").cpu()) if EXT else None
FORMAT = checks.format_numbers(G, S["seed"], S["table_exponent"], kernel)
save_results("lab4", "mxint8_format", FORMAT, S)
PAYLOADS["mxint8_format"] = saved("mxint8_format")
say(table(FORMAT["rules"]))
say(answers.error_text(FORMAT["errors"]))

# %% [markdown]
# ## 3a. What MXINT8 buys custom hardware when weights and activations are both MXINT8
#
# Within a group both operands share their scales, so a dot product over a group is an integer dot
# product of the mantissas plus one exponent addition: `sum(w*x) = (sum m_w m_x) * 2^(E_w + E_x - 254) / 4096`.
# The check below computes it both ways on real tensors.

# %%
say(answers.dot_answer(FORMAT["dot"]))

# %% [markdown]
# ## 3b. The decode by bit assembly: what `dont_need_abs` and `bias` do
#
# `sign = (x & 0x80) << 8`, `exp = E << 7`, `frac = (|x| & 0x3F) << 1`; `out = bits(sign|exp|frac)`,
# `bias = bits(sign|exp)`; `y = dont_need_abs ? out : out - bias` with `dont_need_abs = |x| & 0x40`.

# %%
say(f"E = {S['table_exponent']} (scale 2^{S['table_exponent'] - 127}):\n\n"
    + table(FORMAT["decode"]["table"], answers.DECODE_COLUMNS, floatfmt=".6g"))
say(answers.decode_answer(FORMAT["decode"]))
if not EXT:
    say(f"(The CUDA kernel did not run here: {extension.reason()}.)")

# %% [markdown]
# ## The kernel's bandwidth
#
# Bytes per element: 1 (mantissa) + 1/group_size (exponent) read, 2 (bf16) written. The ceiling is a
# device-to-device copy moving the same bytes, so the figure gives each implementation's bandwidth as a
# percentage of that copy's, at every size measured and at the group size in its title (GB/s are in the
# table and the figure's JSON). On a GPU this runs a sweep of the group size in the settings (the one over
# all group sizes is `python -m labkit.kernels.bandwidth`); elsewhere it shows that step's stored results.
# Answer 3c below uses these numbers.

# %%
stored_path = result_dir("lab4", "full") / "mxint8_bandwidth.json"
if EXT:
    bw = bench.sweep(S["bench_sizes"], S["bench_groups"], compile=S["bench_compile"], reps=S["bench_reps"],
                     progress=False)
    bw["device"] = torch.cuda.get_device_name(0)
    bw_source = f"measured in this run on {bw['device']} (torch {torch.__version__}, CUDA {torch.version.cuda})"
elif stored_path.is_file():
    bw = json.loads(stored_path.read_text())
    v = bw.get("versions", {})
    bw_source = (f"stored GPU results from `{stored_path.relative_to(result_dir('lab4', 'full').parent.parent)}`: "
                 f"{bw['device']}, torch {v.get('torch')}, CUDA {v.get('cuda')}, "
                 f"{bw.get('provenance', {}).get('created', 'date unknown')}; not measured here ({extension.reason()})")
else:
    bw = None
    bw_source = f"no GPU results stored yet and no kernel here ({extension.reason()})"
if bw:
    summary = bench.summary_table(bw)
    say(answers.bandwidth_text(summary, bw_source, G))
    g_plot = G if any(r["g"] == G for r in summary) else summary[0]["g"]
    fig = figures.plot_bandwidth(bw["rows"], g_plot, device=bw["device"])
    save_figure(fig, "lab4", "mxint8_bandwidth_plot", {"source": bw_source, "group_size": g_plot,
                                                       "rows": bw["rows"], "copy": bw["copy"], "summary": summary}, S)
    PAYLOADS["mxint8_bandwidth_plot"] = saved("mxint8_bandwidth_plot")
    show(fig)
else:
    summary = None
    say(f"**Bandwidth numbers:** {bw_source}.")

# %% [markdown]
# ## 3c. How `cta_tiler` and `layout_sX` partition data and threads
#
# The sheet's kernel gives each of a CTA's 1,024 threads one element of a (BLK_M, BLK_K) tile. labkit keeps
# that structure in `dequant_tile_kernel` (256 threads, 4 elements each) and adds a vectorised fast path,
# `dequant_vec_kernel`; the drawing shows labkit's kernels, with the constants read out of
# `csrc/mxint8_dequant.cuh`. The answer below takes the sheet's layout first, then contrasts labkit's, with
# the bandwidth measured above.

# %%
K = tiling.kernel_constants()
assert (K["kVecElems"], K["kVecThreads"], K["kVecUnroll"], K["kTileElems"], K["kTileThreads"]) == \
    (tiling.VEC_ELEMS, tiling.VEC_THREADS, tiling.VEC_UNROLL, tiling.TILE_ELEMS, tiling.TILE_THREADS)
g_draw, groups_draw = 32, 80  # a (32, 80) view: tiles of 32 groups in k, the third one ragged
tm = tiling.lab_tile_map(g_draw, groups_draw)
tiling_numbers = {"constants": K, "drawn": {"group_size": g_draw, "num_groups": groups_draw,
                                            **{k: tm[k] for k in ("BLK_M", "BLK_K", "THR_M", "THR_K")}}}
fig = figures.plot_tiling(tiling_numbers)  # the maps are recomputed from these numbers (labkit.plots.lab4_mxint8)
save_figure(fig, "lab4", "mxint8_tiling", tiling_numbers, S)
show(fig)
PAYLOADS["mxint8_tiling"] = saved("mxint8_tiling")
say(answers.tiling_answer(tiling_numbers, G, summary))

# %% [markdown]
# ## 3d. Memory: fp32 vs MXINT8, measured
#
# Two models: labkit's default classifier and a DeBERTa-v2-xlarge-sized BERT (random weights) built from a
# config. Every Linear layer except the classifier becomes an `MXINT8Linear`; parameter bytes are counted
# exactly here (the large model on the meta device), resident and peak bytes need a GPU
# (`torch.cuda.max_memory_allocated` during one fp32 inference forward).

# %%
big_config = dict(hidden_size=S["big_hidden"], num_hidden_layers=S["big_layers"],
                  num_attention_heads=S["big_heads"], intermediate_size=S["big_intermediate"])
big_name = f"BERT {S['big_layers']}x{S['big_hidden']} (DeBERTa-xlarge size)"


def build_default(device):
    return models.load_model(S["model"]).to(device)


def build_big(device):  # random weights, created directly on `device` ("meta": shapes only)
    with torch.device(device):
        return models.from_config(**big_config)


builders = {S["model"]: build_default, big_name: build_big}
keep = exclude("classifier")
param_rows = []
for name, build in builders.items():
    model_sizes = build("meta" if build is build_big else "cpu")
    before = memory.tensor_bytes(model_sizes)
    convert_to_mxint8(model_sizes, G, keep)
    after = memory.tensor_bytes(model_sizes)
    param_rows.append({"model": name, "fp32 MB": before["total"] / 1e6, "MXINT8 MB": after["total"] / 1e6,
                       "saved": 1 - after["total"] / before["total"],
                       "quantizable share": (before["linear weights"] - after["linear weights"]) / before["total"],
                       "embeddings MB": before["embeddings"] / 1e6})
    del model_sizes
say(answers.parameter_table(param_rows, G))

if ON_GPU:
    measured = {name: memory.compare(lambda b=build: b("cuda"), G, S["memory_batch"], S["memory_seq"], keep)
                for name, build in builders.items()}
    mem_source = f"measured in this run on {torch.cuda.get_device_name(0)}"
else:
    stored = load_results("lab4", "mxint8_memory", "full")
    measured = stored["numbers"]["measured"] if stored else None
    mem_source = (f"stored full-profile GPU results ({stored['provenance']['device']}, "
                  f"{stored['provenance']['created']}); no GPU here" if stored else "no GPU here and none stored")
    PAYLOADS["mxint8_memory"] = stored
say(f"**Peak memory numbers:** {mem_source}.")
if measured:
    mem_rows = answers.memory_rows(measured)
    say(table(mem_rows, floatfmt=".1f"))
    fig = figures.plot_memory(measured, device=torch.cuda.get_device_name(0) if ON_GPU
                              else (stored or {}).get("provenance", {}).get("device"))
    if ON_GPU:
        save_figure(fig, "lab4", "mxint8_memory", {"measured": measured, "parameters": param_rows}, S)
        PAYLOADS["mxint8_memory"] = saved("mxint8_memory")
    show(fig)
say(answers.memory_answer(measured, param_rows, G))

# %% [markdown]
# ## Accuracy of the converted classifier on IMDb
#
# The fine-tuned (SFT) model of these settings for each training seed of `seeds` (trained once and cached, as
# in Lab 0), evaluated in fp32 and after `convert_to_mxint8` (every Linear but the classifier, group size from
# the settings). The difference is judged over seeds (`labkit.seeds`).

# %%
dl = recipes.loaders(S)
dev = train.pick_device(S["device"])
batch = {k: v.to(dev) for k, v in next(iter(dl.test)).items()}
# one seed at a time; a finished seed's numbers are kept (runs/seeds), so a stopped run resumes after it
per_seed = per_seed_runs.run("lab4", "mxint8_accuracy", S, recipes.train_seeds(S),
                             lambda seed: mxint8_accuracy_seed(S, dl, seed, G, keep, batch))
acc_numbers = {**seeds.combine(per_seed, recipes.train_seeds(S)), "dataset_sizes": dl.sizes,
               "kernel_path": extension.describe()}
fig = figures.plot_accuracy(acc_numbers, S)
save_figure(fig, "lab4", "mxint8_accuracy", acc_numbers, S)
plt.show()
PAYLOADS["mxint8_accuracy"] = saved("mxint8_accuracy")
say(answers.accuracy_text(acc_numbers, G))

# %% [markdown]
# The answers file beside the results is rendered from the same stored JSON (`python -m labkit.redraw
# lab4_mxint8 --answers` re-renders it without measuring).

# %%
print("wrote", save_answers("lab4", "mxint8", answers.render(PAYLOADS), S["profile"]))
