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
# CPU) and shows the other device's **stored** full-profile figures beside them. Every heading names the
# device its numbers come from (their JSON's provenance).
#
# **Your tasks:** an honest timer (`time_calls`, Part 1) and naive attention (Part 2), each checked on the spot
# against labkit's own; the notebook then uses them to time a function and to compare with PyTorch's fused
# attention. Question 1a asks why the sheet's measurement shows no speedup.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"compile_batch": 32, "devices": ["cpu", "cuda"]}

# %%
import math
import time

import torch
import torch.nn.functional as F

from labkit.exercises import check
from labkit.perf import compile_study, resolve_devices, sdpa
from labkit.labs.lab4_perf import measure
from labkit.perf.timing import fmt_seconds, synchronize
from labkit.plots import lab4_perf as plots
from labkit.run.profiles import lab_settings
from labkit.report import say, table

S = lab_settings("lab4_perf", PROFILE, **OVERRIDES)
if S["threads"]:
    torch.set_num_threads(S["threads"])
DEVICES = resolve_devices(S["devices"])
print(S)
print("measuring on:", DEVICES, "| torch", torch.__version__, "| CPU threads", torch.get_num_threads())
if not torch.cuda.is_available():
    say("**No CUDA GPU in this run.** It measures the CPU only (the solution edition shows a full-profile GPU run's "
        "stored results beside it).")

# %% tags=["answer-key"]
from labkit.answers import lab4_perf as answers

for dev in DEVICES:
    say(answers.sizes_text(S, dev))

# %% [markdown]
# ## Exercise: an honest timer
#
# The sheet times `torch.compile` by averaging 5 calls with no warm-up. Write a timer that keeps the parts
# apart: call `fn()` `1 + warmup + repeats` times and time **each call alone**: `sync()` (so earlier work is
# finished), read `clock()`, call `fn()`, `sync()` again, read `clock()`. On a GPU `fn()` only *queues* its
# kernels and returns; the work is done at the synchronize, so a clock read without it times the launch only.
# Return `{"first": <seconds of call 0>, "median": <median of the last repeats calls>}`: the warm-up calls are
# made but count in neither.
#
# The check runs your timer on a fake device: `fn` takes scripted durations (a 10 s "compile" first, then
# ~1 s calls) that finish only at `sync()`, on a clock that starts at 1000 s. Traps: an even number of steady
# calls (the median is the mean of the two middle ones), `warmup=0`, `repeats=1`, one slow outlier among the
# steady calls, slow warm-up calls.
#
# *Hint:* `statistics.median` (not `torch.median`, which returns the lower middle value).

