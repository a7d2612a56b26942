"""Lab 4 parts 1-2 (torch.compile, fused attention): the answers as Markdown from the stored studies.

Every input is a ``save_results`` payload (``numbers``, ``settings``, ``provenance``) as the notebook
writes it to figures/lab4/, so the answers re-render from committed JSON. Two timings whose medians differ
by no more than the spread (max - min of the steady calls) of either side, and whose steady calls overlap, are
*within noise*: the prose says so and reads no mechanism from them.
"""
from __future__ import annotations

import math

from ..perf import compile_study, sdpa
from ..perf.compile_study import SHEET_STATE, get_comparison, get_run, per_device, share, timings
from ..readings import by_key
from ..readings import lab4_perf as _readings
from ..perf.timing import PROFILER_BOOKKEEPING, spread
from ..perf.timing import fmt_seconds as fmt
from ..report import clip, table
from . import sources

TITLE = "Lab 4, parts 1-2: torch.compile and fused attention, measured properly"
DEVICES = ("cpu", "cuda")
NAMES = tuple(f"{study}_{dev}" for study in ("compile", "sdpa") for dev in DEVICES)


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def ratio_range(num: dict, den: dict) -> tuple[float, float]:
    """Smallest and largest ``num / den`` the steady calls allow (extreme against extreme)."""
    return num["steady_min_s"] / den["steady_max_s"], num["steady_max_s"] / den["steady_min_s"]


def said(st: dict, c: dict):
    """The reading of comparison ``c`` (compiled against eager in one state and batch): faster, slower or within
    noise (``labkit.readings.lab4_perf.timing``)."""
    return _readings.timing(_readings.compile_key(c), *timings(st, c)[::-1], "")


WORDS = {"lower": "faster", "higher": "slower", "level": "within noise"}


def first_call_share(c: dict) -> float:
    """The first compiled call's excess over a steady call, as a share of the sheet's averaged calls."""
    return _readings.compiler_share(c).quantities["share"]


def break_even_text(c: dict, noise: bool) -> str:
    if noise:
        return "has no break-even point these numbers can show (the per-call saving is within noise)"
    b = c["break_even_calls"]
    if b is None or math.isinf(b):  # stored JSON writes inf as null
        return "never pays off (the compiled call is slower)"
    return f"pays off after about {b:,.0f} calls ({fmt(b * c['eager_steady_s'])} of eager running)"


def measured_note(st: dict, runs: list[dict]) -> str:
    """Which machine and threads measured ``runs`` (timings), how much they spread, and how busy it was."""
    rel = [spread(t) / t["steady_median_s"] for t in runs]
    loads = [load[0] for load in st.get("loadavg_1_5_15", [])]
    text = (f"\n\n*Measured on* {st.get('device_name')} with {st.get('threads')} CPU threads on "
            f"{st.get('cpu_count')} cores")
    if rel:
        text += f"; the steady calls of a run spread (max-min) by up to {pct(max(rel))} of their median"
    if loads:
        text += f"; the 1-minute load average reached {max(loads):.1f}"
        if st.get("threads") and max(loads) > st["threads"]:
            text += " (more than this run's threads: other work shared the cores)"
    return text + (". A difference no larger than either side's spread, between runs whose steady calls overlap, is "
                   "reported as within noise.")


def sizes_text(settings: dict, dev: str) -> str:
    def g(key):
        return per_device(settings[key], dev)

    note = "."
    gpu_seq = max(per_device(settings["sdpa_seqs"], "cuda"))
    if dev == "cpu" and gpu_seq > max(g("sdpa_seqs")):
        matrix_gib = g("sdpa_batch") * g("sdpa_heads") * gpu_seq**2 * 4 / 2**30
        note = (f" (on a CPU this profile stops at seq {max(g('sdpa_seqs'))}: at the GPU's seq {gpu_seq} one float32 "
                f"attention matrix alone would be {matrix_gib:.0f} GiB).")
    return (f"**Sizes on {dev.upper()}** (profile `{settings['profile']}`): ResNet-18 on a batch of "
            f"{g('compile_batch')} random {g('compile_image')}x{g('compile_image')} images, {g('compile_warmup')} "
            f"warm-up and {g('compile_repeats')} steady calls per run, {g('compile_timeout_s')} s budget per worker; "
            f"`{g('small_variant')}` at batch {g('small_batch')} with a {g('small_timeout_s')} s budget. Attention: "
            f"{g('sdpa_dtype')}, batch {g('sdpa_batch')}, {g('sdpa_heads')} heads, head dim {g('sdpa_head_dim')}, "
            f"seq {g('sdpa_seqs')}{note}")


