"""Lab 4 parts 1-2's figures (notebook lab4_perf), drawn from a study's stored payload (``compile_<device>``,
``sdpa_<device>`` JSON), so a committed figure can be redrawn without measuring. One drawing serves both
devices: ``plot_compile_cpu`` and ``plot_compile_cuda`` are the same function, as are the two ``plot_sdpa_*``."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt

from ..perf.compile_study import SHEET_CALLS, noisy
from ..perf.timing import Timing

FROM = {"from": "numbers of this file"}  # what a redrawn figure's JSON says it was drawn from


def plot_compile_cpu(payload: dict):
    """Per-call time (first call visible), cumulative time vs calls, steady medians with spread."""
    study = payload["numbers"]
    ok = [r for r in study["runs"] if r["status"] == "ok"]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(17, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, r in enumerate(ok):
        t = Timing.from_summary(r["timing"])
        ax1.plot(range(1, len(t.per_call) + 1), t.per_call, "o-", ms=3, color=colors[i % len(colors)],
                 label=f"{r['variant']} {r['state']} (b{r['batch']})")
    ax1.set(yscale="log", xlabel="call", ylabel="seconds per call", title="per call: call 1 compiles")
    ax1.legend(fontsize=6)

    by_key = {(r["variant"], r["state"], r["batch"]): r for r in ok}
    finite = [c["break_even_calls"] for c in study["comparisons"]
              if c["break_even_calls"] is not None and math.isfinite(c["break_even_calls"])]
    longest = max(len(r["timing"]["per_call_s"]) for r in ok) if ok else 1
    horizon = int(max(10 * longest, min(3 * max(finite, default=0), 1e6)))
    for i, c in enumerate(study["comparisons"]):
        color = colors[i % len(colors)]
        for variant, ls in ((c["variant"], "-"), ("eager", ":")):
            t = Timing.from_summary(by_key[(variant, c["state"], c["batch"])]["timing"])
            cum = t.cumulative()
            ax2.plot(range(1, len(cum) + 1), cum, ls, color=color, marker="o", ms=2,
                     label=f"{variant} {c['state']} (b{c['batch']})" if variant != "eager" else None)
            n = [len(cum), horizon]  # extrapolated with the steady median (a straight line)
            ax2.plot(n, [cum[-1] + (k - len(cum)) * t.steady_median for k in n], ls, color=color, alpha=0.35)
        be = c["break_even_calls"]
        # only where the answers can show one: a saving within noise has no break-even these numbers show
        if be is not None and math.isfinite(be) and be > 0 and not noisy(study, c):
            y = c["eager_first_s"] + be * c["eager_steady_s"]  # approximately where the lines cross
            ax2.plot([be], [y], "*", color=color, ms=10)
    ax2.set(xscale="log", yscale="log", xlabel="number of calls", ylabel="cumulative seconds",
            title="cumulative (dotted: eager; faint: extrapolated; star: break-even beyond noise)")
    ax2.title.set_fontsize(9)
    ax2.legend(fontsize=6)

    labels = [f"{r['variant']} {r['state']} b{r['batch']}" for r in ok]
    med = [r["timing"]["steady_median_s"] for r in ok]
    lo = [m - r["timing"]["steady_min_s"] for m, r in zip(med, ok)]
    hi = [r["timing"]["steady_max_s"] - m for m, r in zip(med, ok)]
    ax3.bar(range(len(ok)), med, yerr=[lo, hi], capsize=3, color=[colors[i % len(colors)] for i in range(len(ok))])
    sheet = [Timing.from_summary(r["timing"]).mean_of_first(min(SHEET_CALLS, r["timing"]["calls"])) for r in ok]
    ax3.plot(range(len(ok)), sheet, "kx", label=f"mean of first {SHEET_CALLS} calls (the sheet's number)")
    ax3.set_xticks(range(len(ok)), labels, fontsize=6, rotation=40, ha="right")
    ax3.set(yscale="log", ylabel="seconds per call", title="steady median (bars: min-max)")
    ax3.legend(fontsize=7)
    source = (study.get("model_source") or "?").split(" (")[0]
    fig.suptitle(f"torch.compile, ResNet-18 ({source}, random weights) on "
                 f"{study['device_name']}", fontsize=9)
    fig.tight_layout()
    fig.labkit_drawn = dict(FROM)
    return fig


def plot_sdpa_cpu(payload: dict):
    """Time and peak memory vs sequence length (naive vs fused), and the forced backends."""
    study = payload["numbers"]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 4.5))
    for name, style in (("naive", "o-"), ("fused", "s-")):
        pts = [(r["seq"], r[name]) for r in study["sweep"] if r[name]["status"] == "ok"]
        ax1.plot([s for s, _ in pts], [1e3 * m["timing"]["steady_median_s"] for _, m in pts], style, label=name)
        ax1.fill_between([s for s, _ in pts], [1e3 * m["timing"]["steady_q25_s"] for _, m in pts],
                         [1e3 * m["timing"]["steady_q75_s"] for _, m in pts], alpha=0.3)
        mem = [(s, m["peak_bytes"]) for s, m in pts if m["peak_bytes"] is not None]
        ax2.plot([s for s, _ in mem], [b / 2**20 for _, b in mem], style, label=f"{name} (measured peak)")
    ax2.plot([r["seq"] for r in study["sweep"]], [r["attention_matrix_bytes"] / 2**20 for r in study["sweep"]],
             "k--", label="one attention matrix (analytic)")
    ax1.set(yscale="log", ylabel="ms per call (median, IQR)", title="time")
    ax2.set(yscale="log", ylabel="MiB", title="peak memory")
    seqs = [r["seq"] for r in study["sweep"]]
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(seqs, [str(s) for s in seqs])
        ax.set_xlabel("sequence length")
        ax.legend(fontsize=7)
    ok = [b for b in study["backends"] if b["status"] == "ok"]
    ax3.bar([b["backend"] for b in ok], [1e3 * b["timing"]["steady_median_s"] for b in ok])
    missing = [b["backend"] for b in study["backends"] if b["status"] != "ok"]
    ax3.set(ylabel="ms per call", title=f"forced backends at seq {study['profile_seq']}"
            + (f" (unavailable: {', '.join(missing)})" if missing else ""))
    ax3.title.set_fontsize(8)
    fig.suptitle(f"attention, batch {study['batch']} x {study['heads']} heads x head dim {study['head_dim']}, "
                 f"{study['dtype']}, causal={study['is_causal']} on {study['device_name']}; "
                 f"default backend: {study['default_backend']}", fontsize=9)
    fig.tight_layout()
    fig.labkit_drawn = dict(FROM)
    return fig


plot_compile_cuda = plot_compile_cpu
plot_sdpa_cuda = plot_sdpa_cpu
