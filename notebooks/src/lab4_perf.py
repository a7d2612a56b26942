# %% [markdown]
# # Lab 4, parts 1-2: torch.compile and fused attention, measured properly
#
# The sheet times `torch.compile` on ResNet-18 by averaging 5 calls with no warm-up, so the compilation
# lands inside the average. Here `labkit.perf.time_calls` times every call on its own: the **first call**
# (where `torch.compile` compiles) is reported by itself, a few **warm-up** calls are set aside, and the
# **steady state** is the median, quartiles, min and max of the calls after them. CPU: `time.perf_counter`;
# CUDA: CUDA events around each call, after a synchronize, so one call's queued kernels never land in the next.
#
# **Part 1** compiles ResNet-18 with **random weights** (speed does not depend on them; torchvision's model
# when it imports, otherwise transformers' ResNet-18 with the same 11.69M parameters) on a batch of random
# images. Each variant runs in its own worker process with a cold compiler cache and a time budget, so a
# compile that overruns is reported, not waited for. **Part 2** compares naive attention with
# `F.scaled_dot_product_attention`.
#
# The notebook measures the devices it has (setting `devices="auto"`: the GPU when there is one, else the
# CPU) and shows the other device's **stored** full-profile results beside them. Every heading names the
# device, profile, commit and date its numbers come from (their JSON's provenance), and every number in the
# prose is rendered by `labkit.answers.lab4_perf` from that JSON; the notebook writes the same text to
# `perf_answers.md` beside the results (`figures/lab4/` for the full profile).

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"compile_batch": 32, "devices": ["cpu", "cuda"]}

# %%
import torch

from labkit.answers import lab4_perf as answers
from labkit.perf import compile_study, resolve_devices, sdpa
from labkit.perf.stored import measure_or_load
from labkit.plots import lab4_perf as plots
from labkit.profiles import lab_settings
from labkit.report import say
from labkit.results import save_answers

S = lab_settings("lab4_perf", PROFILE, **OVERRIDES)
if S["threads"]:
    torch.set_num_threads(S["threads"])
DEVICES = resolve_devices(S["devices"])
print(S)
print("measuring on:", DEVICES, "| torch", torch.__version__, "| CPU threads", torch.get_num_threads())
if not torch.cuda.is_available():
    say("**No CUDA GPU in this run.** It measures the CPU only; the GPU numbers below are the stored results "
        "of a full-profile run on a GPU, labelled with their device (or a note that none is stored yet).")
for dev in DEVICES:
    say(answers.sizes_text(S, dev))

# %% [markdown]
# ## Part 1: torch.compile on ResNet-18
#
# Variants: eager; Inductor (torch.compile's default); on CUDA also `mode="reduce-overhead"` (Inductor's
# code replayed from CUDA graphs) and `backend="cudagraphs"` (eager kernels replayed from CUDA graphs); and
# `mode="max-autotune"` at its own smaller batch and budget (it benchmarks many kernel candidates while
# compiling). A *state* is the module mode and grad mode: the sheet calls a freshly built model (train
# mode) without `torch.no_grad()`, i.e. `train+grad`. After timing, one more call per run is profiled to
# see where the time goes.

# %%
COMPILE = measure_or_load("compile", compile_study, S, DEVICES, draw=plots.plot_compile)

# %%
for dev in ("cpu", "cuda"):
    say(answers.compile_section(COMPILE[dev], dev))

# %% [markdown]
# ### Answers 1a (CPU) and 1b (CUDA)
#
# Rendered by `labkit.answers.lab4_perf` from the numbers above. A difference no larger than the spread
# (max - min over the steady calls) of either side is reported as within noise, with no mechanism read
# from it.

# %%
say("**1a. Why did torch.compile give no speedup on the CPU?**\n\n" + answers.compile_answer(COMPILE["cpu"], "cpu"))

# %%
say("**1b. And on CUDA?**\n\n" + answers.compile_answer(COMPILE["cuda"], "cuda"))
if answers.tf32_note(COMPILE["cuda"]):
    say(answers.tf32_note(COMPILE["cuda"]))

# %% [markdown]
# ## Part 2: naive vs fused attention
#
# Naive: `softmax(Q @ K^T * scale) @ V`, four ATen ops, each (seq x seq) intermediate written to memory.
# Fused: `F.scaled_dot_product_attention`, which dispatches to one kernel (flash, memory-efficient, cuDNN)
# that never materialises the attention matrix, or to the math fallback. Both are first checked against a
# float64 evaluation (tolerance by dtype), then profiled with `torch.profiler`, each fused backend is forced
# with `torch.nn.attention.sdpa_kernel`, and the sequence length is swept.

# %%
ATTN = measure_or_load("sdpa", sdpa, S, DEVICES, draw=plots.plot_sdpa)

# %%
for dev in ("cpu", "cuda"):
    say(answers.attention_section(ATTN[dev], dev))
    if dev in DEVICES and ATTN[dev]:  # the profiler's own tables, as torch prints them
        prof = ATTN[dev]["numbers"]["profiles"]
        print(f"--- {dev}: naive ---\n{prof['naive']['table']}\n--- {dev}: fused ---\n{prof['fused']['table']}")

# %% [markdown]
# ### Answers 2a (profile both) and 2b (CUDA)

# %%
say("**2a. Profile naive and fused attention (CPU).**\n\n" + answers.attention_answer(ATTN["cpu"], "cpu"))

# %%
say("**2b. And on CUDA?**\n\n" + answers.attention_answer(ATTN["cuda"], "cuda"))

# %% [markdown]
# The answers file beside the results is rendered from the same stored JSON (`python -m labkit.redraw lab4_perf --answers`
# re-renders it without measuring).

# %%
payloads = {f"{study}_{dev}": got[dev] for study, got in (("compile", COMPILE), ("sdpa", ATTN)) for dev in got}
print("wrote", save_answers("lab4", "perf", answers.render(payloads), S["profile"]))