def _not_stored(study: str, dev: str) -> str:
    return f"### {dev.upper()}\n\nNo stored result `{study}_{dev}` yet."


def _loads(payload: dict) -> str:
    """The 1-minute load averages a study recorded (how busy the machine was while it measured)."""
    return ", ".join(f"{load[0]:.1f}" for load in payload["numbers"].get("loadavg_1_5_15", []))


def compile_section(payload: dict | None, dev: str) -> str:
    """The tables of one device's compile study."""
    if payload is None:
        return _not_stored("compile", dev)
    st, loads = payload["numbers"], _loads(payload)
    return (f"### {dev.upper()}: {sources.label(payload)}\n\nModel: {st['model_source']}; weights {st['weights']}. "
            f"{st['threads']} CPU threads; cold compiler cache: {st['cold_cache']}; TF32: {st['tf32']}. 1-minute "
            f"load average at each worker boundary: {loads} on {st.get('cpu_count')} cores (this run adds about its "
            "thread count; more means other work competed).\n\nEvery run (times in seconds and milliseconds):\n\n"
            + table(compile_study.summary_rows(st), floatfmt=".3f")
            + "\n\nCompiled vs eager in the same state and batch (overhead: extra start-up time over eager's; "
            "break-even: overhead / steady saving per call):\n\n" + table(compile_study.comparison_rows(st), floatfmt=".3f")
            + "\n\nWhere one steady call spends its time (profiler; `compiled region`: the compiled graph's own "
            "time, i.e. Inductor's generated kernels):\n\n" + table(compile_study.share_rows(st), floatfmt=".3f"))


def _sheet_bullets(st: dict, main: str) -> list[str]:
    out = []
    c = get_comparison(st, main, SHEET_STATE)
    if c:
        first_share = first_call_share(c)
        cold = ", from a cold cache" if st.get("cold_cache") else ""
        out.append(
            f"- **The sheet's measurement.** Averaging the first {c['sheet_calls']} calls in `{SHEET_STATE}` (batch "
            f"{c['batch']}), as the sheet does: eager {fmt(c['eager_sheet_mean_s'])} per call, `{main}` "
            f"{fmt(c['compiled_sheet_mean_s'])}: a 'speedup' of {c['sheet_speedup']:.2f}x. The first compiled call "
            f"alone took {fmt(c['compiled_first_s'])} (graph capture and compilation{cold}) against "
            f"{fmt(c['compiled_steady_s'])} for a steady call; that excess is {pct(first_share)} of the "
            f"{c['sheet_calls']} compiled calls' total, so the average "
            + ("mostly measures the compiler." if _readings.compiler_share(c).verdict == "holds" else
               "is not dominated by the compiler here."))
        noise = said(st, c).verdict == "level"
        out.append(
            f"- **Steady state, same state.** Median after warm-up: eager {fmt(c['eager_steady_s'])}, compiled "
            f"{fmt(c['compiled_steady_s'])}: {c['steady_speedup']:.2f}x, {said(st, c).says}. "
            f"Compiling costs {fmt(c['compile_overhead_s'])} more start-up than eager, so it "
            f"{break_even_text(c, noise)}.")
    c = get_comparison(st, main, "eval+no_grad")
    if c:
        out.append(
            f"- **Inference (`model.eval()` + `torch.no_grad()`).** Eager {fmt(c['eager_steady_s'])}, compiled "
            f"{fmt(c['compiled_steady_s'])}: {c['steady_speedup']:.2f}x, {said(st, c).says}; first "
            f"compiled call {fmt(c['compiled_first_s'])}; compiling {break_even_text(c, said(st, c).verdict == 'level')}.")
    return out


