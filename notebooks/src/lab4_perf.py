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
# CPU) and shows the other device's **stored** full-profile results beside them, labelled as stored.
# Every number in the prose is printed from this run's variables or from those stored results.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"compile_batch": 32, "devices": ["cpu", "cuda"]}

# %%
import math

import matplotlib.pyplot as plt
import torch
from IPython.display import Image, display

from labkit.perf import compile_study, fmt_seconds, resolve_devices, sdpa
from labkit.profiles import lab_settings
from labkit.report import clip, say, table
from labkit.results import load_results, result_dir, save_figure

S = lab_settings("lab4_perf", PROFILE, **OVERRIDES)
if S["threads"]:
    torch.set_num_threads(S["threads"])
DEVICES = resolve_devices(S["devices"])
print(S)
print("measuring on:", DEVICES, "| torch", torch.__version__, "| CPU threads", torch.get_num_threads())
if not torch.cuda.is_available():
    say("**No CUDA GPU in this run.** It measures the CPU only; the GPU numbers below are the stored results "
        "of a full-profile run on a GPU, labelled with their device (or a note that none is stored yet).")


def stored(name):
    """A stored full-profile result as (numbers, label), or (None, why not)."""
    payload = load_results("lab4", name, "full")
    if payload is None:
        return None, f"no stored full-profile result `{name}` yet"
    p = payload["provenance"]
    return payload["numbers"], (f"stored full-profile result, {p['device']}, torch {p['versions'].get('torch')}, "
                                f"{p['created']}")


def show_stored_figure(name):
    png = result_dir("lab4", "full") / f"{name}.png"
    if png.is_file():
        display(Image(filename=str(png)))


def measure_or_load(name, study_module):
    """Run ``study_module`` on each device measured here (saving its figure and JSON); for the other device
    take the stored full-profile result. Returns ({device: numbers or None}, {device: where they come from})."""
    results, sources = {}, {}
    for dev in DEVICES:
        study = study_module.run_study(S, dev)
        fig = study_module.plot(study)
        save_figure(fig, "lab4", f"{name}_{dev}", study, S)
        plt.show()
        plt.close(fig)
        results[dev] = study
        sources[dev] = f"measured in this run on {study['device_name']} (profile `{S['profile']}`)"
    for dev in ("cpu", "cuda"):
        if dev not in results:
            results[dev], sources[dev] = stored(f"{name}_{dev}")
            show_stored_figure(f"{name}_{dev}")
    return results, sources


def loads(study):
    return ", ".join(f"{load[0]:.1f}" for load in study.get("loadavg_1_5_15", []))


pct = lambda x: "n/a" if x is None else f"{100 * x:.0f}%"  # noqa: E731
fmt = fmt_seconds
for dev in DEVICES:
    g = lambda key: compile_study.per_device(S[key], dev)  # noqa: E731
    note = "."
    gpu_seq = max(compile_study.per_device(S["sdpa_seqs"], "cuda"))
    if dev == "cpu" and gpu_seq > max(g("sdpa_seqs")):
        matrix_gib = g("sdpa_batch") * g("sdpa_heads") * gpu_seq**2 * 4 / 2**30
        note = (f" (on a CPU this profile stops at seq {max(g('sdpa_seqs'))}: at the GPU's seq {gpu_seq} one float32 "
                f"attention matrix alone would be {matrix_gib:.0f} GiB).")
    say(f"**Sizes on {dev.upper()}** (profile `{S['profile']}`): ResNet-18 on a batch of {g('compile_batch')} random "
        f"{g('compile_image')}x{g('compile_image')} images, {g('compile_warmup')} warm-up and {g('compile_repeats')} "
        f"steady calls per run, {g('compile_timeout_s')} s budget per worker; `{g('small_variant')}` at batch "
        f"{g('small_batch')} with a {g('small_timeout_s')} s budget. Attention: {g('sdpa_dtype')}, batch "
        f"{g('sdpa_batch')}, {g('sdpa_heads')} heads, head dim {g('sdpa_head_dim')}, seq {g('sdpa_seqs')}{note}")

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
COMPILE, COMPILE_SRC = measure_or_load("compile", compile_study)

