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
import copy
import json

import matplotlib.pyplot as plt
import numpy as np
import torch

from labkit import models, recipes, train
from labkit.kernels import (bench, convert_to_mxint8, dequantize, dequantize_mxint8, exclude, extension,
                            memory, quantize_mxint8, tiling)
from labkit.kernels import mxint8_ref as ref
from labkit.profiles import lab_settings
from labkit.report import say, table
from labkit.results import load_results, provenance, result_dir, save_figure

S = lab_settings("lab4_mxint8", PROFILE, **OVERRIDES)
G = S["group_size"]
print(S)
print("device:", provenance()["device"])
ON_GPU = torch.cuda.is_available()
EXT = extension.available() if ON_GPU else False  # on a GPU this builds the extension (once, cached)
say(f"**Which MXINT8 path runs here:** {extension.describe()}")

# %% [markdown]
# ## The format: quantization rules and error
#
# `E` is the float32 exponent field of the group's largest magnitude (0 for an all-zero or subnormal
# group, 255 for a group holding inf/NaN, which decodes to NaN); `m = sign(w) * clamp(round(|w| *
# 2^(133-E)), 0, 127)` with `torch.round` (half to even). A few hand-made groups show each rule.

# %%
examples = {
    "tie 2.5/64 -> 2, 3.5/64 -> 4 (half to even)": torch.tensor([1.0, 2.5 / 64, 3.5 / 64, -2.5 / 64]),
    "saturation: 1.999 -> 127": torch.tensor([1.999, 0.5, 0.25, -1.0]),
    "all zero": torch.zeros(4),
    "subnormal max (1e-40)": torch.tensor([1e-40, -5e-41, 0.0, 1e-45]),
    "huge (3e38)": torch.tensor([3e38, -1e38, 1.0, 0.0]),
    "holds inf": torch.tensor([float("inf"), 1.0, 2.0, 3.0]),
}
rows = []
for name, w in examples.items():
    m, e = quantize_mxint8(w, 4)
    back = dequantize_mxint8(m, e, 4, dtype=torch.float32)
    rows.append({"group": name, "E": int(e), "m": m.tolist(), "decoded": [f"{v:.4g}" for v in back.tolist()]})
say(table(rows))

torch.manual_seed(S["seed"])
weight = torch.randn(768, 3072) * 0.02
err_rows = []
for g in (16, 32, 128):
    m, e = quantize_mxint8(weight, g)
    back = dequantize_mxint8(m, e, g, dtype=torch.float32)
    err_rows.append({"group_size": g, "bits/element": 8 + 8 / g, "saving vs fp32": memory.theoretical_saving(g),
                     "relative L2 error": ((back - weight).norm() / weight.norm()).item(),
                     "mean |m|": m.float().abs().mean().item()})
say(f"A 768 x 3072 Gaussian weight (std 0.02) quantized with three group sizes:\n\n{table(err_rows)}\n\n"
    f"Larger groups cost fewer exponent bits but share one scale among more values, so the small values of a "
    f"group keep fewer significant bits: the error grows from {err_rows[0]['relative L2 error']:.2%} (g=16) to "
    f"{err_rows[-1]['relative L2 error']:.2%} (g=128).")

# %% [markdown]
# ## 3a. What MXINT8 buys custom hardware when weights and activations are both MXINT8
#
# Within a group both operands share their scales, so a dot product over a group is an integer dot
# product of the mantissas plus one exponent addition: `sum(w*x) = (sum m_w m_x) * 2^(E_w + E_x - 254) / 4096`.
# The check below computes it both ways on real tensors.