def _train_vs_inference(st: dict, main: str) -> str | None:
    ct, ce = (get_comparison(st, main, s) for s in (SHEET_STATE, "eval+no_grad"))
    bn = share(get_run(st, "eager", SHEET_STATE), "batch norm")
    if main != "inductor" or not (ct and ce) or bn is None:
        return None
    text = (f"- **Train vs inference.** The compiled speedup is {ct['steady_speedup']:.2f}x in train+grad and "
            f"{ce['steady_speedup']:.2f}x in eval+no_grad. ")
    noise = [s for s, c in ((SHEET_STATE, ct), ("eval+no_grad", ce)) if said(st, c).verdict == "level"]
    if noise:
        which = "Both comparisons are" if len(noise) == 2 else f"The {noise[0]} comparison is"
        return text + (f"{which} within noise, so the two speedups cannot be compared and nothing follows about "
                       "batch norm's part in them.")
    (lo_t, hi_t), (lo_e, hi_e) = (ratio_range(*timings(st, c)) for c in (ct, ce))
    if abs(ct["steady_speedup"] - ce["steady_speedup"]) <= max(hi_t - lo_t, hi_e - lo_e):
        return text + (f"They are within noise of each other (the steady calls allow {lo_t:.2f}-{hi_t:.2f}x and "
                       f"{lo_e:.2f}-{hi_e:.2f}x): train mode's batch statistics ({pct(bn)} of an eager train+grad "
                       "call) made no measurable difference to what compiling gains.")
    if ct["steady_speedup"] > ce["steady_speedup"]:
        return text + (f"In train mode batch norm computes each batch's mean and variance ({pct(bn)} of an eager "
                       "train+grad call); Inductor fuses those reductions with the normalisation and ReLU, which is "
                       "where the extra train-mode gain can come from.")
    return text + (f"Compiling gains less in train mode, although batch norm's batch statistics ({pct(bn)} of an "
                   "eager train+grad call) are there to fuse.")


def _where_time_goes(st: dict, main: str) -> str | None:
    e, k = get_run(st, "eager", "eval+no_grad"), get_run(st, main, "eval+no_grad")
    if main != "inductor" or None in (share(e, "convolution"), share(k, "convolution")):
        return None
    es, ks = e["op_shares"]["seconds"], k["op_shares"]["seconds"]
    rest = ("batch norm", "ReLU / add", "pooling")
    rest_e, rest_k = sum(es.get(r, 0) for r in rest), ks.get("compiled region", 0) + sum(ks.get(r, 0) for r in rest)
    conv_e, conv_k = es.get("convolution", 0.0), ks.get("convolution", 0.0)
    text = (f"- **Where the time goes.** In a profiled eager inference call {pct(share(e, 'convolution'))} is "
            f"convolution and {pct(share(e, *rest))} batch norm, ReLU/add and pooling; profiled compiled: "
            f"{fmt(conv_e)} of convolution eager vs {fmt(conv_k)} compiled (library kernels: oneDNN on CPU, cuDNN on "
            f"GPU), and {fmt(rest_e)} vs {fmt(rest_k)} for the rest (Inductor's generated code included). ")
    if _readings.timing("steady", k["timing"], e["timing"], "").verdict == "level":
        return text + ("The steady calls are within noise of each other, so there is no gain to attribute to "
                       "either part.")
    conv = _readings.convolution_change(e, k, "")
    conv_noise, bound, speedup = conv.quantities["noise"], conv.quantities["bound"], conv.quantities["speedup"]
    if conv.verdict == "level":
        text += (f"The convolution times differ by no more than the runs' interquartile range would move one "
                 f"profiled call "
                 f"({fmt(conv_noise)}), so the gain comes from the rest and is bounded by its share: at most "
                 f"{bound:.2f}x if it took no time at all; the steady calls ran {speedup:.2f}x faster")
        return text + (", beyond that bound, so this profiled call does not represent the steady ones." if
                       _readings.within_bound(conv).verdict == "fails" else ".")
    if conv.verdict == "lower":
        return text + ("The convolutions themselves got faster (the compiled graph chooses their memory layout and "
                       "the library picks algorithms for it)" + (
                           f", so the gain is not bounded by the non-convolution share: that bound would be "
                           f"{bound:.2f}x, and the steady calls ran {speedup:.2f}x faster."
                           if _readings.within_bound(conv).verdict == "fails" else
                           f", and so did the rest: the steady calls ran {speedup:.2f}x faster, within the "
                           f"{bound:.2f}x that removing the rest alone could give."))
    return text + f"The convolutions got slower compiled; the steady calls ran {speedup:.2f}x faster from the rest."