# %%
for dev in ("cpu", "cuda"):
    st = COMPILE[dev]
    if st is None:
        say(f"### {dev.upper()}\n{COMPILE_SRC[dev]}.")
        continue
    say(f"### {dev.upper()}: {COMPILE_SRC[dev]}\n\nModel: {st['model_source']}; weights {st['weights']}. "
        f"{st['threads']} CPU threads; cold compiler cache: {st['cold_cache']}; TF32: {st['tf32']}. "
        f"1-minute load average at each worker boundary: {loads(st)} on {st.get('cpu_count')} cores (this run "
        "adds about its thread count; more means other work competed).\n\n"
        "Every run (times in seconds and milliseconds):\n\n" + table(compile_study.summary_rows(st), floatfmt=".3f")
        + "\n\nCompiled vs eager in the same state and batch (overhead: extra start-up time over eager's; "
        "break-even: overhead / steady saving per call):\n\n"
        + table(compile_study.comparison_rows(st), floatfmt=".3f")
        + "\n\nWhere one steady call spends its time (profiler; `compiled region`: the compiled graph's own "
        "time, i.e. Inductor's generated kernels):\n\n" + table(compile_study.share_rows(st), floatfmt=".3f"))


# %% [markdown]
# ### Answers 1a (CPU) and 1b (CUDA)

# %%
def noise_note(runs, study):
    """A warning when the steady calls spread widely (other processes sharing the cores)."""
    spread = [(t["steady_q75_s"] - t["steady_q25_s"]) / t["steady_median_s"] for t in runs]
    if not spread or max(spread) <= 0.1:
        return ""
    loads_seen = [load[0] for load in study.get("loadavg_1_5_15", [])]
    busy = (f"; the 1-minute load average reached {max(loads_seen):.1f} on {study.get('cpu_count')} cores, so other "
            "processes shared them" if study["device"] == "cpu" and loads_seen else "")
    return (f"\n\n*Noise:* the steady calls spread by up to {pct(max(spread))} of their median (IQR){busy}. "
            "Differences smaller than that spread are not meaningful here.")


def speed_word(x):
    return "faster" if x > 1.02 else "slower" if x < 0.98 else "about as fast"


def break_even_text(c):
    b = c["break_even_calls"]
    if b is None or math.isinf(b):
        return "never pays off (the compiled call is not faster)"
    return f"pays off after about {b:,.0f} calls ({fmt(b * c['eager_steady_s'])} of eager running)"