# %%
x_act = torch.randn(3072)
mw, ew = quantize_mxint8(weight[0], G)
mx, ex = quantize_mxint8(x_act, G)
int_dots = (mw.view(-1, G).long() * mx.view(-1, G).long()).sum(-1)          # exact integers
scales = torch.pow(2.0, (ew.long() + ex.long() - 254 - 12).double())         # one exponent add per group
dot_int = (int_dots.double() * scales).sum().item()
dot_float = (dequantize_mxint8(mw, ew, G, torch.float64) * dequantize_mxint8(mx, ex, G, torch.float64)).sum().item()
acc_bound = G * 127 * 127
say(f"Group dot products through integers: {dot_int!r}; through the dequantized floats: {dot_float!r}; equal: "
    f"**{dot_int == dot_float}**. Each group is {G} int8 x int8 products summed exactly in an integer "
    f"accumulator (at most {acc_bound:,} < 2^{int(np.ceil(np.log2(acc_bound)))}), then one 8-bit exponent "
    f"add and one scale per {G} multiply-accumulates.\n\n"
    f"So custom hardware needs only integer multipliers and adders in the inner loop (no per-element "
    f"exponent alignment, normalisation or rounding as in floating point: smaller, lower-power MAC units, "
    f"more of them per mm^2), and it moves {8 + 8 / G:g} bits per operand instead of 16 (bf16) or 32 (fp32): "
    f"{32 / (8 + 8 / G):.2f}x fewer bytes than fp32 and {16 / (8 + 8 / G):.2f}x fewer than bf16 for "
    f"weights *and* activations, so a memory-bound layer runs up to that much faster and on-chip buffers "
    f"hold that many more values. A GPU without MXINT8 units gets only the storage saving, and pays a "
    f"dequantization pass to bf16 (the kernel below).")

# %% [markdown]
# ## 3b. The decode by bit assembly: what `dont_need_abs` and `bias` do
#
# `sign = (x & 0x80) << 8`, `exp = E << 7`, `frac = (|x| & 0x3F) << 1`; `out = bits(sign|exp|frac)`,
# `bias = bits(sign|exp)`; `y = dont_need_abs ? out : out - bias` with `dont_need_abs = |x| & 0x40`.

# %%
sample = [0, 1, 5, 32, 63, 64, 65, 100, 127, -1, -63, -64, -127]
dec_rows = ref.decode_bits_table(sample, S["table_exponent"])
cols = ["m", "byte", "frac", "out", "out value", "bias value", "dont_need_abs", "y", "exact",
        "without bias", "always subtract"]
say(f"E = {S['table_exponent']} (scale 2^{S['table_exponent'] - 127}):\n\n" + table(dec_rows, cols, floatfmt=".6g"))

# all 65,536 (mantissa byte, exponent byte) pairs
mm = torch.arange(-128, 128, dtype=torch.int32).to(torch.int8).reshape(-1, 1).expand(256, 256).contiguous()
ee = torch.arange(256, dtype=torch.int32).to(torch.uint8).reshape(1, -1).expand(256, 256).contiguous()
exact = dequantize_mxint8(mm.reshape(-1, 1), ee.reshape(-1, 1), 1).reshape(256, 256)
d = ref.sheet_decode(mm, ee)
patched = ref.sheet_decode(mm, ee, patched=True)["y"]


def differs(a, b):
    return ~((ref.bits_of(a) == ref.bits_of(b)) | (torch.isnan(a) & torch.isnan(b)))