def _launch_overhead(st: dict, dev: str) -> str | None:
    e = get_run(st, "eager", "eval+no_grad")
    if dev != "cuda" or not e or e["status"] != "ok" or not (e.get("op_shares") or {}).get("total_s"):
        return None
    reading = _readings.gpu_busy(e)
    busy = reading.quantities["busy"]
    return (f"- **Launch overhead.** In an eager inference call the GPU kernels add up to "
            f"{fmt(e['op_shares']['total_s'])} of a {fmt(e['timing']['steady_median_s'])} call (busy {pct(busy)}): "
            + ("more than the call itself, so this stored profile counted something that is not the call's work "
               "(results stored before labkit left the profiler's own 'Activity Buffer Request' row out); it "
               "cannot tell how much launch time CUDA graphs would remove." if reading.verdict == "not established" else
               "little idle time between launches is left for CUDA graphs (`reduce-overhead`, `cudagraphs`) to "
               "remove at this batch size; they matter when many small kernels leave the GPU waiting on Python."
               if reading.verdict == "holds" else "for the rest the GPU waits on Python and kernel launches, which is what CUDA "
               "graphs (`reduce-overhead`, `cudagraphs`) remove."))


def _modes(st: dict) -> str | None:
    t = {s: get_run(st, "eager", s) for s in compile_study.STATES}
    if not all(r and r["status"] == "ok" for r in t.values()):
        return None
    m = {s: r["timing"] for s, r in t.items()}
    bn = {s: share(t[s], "batch norm") for s in ("train+no_grad", "eval+no_grad")}

    def step(old, new, why):
        ratio = m[new]["steady_median_s"] / m[old]["steady_median_s"]
        if _readings.timing("step", m[new], m[old], "").verdict == "level":
            return (f"{ratio:.2f}x the {old} time, within noise (spreads {fmt(spread(m[old]))} and "
                    f"{fmt(spread(m[new]))})")
        return f"{ratio:.2f}x the {old} time" + (f" ({why})" if ratio < 1 else ", slower")

    line = ("- **`model.eval()` and `torch.no_grad()`** (eager, steady median): "
            + ", ".join(f"{s} {fmt(m[s]['steady_median_s'])}" for s in compile_study.STATES)
            + ". `no_grad` alone takes " + step("train+grad", "train+no_grad", "autograd stops recording the graph "
                                               "and keeping activations")
            + "; `eval()` on top takes " + step("train+no_grad", "eval+no_grad", "batch norm uses its running "
                                               f"statistics instead of computing the batch's; its share of the call "
                                               f"goes from {pct(bn['train+no_grad'])} to {pct(bn['eval+no_grad'])}")
            + ".")
    peaks = {s: r.get("peak_memory_bytes") for s, r in t.items()}
    if all(peaks.values()):
        line += (f" Peak GPU memory: {peaks['train+grad'] / 2**30:.2f} GiB with grad vs "
                 f"{peaks['eval+no_grad'] / 2**30:.2f} GiB in eval+no_grad.")
    return line


def _other_variants(st: dict) -> list[str]:
    out = []
    for variant in ("reduce-overhead", "cudagraphs"):
        c, r = get_comparison(st, variant, "eval+no_grad"), get_run(st, variant, "eval+no_grad")
        if c:
            out.append(f"- **`{variant}`** (inference): steady {fmt(c['compiled_steady_s'])} vs eager "
                       f"{fmt(c['eager_steady_s'])}: {c['steady_speedup']:.2f}x, {said(st, c).says}; "
                       f"first call {fmt(c['compiled_first_s'])}; it {break_even_text(c, said(st, c).verdict == 'level')}.")
        elif r:
            out.append(f"- **`{variant}`**: {r['status']} ({clip(r['reason'], 200)}).")
    r = next((r for r in st["runs"] if r["variant"] == "max-autotune"), None)
    if r:
        c = get_comparison(st, "max-autotune", r["state"])
        if c:
            out.append(f"- **`max-autotune`** ({r['state']}, batch {c['batch']}, budget {r['budget_s']:.0f} s): "
                       f"first call {fmt(c['compiled_first_s'])}, steady {fmt(c['compiled_steady_s'])} vs eager "
                       f"{fmt(c['eager_steady_s'])} at that batch: {c['steady_speedup']:.2f}x, "
                       f"{said(st, c).says}; it {break_even_text(c, said(st, c).verdict == 'level')}.")
        else:
            out.append(f"- **`max-autotune`** (batch {r['batch']}): {r['status']}: {clip(r['reason'], 300)}")
    return out