def compile_answer(st, src, dev):
    if st is None:
        return f"No {dev.upper()} numbers: {src}."
    main = next((v for v in ("inductor", "aot_eager") if compile_study.get_comparison(st, v, "eval+no_grad")
                 or compile_study.get_comparison(st, v, compile_study.SHEET_STATE)), None)
    out = [f"*({dev.upper()}: {src}.)*"]
    c = compile_study.get_comparison(st, main, compile_study.SHEET_STATE)
    if c:
        out.append(
            f"- **The sheet's measurement.** Averaging the first {c['sheet_calls']} calls in `train+grad` (batch "
            f"{c['batch']}), as the sheet does: eager {fmt(c['eager_sheet_mean_s'])} per call, `{main}` "
            f"{fmt(c['compiled_sheet_mean_s'])}: a 'speedup' of {c['sheet_speedup']:.2f}x. The first compiled "
            f"call alone took {fmt(c['compiled_first_s'])} (Dynamo graph capture, AOTAutograd, code generation "
            f"and compilation, from a cold cache) against {fmt(c['compiled_steady_s'])} for a steady call, so "
            "the average mostly measures the compiler.")
        out.append(
            f"- **Steady state, same state.** Median after warm-up: eager {fmt(c['eager_steady_s'])}, compiled "
            f"{fmt(c['compiled_steady_s'])}: {c['steady_speedup']:.2f}x ({speed_word(c['steady_speedup'])}). "
            f"Compiling costs {fmt(c['compile_overhead_s'])} more start-up than eager, so it "
            f"{break_even_text(c)}.")
    c = compile_study.get_comparison(st, main, "eval+no_grad")
    if c:
        out.append(
            f"- **Inference (`model.eval()` + `torch.no_grad()`).** Eager {fmt(c['eager_steady_s'])}, compiled "
            f"{fmt(c['compiled_steady_s'])}: {c['steady_speedup']:.2f}x; first compiled call "
            f"{fmt(c['compiled_first_s'])}; compiling {break_even_text(c)}.")
    ct, ce = (compile_study.get_comparison(st, main, s) for s in (compile_study.SHEET_STATE, "eval+no_grad"))
    bn = compile_study.share(compile_study.get_run(st, "eager", compile_study.SHEET_STATE), "batch norm")
    if main == "inductor" and ct and ce and bn is not None:
        more = ct["steady_speedup"] > ce["steady_speedup"]
        out.append(
            f"- **Train vs inference.** The compiled speedup is {ct['steady_speedup']:.2f}x in train+grad and "
            f"{ce['steady_speedup']:.2f}x in eval+no_grad. In train mode batch norm computes each batch's mean "
            f"and variance ({pct(bn)} of an eager train+grad call); "
            + ("Inductor fuses those reductions with the normalisation and ReLU, which is where the extra "
               "train-mode gain comes from." if more else
               "here that did not make the train-mode gain larger."))
    e, k = compile_study.get_run(st, "eager", "eval+no_grad"), compile_study.get_run(st, main, "eval+no_grad")
    conv_known = None not in (compile_study.share(e, "convolution"), compile_study.share(k, "convolution"))
    if main == "inductor" and conv_known:
        es, ks = e["op_shares"]["seconds"], k["op_shares"]["seconds"]
        rest = ("batch norm", "ReLU / add", "pooling")
        rest_e, rest_k = sum(es.get(r, 0) for r in rest), ks.get("compiled region", 0) + sum(ks.get(r, 0) for r in rest)
        conv_e, conv_k = es.get("convolution", 0.0), ks.get("convolution", 0.0)
        # a call could not be faster than its convolutions alone, if they kept their eager time
        bound = e["timing"]["steady_median_s"] / conv_e if conv_e else float("inf")
        speedup = e["timing"]["steady_median_s"] / k["timing"]["steady_median_s"]
        text = (f"- **Where the time goes.** In a profiled eager inference call "
                f"{pct(compile_study.share(e, 'convolution'))} is convolution and {pct(compile_study.share(e, *rest))} "
                f"batch norm, ReLU/add and pooling. Inductor fuses the latter into generated kernels ({fmt(rest_e)} "
                f"eager vs {fmt(rest_k)} compiled, generated code included) and calls library kernels for the "
                f"convolutions (oneDNN on CPU, cuDNN on GPU): {fmt(conv_e)} of convolution eager vs {fmt(conv_k)} "
                "compiled. ")
        if conv_k < 0.9 * conv_e:
            text += (f"The convolutions themselves got faster (the compiled graph chooses their memory layout and "
                     "the library picks algorithms for it), so the gain is not bounded by the non-convolution "
                     f"share: that bound would be {bound:.2f}x, and the steady calls ran {speedup:.2f}x faster.")
        else:
            text += (f"Convolution time barely changed, so the gain comes from the rest and is bounded by its share: "
                     f"at most {bound:.2f}x if it took no time at all; the steady calls ran {speedup:.2f}x faster.")
        out.append(text)
    if dev == "cuda" and e and e["status"] == "ok" and (e.get("op_shares") or {}).get("total_s"):
        busy = e["op_shares"]["total_s"] / e["timing"]["steady_median_s"]
        out.append(
            f"- **Launch overhead.** In an eager inference call the GPU kernels add up to "
            f"{fmt(e['op_shares']['total_s'])} of a {fmt(e['timing']['steady_median_s'])} call (busy {pct(busy)}): "
            + ("more than the call itself, so this stored profile counted something that is not the call's work "
               "(results stored before labkit left the profiler's own 'Activity Buffer Request' row out); it "
               "cannot tell how much launch time CUDA graphs would remove." if busy > 1 else
               "little idle time between launches is left for CUDA graphs (`reduce-overhead`, `cudagraphs`) to "
               "remove at this batch size; they matter when many small kernels leave the GPU waiting on Python."
               if busy > 0.8 else "for the rest the GPU waits on Python and kernel launches, which is what CUDA "
               "graphs (`reduce-overhead`, `cudagraphs`) remove."))
    t = {s: compile_study.get_run(st, "eager", s) for s in compile_study.STATES}
    if all(r and r["status"] == "ok" for r in t.values()):
        m = {s: r["timing"]["steady_median_s"] for s, r in t.items()}
        bn = {s: compile_study.share(t[s], "batch norm") for s in ("train+no_grad", "eval+no_grad")}
        line = (f"- **`model.eval()` and `torch.no_grad()`** (eager, steady median): train+grad "
                f"{fmt(m['train+grad'])}, train+no_grad {fmt(m['train+no_grad'])}, eval+grad "
                f"{fmt(m['eval+grad'])}, eval+no_grad {fmt(m['eval+no_grad'])}. `no_grad` alone takes "
                f"{m['train+no_grad'] / m['train+grad']:.2f}x the train+grad time (autograd stops recording the "
                "graph and keeping activations); `eval()` on top takes "
                f"{m['eval+no_grad'] / m['train+no_grad']:.2f}x the train+no_grad time (batch norm uses its "
                "running statistics instead of computing the batch's, so its share of the call goes from "
                f"{pct(bn['train+no_grad'])} to {pct(bn['eval+no_grad'])}).")
        peaks = {s: r.get("peak_memory_bytes") for s, r in t.items()}
        if all(peaks.values()):
            line += (f" Peak GPU memory: {peaks['train+grad'] / 2**30:.2f} GiB with grad vs "
                     f"{peaks['eval+no_grad'] / 2**30:.2f} GiB in eval+no_grad.")
        out.append(line)
    for variant in ("reduce-overhead", "cudagraphs"):
        c = compile_study.get_comparison(st, variant, "eval+no_grad")
        r = compile_study.get_run(st, variant, "eval+no_grad")
        if c:
            out.append(f"- **`{variant}`** (inference): steady {fmt(c['compiled_steady_s'])} vs eager "
                       f"{fmt(c['eager_steady_s'])}: {c['steady_speedup']:.2f}x; first call "
                       f"{fmt(c['compiled_first_s'])}; it {break_even_text(c)}.")
        elif r:
            out.append(f"- **`{variant}`**: {r['status']} ({clip(r['reason'], 200)}).")
    r = next((r for r in st["runs"] if r["variant"] == "max-autotune"), None)
    if r:
        c = compile_study.get_comparison(st, "max-autotune", r["state"])
        if c:
            out.append(f"- **`max-autotune`** ({r['state']}, batch {c['batch']}, budget {r['budget_s']:.0f} s): "
                       f"first call {fmt(c['compiled_first_s'])}, steady {fmt(c['compiled_steady_s'])} vs eager "
                       f"{fmt(c['eager_steady_s'])} at that batch: {c['steady_speedup']:.2f}x; it "
                       f"{break_even_text(c)}.")
        else:
            out.append(f"- **`max-autotune`** (batch {r['batch']}): {r['status']}: {clip(r['reason'], 300)}")
    return "\n".join(out) + noise_note([r["timing"] for r in st["runs"] if r["status"] == "ok"], st)