domain = (mm != -128) & (ee >= 1) & (ee <= 254)
sheet_bad = differs(d["y"], exact)
no_bias = differs(d["out_value"], exact) & domain
always_sub = differs((d["out_value"].float() - d["bias_value"].float()).to(torch.bfloat16), exact) & domain
decode_numbers = {
    "pairs": mm.numel(), "domain_pairs": int(domain.sum()), "sheet_wrong_in_domain": int((sheet_bad & domain).sum()),
    "sheet_wrong_E0": int((sheet_bad & (ee == 0)).sum()),
    "sheet_inf_E255": int(torch.isinf(d["y"].float())[ee == 255].sum()),
    "sheet_nan_E255": int(torch.isnan(d["y"].float())[ee == 255].sum()),
    "sheet_wrong_m_minus128": int((sheet_bad & (mm == -128) & (ee > 0) & (ee < 255)).sum()),
    "without_bias_wrong": int(no_bias.sum()), "always_subtract_wrong": int(always_sub.sum()),
    "patched_wrong": int(differs(patched, exact).sum()),
}
say(f"Over the format's domain (m in [-127, 127], E in [1, 254]: {decode_numbers['domain_pairs']:,} pairs) the "
    f"sheet's decode equals `m * 2^(E-127) / 64` exactly: {decode_numbers['sheet_wrong_in_domain']} mismatches. "
    f"Without `bias` (always `out`) {decode_numbers['without_bias_wrong']:,} pairs are wrong (every |m| < 64 "
    f"gains a spurious leading 1, e.g. m = 1 decodes to {dec_rows[1]['without bias']} instead of "
    f"{dec_rows[1]['exact']}); without `dont_need_abs` (always subtract) {decode_numbers['always_subtract_wrong']:,} "
    f"are wrong (every |m| >= 64 loses its real leading 1, e.g. m = 100 gives {dec_rows[7]['always subtract']} "
    f"instead of {dec_rows[7]['exact']}).\n\n"
    "**Answer 3b.** bf16 (like every IEEE format) stores no leading 1: a normal number is 1.frac x 2^(E-127). "
    "MXINT8 mantissas are plain integers with no implicit 1: |m|/64 is 1.xxxxxx when bit 6 of |m| is set and "
    "0.xxxxxx when it is not. The assembly puts the low 6 bits of |m| in bf16's fraction, so `out` always "
    "reads 1.frac. `dont_need_abs` (bit 6 of |m|) says the leading 1 is real, and `out` is the answer; "
    "otherwise `bias` = bits(sign|exp) = +-2^(E-127) is exactly the spurious leading 1, and `out - bias` "
    "removes it (the subtraction also renormalises the result, which the bit assembly alone cannot).\n\n"
    f"Outside the domain the assembly is not exact, and labkit defines and patches those pairs: E = 0 "
    f"({decode_numbers['sheet_wrong_E0']} wrong: bf16's zero exponent field has no implicit 1 either, so "
    f"`bias` is 0 and `out` is a subnormal of twice the value; the exact value m * 2^-133 is the subnormal "
    f"whose fraction is |m|), E = 255 (bf16's inf/NaN exponent field: the assembly gives "
    f"{decode_numbers['sheet_inf_E255']} infinities and {decode_numbers['sheet_nan_E255']} NaNs of assorted "
    f"payloads; labkit decodes the whole group as NaN, the OCP MX rule, and the quantizer writes 255 only for "
    f"groups holding inf/NaN) and the byte m = -128 that the quantizer never writes "
    f"({decode_numbers['sheet_wrong_m_minus128']} wrong: |m| = 128 overflows the 7 bits; labkit decodes it "
    f"as -2 * 2^(E-127)). With those patches: {decode_numbers['patched_wrong']} mismatches in all "
    f"{decode_numbers['pairs']:,} pairs; the CUDA kernel's `decode_bits` is the same code.")

if EXT:
    k_all = dequantize(mm.reshape(-1, 1).cuda(), ee.reshape(-1, 1).cuda(), 1, backend="cuda").cpu()
    decode_numbers["kernel_wrong_all_pairs"] = int(differs(k_all.reshape(256, 256), exact).sum())
    say(f"The CUDA kernel on all {mm.numel():,} pairs: {decode_numbers['kernel_wrong_all_pairs']} mismatches.")
else:
    decode_numbers["kernel_wrong_all_pairs"] = None
    say(f"(The CUDA kernel did not run here: {extension.reason()}.)")

# %% [markdown]
# ## 3c. How `cta_tiler` and the thread layout partition data and threads
#
# labkit keeps the sheet's structure in `dequant_tile_kernel` and adds a vectorised fast path,
# `dequant_vec_kernel`; the drawing uses the constants read out of `csrc/mxint8_dequant.cuh`.

# %%
K = tiling.kernel_constants()
assert (K["kVecElems"], K["kVecThreads"], K["kVecUnroll"], K["kTileElems"], K["kTileThreads"]) == \
    (tiling.VEC_ELEMS, tiling.VEC_THREADS, tiling.VEC_UNROLL, tiling.TILE_ELEMS, tiling.TILE_THREADS)
g_draw, groups_draw = 32, 80  # a (32, 80) view: 2 x 32 groups per tile in k, the last tile ragged
tm = tiling.lab_tile_map(g_draw, groups_draw)
vm = tiling.vec_map(3 * tiling.VEC_THREADS * tiling.VEC_UNROLL)

fig, axes = plt.subplots(1, 3, figsize=(17, 4.8), gridspec_kw={"width_ratios": [2.0, 1.7, 2.0]})
ax = axes[0]
ax.imshow(tm["cta"], cmap="Pastel1", aspect="auto", interpolation="nearest")
for c in range(tm["tiles_k"]):
    ax.text(c * tm["BLK_K"] + min(tm["BLK_K"], groups_draw - c * tm["BLK_K"]) / 2 - 0.5, g_draw / 2,
            f"CTA {c}", ha="center", va="center", fontsize=11)