def compile_answer(payload: dict | None, dev: str) -> str:
    """Answer 1a (``dev="cpu"``) or 1b (``"cuda"``) from a stored compile study."""
    if payload is None:
        return f"No {dev.upper()} numbers: no stored result `compile_{dev}` yet."
    st = payload["numbers"]
    main = next((v for v in ("inductor", "aot_eager") if get_comparison(st, v, "eval+no_grad")
                 or get_comparison(st, v, SHEET_STATE)), None)
    out = [f"*({dev.upper()}: {sources.label(payload)}.)*"]
    c = get_comparison(st, main, SHEET_STATE) or get_comparison(st, main, "eval+no_grad")
    if c:
        steady = WORDS[said(st, c).verdict]
        out.append(f"- **In short.** The sheet's {c['sheet_calls']}-call average includes the first call, where "
                   f"`torch.compile` compiles ({fmt(c['compiled_first_s'])}, "
                   f"{'most' if _readings.compiler_share(c).verdict == 'holds' else 'a minority'} of the averaged time): it reports "
                   f"{c['sheet_speedup']:.2f}x. After warm-up, in {c['state']}, the compiled call is "
                   + {"faster": f"{c['steady_speedup']:.2f}x faster than eager.",
                      "slower": f"slower than eager ({c['steady_speedup']:.2f}x).",
                      "within noise": f"**within noise** of eager ({c['steady_speedup']:.2f}x)."}[steady])
    claim = by_key(_readings.compile_readings(payload, dev)).get(f"compile_{dev}.inductor_faster")
    if claim is not None:
        out.append(f"- **Inductor against eager, every comparison.** {claim.says}.")
    out += _sheet_bullets(st, main)
    out += [x for x in (_train_vs_inference(st, main), _where_time_goes(st, main), _launch_overhead(st, dev),
                        _modes(st)) if x]
    out += _other_variants(st)
    return "\n".join(out) + measured_note(st, [r["timing"] for r in st["runs"] if r["status"] == "ok"])


def tf32_note(payload: dict | None) -> str:
    tf32 = (payload or {}).get("numbers", {}).get("tf32")
    if not tf32:
        return ""
    return (f"On CUDA the fp32 convolutions may use TF32 tensor cores (cuDNN TF32: {tf32['cudnn']}; float32 "
            f"matmul precision `{tf32['matmul_precision']}`), in eager and compiled alike.")


def attention_section(payload: dict | None, dev: str) -> str:
    """The tables of one device's attention study."""
    if payload is None:
        return _not_stored("sdpa", dev)
    st, loads = payload["numbers"], _loads(payload)
    return (f"### {dev.upper()}: {sources.label(payload)}\n\nbatch {st['batch']}, {st['heads']} heads, head dim "
            f"{st['head_dim']}, {st['dtype']}, causal={st['is_causal']}. Memory: {st['memory_method']}. "
            f"{st.get('threads')} CPU threads; 1-minute load average before and after: {loads} on "
            f"{st.get('cpu_count')} cores.\n\nAgreement with a float64 evaluation (batch 0, first heads):\n\n"
            + table(st["checks"], ["is_causal", "mask", "dtype", "naive_vs_float64", "fused_vs_float64",
                                   "naive_vs_fused", "reference_max_abs", "tolerance", "ok"], floatfmt=".2e")
            + "".join(f"\n\nProfile of one {w} call at seq {st['profile_seq']}, top ops:\n\n"
                      + table(sdpa.profile_rows(st, w), floatfmt=".3f")
                      + ("\n\nand its top GPU kernels:\n\n" + table(sdpa.profile_rows(st, w, "kernels"), floatfmt=".3f")
                         if st["profiles"][w].get("kernels") else "") for w in ("naive", "fused"))
            + f"\n\nEach fused backend forced alone at seq {st['profile_seq']}:\n\n"
            + table(sdpa.backend_rows(st), floatfmt=".3f")
            + "\n\nSequence sweep (steady median):\n\n" + table(sdpa.sweep_rows(st), floatfmt=".3f"))