say("**1a. Why did torch.compile give no speedup on the CPU?**\n\n"
    + compile_answer(COMPILE["cpu"], COMPILE_SRC["cpu"], "cpu"))

# %%
say("**1b. And on CUDA?**\n\n" + compile_answer(COMPILE["cuda"], COMPILE_SRC["cuda"], "cuda"))
if COMPILE["cuda"] is not None and COMPILE["cuda"].get("tf32"):
    say(f"On CUDA the fp32 convolutions may use TF32 tensor cores (cuDNN TF32: {COMPILE['cuda']['tf32']['cudnn']}; "
        f"float32 matmul precision `{COMPILE['cuda']['tf32']['matmul_precision']}`), in eager and compiled alike.")

# %% [markdown]
# ## Part 2: naive vs fused attention
#
# Naive: `softmax(Q @ K^T * scale) @ V`, four ATen ops, each (seq x seq) intermediate written to memory.
# Fused: `F.scaled_dot_product_attention`, which dispatches to one kernel (flash, memory-efficient, cuDNN)
# that never materialises the attention matrix, or to the math fallback. Both are first checked against a
# float64 evaluation (tolerance by dtype), then profiled with `torch.profiler`, each fused backend is forced
# with `torch.nn.attention.sdpa_kernel`, and the sequence length is swept.