# %% tags=["exercise"]
def time_calls(fn, repeats, warmup, clock, sync):
    """Seconds of fn()'s first call, and the median of its last `repeats` calls after `warmup` warm-up calls."""
    ### BEGIN SOLUTION
    times = []
    for _ in range(1 + warmup + repeats):
        sync()                  # the previous call's queued work stays out of this window
        start = clock()
        fn()
        sync()                  # this call's queued work is inside it
        times.append(clock() - start)
    steady = sorted(times[1 + warmup:])
    n = len(steady)
    median = steady[n // 2] if n % 2 else (steady[n // 2 - 1] + steady[n // 2]) / 2
    return {"first": times[0], "median": median}
    ### END SOLUTION


# %% tags=["check"]
timer = check("lab4.timer", time_calls)

# %% [markdown]
# Your timer (labkit's until yours passes) on a real first call: `torch.compile` with the `eager` backend
# captures the function with Dynamo on its first call (no code generation, so it takes a moment, not
# minutes), then replays the captured graph.

# %%
HERE = DEVICES[0]  # the device this run measures
x = torch.randn(256, 256, device=HERE)
captured = torch.compile(lambda t: F.gelu(t @ t.T).sum(), backend="eager")
got = timer.fn(lambda: captured(x), repeats=20, warmup=2, clock=time.perf_counter, sync=lambda: synchronize(HERE))
say(f"On {HERE}: first call **{fmt_seconds(got['first'])}** (Dynamo captures the function), steady median "
    f"**{fmt_seconds(got['median'])}**, {got['first'] / got['median']:,.0f}x. Averaging the first 5 calls with "
    f"no warm-up, as the sheet does, would report about {fmt_seconds((got['first'] + 4 * got['median']) / 5)} "
    "a call.")
torch._dynamo.reset()  # leave no captured graph behind

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
COMPILE = measure("compile", compile_study, S, DEVICES, draw=plots.plot_compile)

# %%
for dev in DEVICES:  # measured in this run
    st = COMPILE[dev]["numbers"]
    say(f"### {dev.upper()}: measured in this run on {COMPILE[dev]['provenance']['device']}\n\nEvery run:\n\n"
        + table(compile_study.summary_rows(st), floatfmt=".3f")
        + "\n\nCompiled vs eager in the same state and batch (overhead: extra start-up time over eager's; "
        "break-even: overhead / steady saving per call):\n\n" + table(compile_study.comparison_rows(st), floatfmt=".3f")
        + "\n\nWhere one steady call spends its time (profiler):\n\n"
        + table(compile_study.share_rows(st), floatfmt=".3f"))

# %% tags=["answer-key"]
from labkit.labs.lab4_perf import with_stored

COMPILE = with_stored(COMPILE, "compile")  # the other device: its stored full-profile results
for dev in ("cpu", "cuda"):
    if dev not in DEVICES:
        say(answers.compile_section(COMPILE[dev], dev))

# %% [markdown]
# **Question 1a.** The sheet compiles ResNet-18 and averages 5 calls with no warm-up, and finds no speedup on
# the CPU. From your timer's first call and the table above: why does that measurement show no speedup, and
# what would a fair comparison of compiled and eager look like?

# %% [markdown] tags=["answer"] question=1a points=2
# Model answer: the first call of a compiled model is where `torch.compile` traces the model with Dynamo and
# generates and compiles its kernels with Inductor, which takes seconds to minutes, while a steady call takes
# milliseconds to seconds. Averaged over only 5 calls, that one-off compile dominates the mean, so the
# compiled model looks as slow as eager or slower whatever its steady speed. A fair comparison times the first
# call apart (the compile overhead), runs a few warm-up calls, and compares the median of the steady calls of
# compiled and eager in the same state (module mode and grad mode) and batch; the overhead divided by the
# steady saving per call says after how many calls compiling pays off. On a CPU the steady saving itself can be
# small or within noise: the time goes to convolutions that eager already runs in optimised library kernels,
# so fusing the cheap elementwise ops around them leaves little to win.

# %% [markdown] tags=["answer-key"]
# ### Answers 1a (CPU) and 1b (CUDA)
#
# From the numbers above (`labkit.answers.lab4_perf`). A difference no larger than the spread (max - min over
# the steady calls) of either side is reported as within noise, with no mechanism read from it.

# %% tags=["answer-key"]
say("**1a. Why did torch.compile give no speedup on the CPU?**\n\n" + answers.compile_answer(COMPILE["cpu"], "cpu"))

# %% tags=["answer-key"]
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

# %% [markdown]
# ## Exercise: naive attention
#
# Write `softmax(Q K^T / sqrt(d)) V` as the sheet does, with `d` the head dimension (`q.shape[-1]`), over the
# last two dimensions of `(..., seq, d)` tensors (any leading batch and head dimensions). With
# `is_causal=True`, query `i` sees keys `0..i` only: set the scores of later keys to `-inf` before the softmax
# (top-left aligned when there are fewer queries than keys, as `F.scaled_dot_product_attention` does). Traps:
# the softmax runs over the **keys** (the last dim), the mask's triangle, and large scores (`exp` overflows
# float32 beyond 88: `torch.softmax` subtracts each row's max first; a hand-written `exp / sum` must too).
# Checked in float32 within `1e-6 + 1e-5 * |expected|`.
#
# *Hint:* `torch.ones(Lq, Lk, dtype=torch.bool).tril()` marks the (query, key) pairs a causal query keeps.

# %% tags=["exercise"]
def naive_attention(q, k, v, is_causal=False):
    """softmax(q @ k^T / sqrt(d)) @ v over the last two dims; causal: query i attends to keys 0..i."""
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
    ### END SOLUTION


# %% tags=["check"]
attention = check("lab4.naive_attention", naive_attention)

# %% [markdown]
# Your naive attention (labkit's until yours passes) against `F.scaled_dot_product_attention` on this run's
# device, float32, batch 1, 4 heads, seq 512, head dim 64, both timed with your timer.

# %%
q, k, v = sdpa.random_qkv(1, 4, 512, 64, torch.float32, HERE, seed=0)
rows = []
for causal in (False, True):
    row = {"is_causal": causal}
    for name, impl in (("naive (yours)", attention.fn), ("fused", F.scaled_dot_product_attention)):
        t = timer.fn(lambda: impl(q, k, v, is_causal=causal), repeats=10, warmup=2, clock=time.perf_counter,
                     sync=lambda: synchronize(HERE))
        row[f"{name} first (ms)"], row[f"{name} median (ms)"] = 1e3 * t["first"], 1e3 * t["median"]
    diff = attention.fn(q, k, v, is_causal=causal) - F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    row["max |naive - fused|"] = diff.abs().max().item()
    rows.append(row)
say(table(rows, floatfmt=".3g"))
del q, k, v

# %%
ATTN = measure("sdpa", sdpa, S, DEVICES, draw=plots.plot_sdpa)

# %%
for dev in DEVICES:  # measured in this run
    st = ATTN[dev]["numbers"]
    say(f"### {dev.upper()}: measured in this run on {ATTN[dev]['provenance']['device']}\n\n{st['dtype']}, batch "
        f"{st['batch']}, {st['heads']} heads, head dim {st['head_dim']}, causal={st['is_causal']}. Memory: "
        f"{st['memory_method']}.\n\nAgreement with a float64 evaluation (batch 0, first heads):\n\n"
        + table(st["checks"], ["is_causal", "mask", "dtype", "naive_vs_float64", "fused_vs_float64",
                               "naive_vs_fused", "reference_max_abs", "tolerance", "ok"], floatfmt=".2e")
        + f"\n\nEach fused backend forced alone at seq {st['profile_seq']}:\n\n"
        + table(sdpa.backend_rows(st), floatfmt=".3f")
        + "\n\nSequence sweep (steady median):\n\n" + table(sdpa.sweep_rows(st), floatfmt=".3f"))
    prof = st["profiles"]  # the profiler's own tables, as torch prints them
    print(f"--- {dev}: naive ---\n{prof['naive']['table']}\n--- {dev}: fused ---\n{prof['fused']['table']}")

# %% tags=["answer-key"]
ATTN = with_stored(ATTN, "sdpa")  # the other device: its stored full-profile results
for dev in ("cpu", "cuda"):
    if dev not in DEVICES:
        say(answers.attention_section(ATTN[dev], dev))

# %% [markdown] tags=["answer-key"]
# ### Answers 2a (profile both) and 2b (CUDA)

# %% tags=["answer-key"]
say("**2a. Profile naive and fused attention (CPU).**\n\n" + answers.attention_answer(ATTN["cpu"], "cpu"))

# %% tags=["answer-key"]
say("**2b. And on CUDA?**\n\n" + answers.attention_answer(ATTN["cuda"], "cuda"))

# %% [markdown] tags=["answer-key"]
# The answers file beside the results comes from the same stored JSON (`python -m labkit.redraw lab4_perf
# --answers` writes it again without measuring).

# %% tags=["answer-key"]
from labkit import redraw
from labkit.results import save_answers

redraw.store_readings("lab4_perf", S["profile"])  # the verdicts, computed from this profile's JSON, stored beside it
payloads = {f"{study}_{dev}": got[dev] for study, got in (("compile", COMPILE), ("sdpa", ATTN)) for dev in got}
print("wrote", save_answers("lab4", "perf", answers.render(payloads), S["profile"]))
