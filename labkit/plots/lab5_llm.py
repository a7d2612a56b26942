"""Lab 5's figure, drawn from the numbers its JSON stores (python -m labkit.redraw lab5_llm --figures)."""
from __future__ import annotations

import matplotlib.pyplot as plt

COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


def series(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows by series: one per format and group size (the integer sweep gives one per group size)."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        name = f"{r['format']} g{r['group_size']}"
        out.setdefault(name, []).append(r)
    return out


def plot_perplexity(payload: dict):
    """Perplexity against the average stored bits per quantized weight (scales included), one series per format
    (the integer format per group size), error bars one SE over blocks; the float32 model as a line with its SE."""
    numbers, settings = payload["numbers"], payload["settings"]
    base = numbers["base"]
    fig, ax = plt.subplots(figsize=(7, 4.8))
    ax.axhline(base["ppl"], color="black", lw=1, label=f"float32 ({base['ppl']:.2f})")
    ax.axhspan(base["ppl"] - base["ppl_se"], base["ppl"] + base["ppl_se"], color="black", alpha=0.08)
    for i, (name, rows) in enumerate(series(numbers["rows"]).items()):
        rows = sorted(rows, key=lambda r: r["weight_bits"])
        ax.errorbar([r["weight_bits"] for r in rows], [r["ppl"] for r in rows], yerr=[r["ppl_se"] for r in rows],
                    marker="o", capsize=3, color=COLORS[i % len(COLORS)], label=name)
    ax.set_yscale("log")
    ax.set_xlabel("average stored bits per quantized weight (scales included)")
    ax.set_ylabel("perplexity (log scale; ± 1 SE over blocks)")
    ax.set_title(f"SmolLM2-135M weight-only PTQ on IMDb text ({base['blocks']} blocks x "
                 f"{settings['block_len']} tokens, profile {settings['profile']})", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_decode_speed(payload: dict):
    """Tokens/s against batch, one panel per model shape, one line per decoding loop, and each weight format's
    roofline (batch x copy bandwidth / bytes a step reads) dashed: the numbers of ``labkit.llm.decode_speed``."""
    numbers = payload["numbers"]
    shapes = list(dict.fromkeys(r["shape"] for r in numbers["rows"]))
    fig, axes = plt.subplots(1, len(shapes), figsize=(6 * len(shapes), 4.6), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        rows = [r for r in numbers["rows"] if r["shape"] == shape]
        loops = list(dict.fromkeys(r["loop"] for r in rows))
        for i, loop in enumerate(loops):
            mine = sorted((r for r in rows if r["loop"] == loop), key=lambda r: r["batch"])
            ax.plot([r["batch"] for r in mine], [r["tokens_per_s"] for r in mine], marker="o",
                    color=COLORS[i % len(COLORS)], label=loop)
        roofs = {}
        for r in rows:
            roofs.setdefault(r["step_weight_bytes"], {})[r["batch"]] = r["roofline_tokens_per_s"]
        for j, (nbytes, by_batch) in enumerate(sorted(roofs.items(), reverse=True)):
            b = sorted(by_batch)
            ax.plot(b, [by_batch[x] for x in b], ls="--", color="black", alpha=0.7 - 0.3 * j,
                    label=f"roofline, {nbytes / 1e9:.2f} GB a step")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch (sequences decoded together)")
        ax.set_ylabel("tokens/s (all sequences)")
        ax.set_title(f"{shape} shape, {numbers['new_tokens']} new tokens, {numbers['device']}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