# %%
ATTN, ATTN_SRC = measure_or_load("sdpa", sdpa)

# %%
for dev in ("cpu", "cuda"):
    st = ATTN[dev]
    if st is None:
        say(f"### {dev.upper()}\n{ATTN_SRC[dev]}.")
        continue
    say(f"### {dev.upper()}: {ATTN_SRC[dev]}\n\nbatch {st['batch']}, {st['heads']} heads, head dim "
        f"{st['head_dim']}, {st['dtype']}, causal={st['is_causal']}. Memory: {st['memory_method']}. "
        f"{st.get('threads')} CPU threads; 1-minute load average before and after: {loads(st)} on "
        f"{st.get('cpu_count')} cores.\n\n"
        "Agreement with a float64 evaluation (batch 0, first heads):\n\n"
        + table(st["checks"], ["is_causal", "mask", "dtype", "naive_vs_float64", "fused_vs_float64",
                                "naive_vs_fused", "reference_max_abs", "tolerance", "ok"], floatfmt=".2e")
        + "".join(f"\n\nProfile of one {w} call at seq {st['profile_seq']}, top ops:\n\n"
                  + table(sdpa.profile_rows(st, w), floatfmt=".3f")
                  + ("\n\nand its top GPU kernels:\n\n" + table(sdpa.profile_rows(st, w, "kernels"), floatfmt=".3f")
                     if st["profiles"][w].get("kernels") else "") for w in ("naive", "fused"))
        + f"\n\nEach fused backend forced alone at seq {st['profile_seq']}:\n\n"
        + table(sdpa.backend_rows(st), floatfmt=".3f")
        + "\n\nSequence sweep (steady median):\n\n" + table(sdpa.sweep_rows(st), floatfmt=".3f"))
    if dev in DEVICES:  # the profiler's own tables, as torch prints them
        print(f"--- {dev}: naive ---\n{st['profiles']['naive']['table']}\n--- {dev}: fused ---\n"
              f"{st['profiles']['fused']['table']}")


# %% [markdown]
# ### Answers 2a (profile both) and 2b (CUDA)