# Why the fused kernel wins, per device: said only when it measurably does.
FUSED_WHY = {
    "cpu": "On a CPU the fused op is one multi-threaded kernel that walks the keys in blocks with an online "
           "softmax, so the (seq x seq) matrix never exists; the naive version is four separate passes over it.",
    "cuda": "The fused kernels tile Q, K and V through shared memory and keep the running softmax in registers, so "
            "they read the inputs about once instead of streaming a (seq x seq) matrix through HBM several times; "
            "naive attention pays for that traffic.",
}


def _ok_sweep(st: dict) -> list[dict]:
    return [r for r in st["sweep"] if r["naive"]["status"] == r["fused"]["status"] == "ok"]


def attention_answer(payload: dict | None, dev: str) -> str:
    """Answer 2a (``dev="cpu"``) or 2b (``"cuda"``) from a stored attention study."""
    if payload is None:
        return f"No {dev.upper()} numbers: no stored result `sdpa_{dev}` yet."
    st = payload["numbers"]
    out = [f"*({dev.upper()}: {sources.label(payload)}.)*"]
    # the worst check, beside that same check's own tolerance (each check scales it by its output's size)
    w = max(st["checks"], key=lambda c: max(c["naive_vs_float64"], c["fused_vs_float64"]) / c["tolerance"])
    worst = max(w["naive_vs_float64"], w["fused_vs_float64"])
    which = "causal" if w.get("is_causal") else "masked" if w.get("mask") else "plain"
    out.append(f"- **Same result.** Against float64, the largest error of either implementation, relative to its "
               f"check's tolerance, is {worst:.1e} ({which} attention) against a tolerance of {w['tolerance']:.1e} "
               f"there ({w['relative_tolerance']:.0e} of that output's largest value, {st['dtype']}); every check "
               f"within: {all(c['ok'] for c in st['checks'])}.")
    key = "self_device_us" if dev == "cuda" else "self_cpu_us"

    def top(which, n):
        prof = st["profiles"][which]
        rows = [r for r in prof["top"] if r["name"] not in PROFILER_BOOKKEEPING  # stored before they were dropped
                and r[key] > 0]
        ops = ", ".join(f"`{r['name'][:60]}` {r[key] / 1e3:.2f} ms" for r in rows[:n])
        if prof.get("kernels"):
            ops += "; kernels: " + ", ".join(f"`{r['name'][:70]}` {r[key] / 1e3:.2f} ms" for r in prof["kernels"][:n])
        return ops

    tot = {w: st["profiles"][w]["total_self_device_us" if dev == "cuda" else "total_self_cpu_us"] / 1e3
           for w in ("naive", "fused")}
    out.append(f"- **Profiles at seq {st['profile_seq']}** ({'GPU kernel' if dev == 'cuda' else 'CPU'} self time, one "
               f"call each). Naive, {tot['naive']:.2f} ms in all: {top('naive', 4)}: two batched matmuls, the "
               f"scaling and the softmax, each reading and writing a (seq x seq) tensor per head. Fused, "
               f"{tot['fused']:.2f} ms in all: {top('fused', 2)}. SDPA ran the **{st['default_backend']}** backend.")
    p = sdpa.sweep_point(st, st["profile_seq"])
    if p and p["naive"]["status"] == p["fused"]["status"] == "ok" and p["naive"]["peak_bytes"] is not None:
        nb, fb, mb = p["naive"]["peak_bytes"], p["fused"]["peak_bytes"], p["attention_matrix_bytes"]
        out.append(f"- **Memory at seq {p['seq']}.** Peak above the inputs: naive {nb / 2**20:.1f} MiB vs fused "
                   f"{fb / 2**20:.2f} MiB; one attention matrix is {mb / 2**20:.1f} MiB, so naive holds about "
                   f"{nb / mb:.1f} of them at once (scores and their scaled copy, then the softmax), fused only its "
                   "output and small tiles.")
    ok = _ok_sweep(st)
    read = by_key(_readings.sdpa_readings(payload, dev))
    if ok:
        t = {(r["seq"], w): r[w]["timing"] for r in ok for w in ("naive", "fused")}
        ratio = {r["seq"]: t[r["seq"], "naive"]["steady_median_s"] / t[r["seq"], "fused"]["steady_median_s"] for r in ok}
        first, last = ok[0], ok[-1]
        text = (f"- **Sweep** (seq {first['seq']} to {last['seq']}): naive takes {min(ratio.values()):.1f}x to "
                f"{max(ratio.values()):.1f}x the fused time (at seq {last['seq']}: "
                f"{fmt(t[last['seq'], 'naive']['steady_median_s'])} vs {fmt(t[last['seq'], 'fused']['steady_median_s'])})")
        text += f"; {read[f'sdpa_{dev}.sweep_beyond_noise'].says}. "
        if f"sdpa_{dev}.fused_faster" in read:
            text += f"{read[f'sdpa_{dev}.fused_faster'].says}. "
        grow = last["seq"] / first["seq"]
        peaks = {w: (first[w]["peak_bytes"], last[w]["peak_bytes"]) for w in ("naive", "fused")}
        if None not in peaks["naive"] + peaks["fused"] and grow > 1:
            exp = {w: math.log(b / a) / math.log(grow) for w, (a, b) in peaks.items()}
            text += (f"For a {grow:g}x longer sequence naive's peak memory grows {peaks['naive'][1] / peaks['naive'][0]:.0f}-"
                     f"fold (seq^{exp['naive']:.1f}; {last['naive']['peak_bytes'] / 2**20:.0f} MiB at seq {last['seq']}) "
                     f"and fused's {peaks['fused'][1] / peaks['fused'][0]:.0f}-fold (seq^{exp['fused']:.1f}; "
                     f"{last['fused']['peak_bytes'] / 2**20:.1f} MiB).")
        out.append(text.rstrip())
    missing = [r for r in st["sweep"] if r["naive"]["status"] != "ok"]
    if missing:
        out.append("- Naive could not run at seq " + ", ".join(
            f"{r['seq']} ({r['naive']['status']}: {clip(r['naive']['reason'], 80)})" for r in missing) + ".")
    ran = [b for b in st["backends"] if b["status"] == "ok"]
    if ran:
        out.append(f"- **Backends forced one at a time** (seq {st['profile_seq']}): "
                   + ", ".join(f"{b['backend']} {fmt(b['timing']['steady_median_s'])}" for b in ran)
                   + "; unavailable: " + (", ".join(f"{b['backend']} (*{clip(b['reason'], 140)}*)"
                                                    for b in st["backends"] if b["status"] != "ok") or "none") + ".")
    runs = [r[w]["timing"] for r in ok for w in ("naive", "fused")]
    text = "\n".join(out) + measured_note(st, runs)
    if p and p in ok and read[f"sdpa_{dev}.seq{p['seq']}"].verdict == "lower" and st["default_backend"] != "math":
        text += "\n\n" + FUSED_WHY[dev]
    return text


