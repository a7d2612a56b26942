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
# **Your tasks:** an honest timer (`time_calls`, Part 1) and naive attention (Part 2), each checked on the spot
# against labkit's own; the notebook then uses them to time a function and to compare with PyTorch's fused
# attention. Question 1a asks why the sheet's measurement shows no speedup.

# %% [markdown] tags=["solution-only"]
# The notebook measures the devices it has (setting `devices="auto"`: the GPU when there is one, else the
# CPU) and shows the other device's **stored** full-profile figures beside them. Every heading names the
# device its numbers come from (their JSON's provenance).

# %% [markdown] tags=["student-only"]
# The notebook measures the devices it has (setting `devices="auto"`: the GPU when there is one, else the
# CPU); every number it shows comes from this run, and every heading names the device it ran on.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"compile_batch": 32, "devices": ["cpu", "cuda"]}

# %%
import math

import torch

from labkit.exercises import check
from labkit.exercises import lab4_yours as yours
from labkit.labs import lab4_perf as perf
from labkit.narrate import lab4_perf as words
from labkit.run.profiles import lab_settings
from labkit.report import say, table

S = lab_settings("lab4_perf", PROFILE, **OVERRIDES)
DEVICES = perf.devices(S)  # after setting the CPU threads the settings ask for
print(S)
print(words.measuring_on(perf.measuring(DEVICES)))
if not torch.cuda.is_available():
    say(words.NO_GPU)

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
say(yours.timer_text(timer.fn, HERE))

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
COMPILE = perf.measure("compile", S, DEVICES)  # each device's figure shows when the cell ends

# %%
for dev in DEVICES:  # measured in this run
    say(words.compile_tables(COMPILE[dev], dev))

# %% tags=["answer-key"]
from labkit.answers import lab4_perf as answers

COMPILE = perf.with_stored(COMPILE, "compile")  # the other device: its stored full-profile results
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
# the steady calls) of either side, between runs whose steady calls overlap, is reported as within noise, with no
# mechanism read from it.

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
say(table(yours.attention_rows(attention.fn, timer.fn, HERE), floatfmt=".3g"))

# %%
ATTN = perf.measure("sdpa", S, DEVICES)

# %%
for dev in DEVICES:  # measured in this run
    say(words.sdpa_tables(ATTN[dev], dev))
    print(words.profile_tables(ATTN[dev], dev))  # the profiler's own tables, as torch prints them

# %% tags=["answer-key"]
ATTN = perf.with_stored(ATTN, "sdpa")  # the other device: its stored full-profile results
for dev in ("cpu", "cuda"):
    if dev not in DEVICES:
        say(answers.attention_section(ATTN[dev], dev))

# %% [markdown] tags=["answer-key"]
# ### Answers 2a (profile both) and 2b (CUDA)

# %% [markdown] tags=["answer-key"]
# The answers file beside the results comes from the same stored JSON (`python -m labkit.redraw lab4_perf
# --answers` writes it again without measuring).

# %% tags=["answer-key"]
from labkit import redraw
redraw.close("lab4_perf", S)