# %%
def attention_answer(st, src, dev):
    if st is None:
        return f"No {dev.upper()} numbers: {src}."
    out = [f"*({dev.upper()}: {src}.)*"]
    worst = max(max(c["naive_vs_float64"], c["fused_vs_float64"]) for c in st["checks"])
    out.append(f"- **Same result.** Against float64, the largest error of either implementation over plain, "
               f"causal and masked attention is {worst:.1e}; the tolerance for {st['dtype']} is "
               f"{st['checks'][0]['relative_tolerance']:.0e} of the output's largest value "
               f"({min(c['tolerance'] for c in st['checks']):.1e} here); all within: "
               f"{all(c['ok'] for c in st['checks'])}.")
    key = "self_device_us" if dev == "cuda" else "self_cpu_us"
    clock = "GPU kernel" if dev == "cuda" else "CPU"

    def top(which, n):
        prof = st["profiles"][which]
        ops = ", ".join(f"`{r['name'][:60]}` {r[key] / 1e3:.2f} ms" for r in prof["top"][:n])
        if prof.get("kernels"):
            ops += "; kernels: " + ", ".join(f"`{r['name'][:70]}` {r[key] / 1e3:.2f} ms" for r in prof["kernels"][:n])
        return ops

    naive_top, fused_top = top("naive", 4), top("fused", 2)
    tot = {w: st["profiles"][w]["total_self_device_us" if dev == "cuda" else "total_self_cpu_us"] / 1e3
           for w in ("naive", "fused")}
    out.append(f"- **Profiles at seq {st['profile_seq']}** ({clock} self time). Naive, {tot['naive']:.2f} ms in "
               f"all: {naive_top}: two batched matmuls, the scaling and the softmax, each reading and writing a "
               f"(seq x seq) tensor per head. Fused, {tot['fused']:.2f} ms in all: {fused_top}. SDPA ran the "
               f"**{st['default_backend']}** backend.")
    mib = lambda b: b / 2**20  # noqa: E731
    p = sdpa.sweep_point(st, st["profile_seq"])
    if p and p["naive"]["status"] == p["fused"]["status"] == "ok" and p["naive"]["peak_bytes"] is not None:
        naive_b, fused_b, matrix_b = p["naive"]["peak_bytes"], p["fused"]["peak_bytes"], p["attention_matrix_bytes"]
        out.append(f"- **Memory at seq {p['seq']}.** Peak above the inputs: naive {mib(naive_b):.1f} MiB vs fused "
                   f"{mib(fused_b):.2f} MiB; one attention matrix is {mib(matrix_b):.1f} MiB, so naive holds about "
                   f"{naive_b / matrix_b:.1f} of them at once (scores and their scaled copy, then the softmax), "
                   "fused only its output and small tiles.")
    ok = [r for r in st["sweep"] if r["naive"]["status"] == r["fused"]["status"] == "ok"]
    if ok:
        med = lambda r, w: r[w]["timing"]["steady_median_s"]  # noqa: E731
        ratio = [med(r, "naive") / med(r, "fused") for r in ok]
        first, last = ok[0], ok[-1]
        peaks = (last["naive"]["peak_bytes"], last["fused"]["peak_bytes"])
        out.append(f"- **Sweep** (seq {first['seq']} to {last['seq']}): naive takes {min(ratio):.1f}x to "
                   f"{max(ratio):.1f}x the fused time (at seq {last['seq']}: {fmt(med(last, 'naive'))} vs "
                   f"{fmt(med(last, 'fused'))}). Naive memory grows with seq^2, fused with seq"
                   + (f": {mib(peaks[0]):.0f} MiB vs {mib(peaks[1]):.1f} MiB at seq {last['seq']}."
                      if None not in peaks else "."))
    missing = [r for r in st["sweep"] if r["naive"]["status"] != "ok"]
    if missing:
        out.append("- Naive could not run at seq " + ", ".join(f"{r['seq']} ({r['naive']['status']}: "
                                                              f"{clip(r['naive']['reason'], 80)})" for r in missing) + ".")
    ran = [b for b in st["backends"] if b["status"] == "ok"]
    if ran:
        out.append("- **Backends forced one at a time** (seq " + str(st["profile_seq"]) + "): "
                   + ", ".join(f"{b['backend']} {fmt(b['timing']['steady_median_s'])}" for b in ran)
                   + "; unavailable: " + (", ".join(f"{b['backend']} (*{clip(b['reason'], 140)}*)"
                                                    for b in st["backends"] if b["status"] != "ok") or "none") + ".")
    timings = [r[w]["timing"] for r in st["sweep"] for w in ("naive", "fused") if r[w]["status"] == "ok"]
    return "\n".join(out) + noise_note(timings, st)


say("**2a. Profile naive and fused attention (CPU).**\n\n" + attention_answer(ATTN["cpu"], ATTN_SRC["cpu"], "cpu")
    + "\n\nOn a CPU the fused op is one multi-threaded kernel that walks the keys in blocks with an online "
    "softmax, so the (seq x seq) matrix never exists; the naive version is four separate passes over it.")

# %%
say("**2b. And on CUDA?**\n\n" + attention_answer(ATTN["cuda"], ATTN_SRC["cuda"], "cuda")
    + ("\n\nThe fused kernels tile Q, K and V through shared memory and keep the running softmax in registers, "
       "so they read the inputs about once instead of streaming a (seq x seq) matrix through HBM several times; "
       "naive attention is bound by that traffic." if ATTN["cuda"] is not None else ""))