def render(payloads: dict[str, dict | None], folder=None) -> str:
    """The whole answers file from the stored payloads named in ``NAMES`` (missing ones are said so)."""
    p = {n: payloads.get(n) for n in NAMES}
    parts = [sources.header(TITLE, p, "notebooks/lab4_perf.ipynb")]
    for dev in DEVICES:
        any_payload = p[f"compile_{dev}"] or p[f"sdpa_{dev}"]
        if any_payload:
            parts.append(sizes_text(any_payload["settings"], dev))
    parts.append("## Part 1: torch.compile on ResNet-18")
    parts += [compile_section(p[f"compile_{dev}"], dev) for dev in DEVICES]
    parts.append("### Answers 1a (CPU) and 1b (CUDA)")
    parts.append("**1a. Why did torch.compile give no speedup on the CPU?**\n\n" + compile_answer(p["compile_cpu"], "cpu"))
    parts.append("**1b. And on CUDA?**\n\n" + compile_answer(p["compile_cuda"], "cuda")
                 + ("\n\n" + tf32_note(p["compile_cuda"]) if tf32_note(p["compile_cuda"]) else ""))
    parts.append("## Part 2: naive vs fused attention")
    parts += [attention_section(p[f"sdpa_{dev}"], dev) for dev in DEVICES]
    parts.append("### Answers 2a (profile both) and 2b (CUDA)")
    parts.append("**2a. Profile naive and fused attention (CPU).**\n\n" + attention_answer(p["sdpa_cpu"], "cpu"))
    parts.append("**2b. And on CUDA?**\n\n" + attention_answer(p["sdpa_cuda"], "cuda"))
    return "\n\n".join(parts) + "\n"