ax.set(title=f"local_tile: (group_size, num_groups) = ({g_draw}, {groups_draw}),\n"
             f"cta_tiler ({tm['BLK_M']}, {tm['BLK_K']}); CTA 2 is ragged (predicated)",
       xlabel="k: group (shares exponent k)", ylabel="m: element within group")
ax = axes[1]
tile0 = tm["thread"][:, :tm["BLK_K"]]
ax.imshow(tile0 // 32, cmap="tab10", vmin=0, vmax=9, aspect="auto", interpolation="nearest")  # colour = warp
for kk in range(16):
    for mrow in (0, 1, 2, 30, 31):
        ax.text(kk, mrow, str(tile0[mrow, kk]), ha="center", va="center", fontsize=5.5)
for j in range(1, tm["BLK_K"] // tm["THR_K"]):
    ax.axvline(j * tm["THR_K"] - 0.5, color="k", lw=1.5)
ax.set(title=f"local_partition, column-major ({tm['THR_M']}, {tm['THR_K']}) thread layout:\n"
             f"thread ids (colour = warp); the layout repeats every {tm['THR_K']} columns",
       xlabel="k within CTA 0", ylabel="m")
ax = axes[2]
strip = np.stack([vm["thread"], vm["slot"] * 64, vm["cta_tile"] * 85])
ax.imshow(strip, cmap="magma", aspect="auto", interpolation="nearest")
ax.set_yticks([0, 1, 2], ["thread", "slot u", "CTA tile"])
ax.set(title=f"fast path: {tiling.VEC_ELEMS}-element vector v -> thread v % {tiling.VEC_THREADS}, slot "
             f"(v // {tiling.VEC_THREADS}) % {tiling.VEC_UNROLL},\nCTA tile v // "
             f"{tiling.VEC_THREADS * tiling.VEC_UNROLL} (grid-stride)",
       xlabel=f"{tiling.VEC_ELEMS}-element vector index v")
fig.tight_layout()
tiling_numbers = {"constants": K, "drawn": {"group_size": g_draw, "num_groups": groups_draw,
                                            **{k: tm[k] for k in ("BLK_M", "BLK_K", "THR_M", "THR_K")}}}
save_figure(fig, "lab4", "mxint8_tiling", tiling_numbers, S)
plt.show()
per_thread = int(np.bincount(tm["thread"][:, :tm["BLK_K"]].ravel()).max())
say(f"**Answer 3c.** The kernel views the flat tensor as a column-major matrix (group_size, num_groups), so "
    f"column k is group k and uses exponent k. `cta_tiler` = (BLK_M, BLK_K) = ({tm['BLK_M']}, {tm['BLK_K']}) "
    f"(1,024 elements) cuts it into CTA tiles: `local_tile(mX, cta_tiler, cta_coord)` returns the tile at "
    f"`cta_coord`, rows [tm*BLK_M, ...), columns [tk*BLK_K, ...), and `local_tile` of the exponent vector with "
    f"BLK_K gives the matching exponents. The thread layout ({tm['THR_M']}, {tm['THR_K']}), column-major, numbers "
    f"threads down the rows first (thread t -> (t % {tm['THR_M']}, t // {tm['THR_M']})), so a warp's 32 threads "
    f"read 32 consecutive bytes of one group; `local_partition(tile, layout, t)` repeats that layout over the "
    f"tile and gives thread t every element at its position in each repeat: here {per_thread} elements, "
    f"{tm['THR_K']} columns apart. The sheet uses the same shape for the shared-memory tile (`layout_sX`), "
    f"so each thread copies and then decodes the same elements; labkit drops the shared-memory stage, which an "
    f"elementwise kernel does not need (each byte is used once). What labkit changes: the CTA coordinates come "
    f"from a 1-D grid-stride loop (the sheet puts num_groups / BLK_K on grid y, which stops at 65,535 and fails "
    f"silently from 2^26 elements), ragged tiles are predicated with an identity tensor (`elem_less`), and every "
    f"launch is checked. The fast path keeps local_tile/local_partition but tiles a ({tiling.VEC_ELEMS}, "
    f"n/{tiling.VEC_ELEMS}) view: each thread owns {tiling.VEC_UNROLL} vectors of {tiling.VEC_ELEMS} elements, "
    f"{tiling.VEC_THREADS} apart, so it has {tiling.VEC_UNROLL} x {tiling.VEC_ELEMS} B of loads in flight, and a "
    f"warp's load instruction reads 256 contiguous bytes and its store instruction writes 512 contiguous bytes "
    f"(whole 32-byte sectors).")

# %% [markdown]
# ## The kernel's bandwidth
#
# Bytes per element: 1 (mantissa) + 1/group_size (exponent) read, 2 (bf16) written. The ceiling is a
# device-to-device copy moving the same bytes. On a GPU this runs a short sweep (the full one is
# `benchmarks/mxint8_bandwidth.py`); elsewhere it shows that script's stored results.

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
say(f"**Bandwidth numbers:** {bw_source}.")
if bw:
    summary = bench.summary_table(bw)
    impls = [i for i in ("cute_vec", "cute_tile", "eager", "compile") if f"{i} GB/s" in summary[0]]
    say(table(summary, ["n", "g", "copy GB/s"] + [f"{i} {k}" for i in impls for k in ("GB/s", "%copy")],
              floatfmt=".0f"))
    fig, ax = plt.subplots(figsize=(7.5, 4))
    g_plot = G if any(r["g"] == G for r in summary) else summary[0]["g"]
    sel = [r for r in summary if r["g"] == g_plot]
    ns = [r["n"] for r in sel]
    ax.plot(ns, [r["copy GB/s"] for r in sel], "k--", label="copy (same bytes)")
    for i in impls:
        ax.plot(ns, [r[f"{i} GB/s"] for r in sel], "o-", label=i)
    ax.set(xscale="log", xlabel="elements n", ylabel="GB/s (bytes read + written)",
           title=f"MXINT8 -> bf16, group {g_plot}: {bw['device']}")
    ax.legend(fontsize=8)
    large = max(ns)
    big = {i: next(r[f"{i} %copy"] for r in sel if r["n"] == large) for i in impls}
    save_figure(fig, "lab4", "mxint8_bandwidth_plot", {"source": bw_source, "summary": summary}, S)
    plt.show()
    say(f"At n = {large:,} (group {g_plot}) the vectorised CuTe kernel reaches **{big['cute_vec']:.0f}%** of copy "
        f"bandwidth, the lab-structure tile kernel {big['cute_tile']:.0f}%, eager PyTorch {big['eager']:.0f}%"
        + (f", torch.compile {big['compile']:.0f}%" if "compile" in big else "")
        + ". The course's kernel measured 22-30% of copy on an H100. Small sizes are launch-bound (a few "
          "microseconds of launch dominate a megabyte of traffic), and below about 2^24 elements much of the "
          "output can still sit in L2 when the timing stops, so ratios there can exceed 100%.")

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
say(f"Parameter and buffer bytes (theory for a quantized tensor: (32 - {8 + 8 / G:g}) / 32 = "
    f"{memory.theoretical_saving(G):.1%}):\n\n" + table(param_rows, floatfmt=".3f"))

if ON_GPU:
    measured = {name: memory.compare(lambda b=build: b("cuda"), G, S["memory_batch"], S["memory_seq"], keep)
                for name, build in builders.items()}
    mem_source = f"measured in this run on {torch.cuda.get_device_name(0)}"
else:
    stored = load_results("lab4", "mxint8_memory", "full")
    measured = stored["numbers"]["measured"] if stored else None
    mem_source = (f"stored full-profile GPU results ({stored['provenance']['device']}, "
                  f"{stored['provenance']['created']}); no GPU here" if stored else "no GPU here and none stored")
say(f"**Peak memory numbers:** {mem_source}.")
if measured:
    mem_rows = []
    for name, c in measured.items():
        for fmt in ("fp32", "mxint8"):
            r = c[fmt]
            mem_rows.append({"model": name, "format": r["format"], "parameters MB": r["bytes"]["total"] / 1e6,
                             "resident MB": r["resident"] / 1e6, "peak MB": r["peak"] / 1e6,
                             "peak - resident MB": r["peak_minus_resident"] / 1e6})
    say(table(mem_rows, floatfmt=".1f"))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [f"{r['model'][:24]}\n{r['format']}" for r in mem_rows]
    ax.bar(labels, [r["peak MB"] for r in mem_rows], color=["#4c72b0", "#dd8452"] * len(measured))
    ax.bar(labels, [r["resident MB"] for r in mem_rows], color="none", edgecolor="k", hatch="//",
           label="resident (weights)")
    ax.set(ylabel="MB", title=f"inference peak, batch {S['memory_batch']} x {S['memory_seq']} tokens")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    if ON_GPU:
        save_figure(fig, "lab4", "mxint8_memory", {"measured": measured, "parameters": param_rows}, S)
    plt.show()
    bigname = list(measured)[-1]
    cb, cs = measured[bigname], measured[list(measured)[0]]
    temp_mb = cb["mxint8"]["largest_linear"] * 6 / 1e6
    say(f"**Answer 3d.** The theory, 74.2%, holds for each converted weight tensor; the model saves less. "
        f"(1) Not everything is converted: for {bigname} the converted Linear weights are "
        f"{cb['quantized_share_of_fp32_bytes']:.1%} of the fp32 bytes, so the whole-model prediction is "
        f"{cb['theory_whole_model']:.1%}, and the parameter bytes fall by {cb['saving_parameter_bytes']:.1%}; "
        f"embeddings ({param_rows[-1]['embeddings MB']:.0f} MB), LayerNorm, biases and the classifier stay fp32. For {list(measured)[0]} "
        f"the embeddings dominate, so only {cs['quantized_share_of_fp32_bytes']:.1%} of its bytes can shrink and the "
        f"parameter saving is {cs['saving_parameter_bytes']:.1%}. (2) The peak holds more than weights: "
        f"activations, attention scores and the logits, the same for both formats, and for MXINT8 the "
        f"dequantized weight of the running layer (a bf16 temporary and its fp32 cast: up to {temp_mb:.0f} MB for "
        f"the largest {cb['mxint8']['largest_linear']:,}-element Linear). Measured peak saving: "
        f"{cb['saving_peak']:.1%} ({cb['fp32']['peak'] / 1e6:.0f} -> {cb['mxint8']['peak'] / 1e6:.0f} MB) for "
        f"{bigname}, {cs['saving_peak']:.1%} for {list(measured)[0]}. The course measured a DeBERTa-xlarge "
        f"classifier at 2906 -> 976 MB (66.4%). The allocator's block rounding adds a little to every "
        f"tensor.")

# %% [markdown]
# ## Accuracy of the converted classifier on IMDb
#
# The fine-tuned (SFT) model of these settings (trained once and cached, as in Lab 0), evaluated in fp32
# and after `convert_to_mxint8` (every Linear but the classifier, group size from the settings).

# %%
dl = recipes.loaders(S)
sft_model, sft_metrics = recipes.finetuned_model(S, dl)
fp32_eval = train.evaluate(sft_model, dl.test, device=S["device"], desc="fp32 eval")
q_model = copy.deepcopy(sft_model).cpu()
conv = convert_to_mxint8(q_model, G, keep)
q_eval = train.evaluate(q_model, dl.test, device=S["device"], desc="MXINT8 eval")
dev = train.pick_device(S["device"])
batch = {k: v.to(dev) for k, v in next(iter(dl.test)).items()}
with torch.no_grad():
    gap = (sft_model.to(dev)(**batch).logits.float() - q_model.to(dev)(**batch).logits.float()).abs().max().item()
fig, ax = plt.subplots(figsize=(4.5, 3.2))
bars = ax.bar(["fp32 (SFT)", f"MXINT8 g{G}"], [fp32_eval["accuracy"], q_eval["accuracy"]], color=["#4c72b0", "#dd8452"])
ax.bar_label(bars, fmt="%.4f")
ax.set(ylim=(0.4, 1.0), ylabel="IMDb test accuracy", title=f"{S['model']}, {dl.sizes['test']:,} reviews")
acc_numbers = {"fp32": fp32_eval, "mxint8": q_eval, "converted": conv["converted"], "skipped": conv["skipped"],
               "weight_saving": conv["weight_saving"], "max_logit_gap": gap, "dataset_sizes": dl.sizes,
               "kernel_path": extension.describe()}
save_figure(fig, "lab4", "mxint8_accuracy", acc_numbers, S)
plt.show()
say(f"{len(conv['converted'])} Linear layers converted ({', '.join(conv['skipped'])} kept in fp32), their weights "
    f"{conv['weight_saving']:.1%} smaller. Accuracy on {dl.sizes['test']:,} test reviews: fp32 "
    f"**{fp32_eval['accuracy']:.4f}**, MXINT8 **{q_eval['accuracy']:.4f}** "
    f"({q_eval['accuracy'] - fp32_eval['accuracy']:+.4f}); largest logit difference on a test batch {gap:.3g}. "
    f"Dequantization ran through: {extension.describe()}.")
