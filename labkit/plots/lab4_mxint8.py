"""Lab 4 part 3's figures (notebook lab4_mxint8), each drawn from its stored payload (numbers, settings,
provenance) by ``plot_<figure>(payload)``: ``plot_mxint8_tiling`` (kernel constants and the drawn view; the maps
are layout arithmetic, recomputed by ``labkit.kernels.tiling``), ``plot_mxint8_memory`` (``memory.compare`` per
model), ``plot_mxint8_bandwidth_plot`` (the rows of ``bench.sweep``: ``n``, ``group_size``, ``impl``, ``GBps``,
``fraction_of_copy``) and ``plot_mxint8_accuracy``. So the committed GPU figures can be redrawn from the
committed JSON without measuring again (``python -m labkit.redraw lab4_mxint8 --figures``). The drawings under
them (``tiling_figure``, ``memory_figure``, ``bandwidth_figure``) take the numbers alone, for the tests' small
inputs; ``overlapping_texts(fig)`` lists text that collides, for the tests.
"""
from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.ticker import FixedLocator, NullLocator, PercentFormatter

from ..kernels import tiling

IMPLS = ("cute_vec", "cute_tile", "compile", "eager")  # drawing order; others follow in the rows' order
IMPL_LABELS = {"cute_vec": "cute_vec (CuTe, vectorised)", "cute_tile": "cute_tile (CuTe, lab-structure tile)",
               "compile": "torch.compile", "eager": "eager PyTorch"}
IMPL_STYLE = {"cute_vec": ("#1f77b4", "o"), "cute_tile": ("#ff7f0e", "s"), "compile": ("#2ca02c", "^"),
              "eager": ("#d62728", "v")}


def _size_label(n: int) -> str:
    """1048576 -> '1M', 234881024 -> '224M' (M = 2^20); other sizes as plain integers."""
    return f"{n >> 20}M" if n % (1 << 20) == 0 else f"{n:,}"


def _figure(**kw) -> Figure:
    """A pyplot Figure, so a notebook's inline backend shows it when the cell ends (its canvas, Agg or the
    inline backend's, can be measured and saved)."""
    return plt.figure(**kw)


def _discrete(colors, n: int):
    """A ListedColormap of the first ``n`` colours and a norm putting integer i in the middle of colour i."""
    cmap = ListedColormap(list(colors)[:n])
    return cmap, BoundaryNorm(np.arange(n + 1) - 0.5, n)


# --- 3c: tiling ------------------------------------------------------------------------------------------

def plot_mxint8_tiling(payload: dict) -> Figure:
    """The tiling figure of an ``mxint8_tiling`` payload; says whether its constants are the current header's."""
    numbers = payload["numbers"]
    fig = tiling_figure(numbers)
    fig.labkit_drawn = {"from": "numbers.constants and numbers.drawn of this file (layout arithmetic)",
                        "constants_match_current_header": numbers["constants"] == tiling.kernel_constants()}
    return fig


def tiling_figure(numbers: dict) -> Figure:
    """The lab-structure kernel's CTA tiles and thread layout, and the vectorised kernel's mapping.

    ``numbers``: ``{"constants": {kVecElems, kVecThreads, kVecUnroll, kTileElems, kTileThreads},
    "drawn": {group_size, num_groups, BLK_M, BLK_K, THR_M, THR_K}}`` as the notebook saves them."""
    c, d = numbers["constants"], numbers["drawn"]
    g, ng = d["group_size"], d["num_groups"]
    blk_m, blk_k, thr_m, thr_k = d["BLK_M"], d["BLK_K"], d["THR_M"], d["THR_K"]
    if thr_m * thr_k != c["kTileThreads"] or blk_m * blk_k != c["kTileElems"]:
        raise ValueError(f"drawn tile {d} does not match the kernel constants {c}")
    # the maps, from the stored tile shape (the same formulas as tiling.lab_tile_map)
    m, k = np.meshgrid(np.arange(g), np.arange(ng), indexing="ij")
    tiles_m, tiles_k = -(-g // blk_m), -(-ng // blk_k)
    cta = m // blk_m + tiles_m * (k // blk_k)
    thread = (m % blk_m) % thr_m + thr_m * ((k % blk_k) % thr_k)
    vthreads, unroll, velems = c["kVecThreads"], c["kVecUnroll"], c["kVecElems"]
    vm = tiling.vec_map(3 * vthreads * unroll, threads=vthreads, unroll=unroll)

    fig = _figure(figsize=(17, 10.5), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1.55, 1.0])
    ax_tile, ax_thr = top.subplots(1, 2, width_ratios=[0.9, 1.35])

    # (a) local_tile: which CTA tile each element belongs to
    n_cta = tiles_m * tiles_k
    cmap, norm = _discrete(["#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69"] * 8, n_cta)
    im = ax_tile.imshow(cta, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest",
                        extent=(-0.5, ng - 0.5, g - 0.5, -0.5))
    ax_tile.set_xlim(-0.5, tiles_k * blk_k - 0.5)
    if ng % blk_k:  # the ragged last tile: columns past the tensor, predicated off
        ax_tile.add_patch(Rectangle((ng - 0.5, -0.5), tiles_k * blk_k - ng, g, facecolor="white",
                                    edgecolor="0.4", hatch="//", lw=0.8))
        narrow = tiles_k * blk_k - ng < 0.15 * tiles_k * blk_k  # then the note sits at the right edge
        ax_tile.text(tiles_k * blk_k - 1 if narrow else ng + (tiles_k * blk_k - ng) / 2 - 0.5, g * 0.8,
                     f"k >= {ng}:\nno data,\npredicated\noff", ha="right" if narrow else "center", va="center",
                     fontsize=9, bbox=dict(fc="white", ec="none", pad=1.5))
    for tm_ in range(tiles_m):
        for tk in range(tiles_k):
            cols, span = min(blk_k, ng - tk * blk_k), tiles_k * blk_k
            x = min(max(tk * blk_k + cols / 2 - 0.5, 0.06 * span), 0.94 * span)  # kept inside the axes
            ax_tile.text(x, tm_ * blk_m + min(blk_m, g - tm_ * blk_m) / 2 - 0.5,
                         f"CTA {tm_ + tiles_m * tk}", ha="center", va="center", fontsize=12)
    ax_tile.set_title(f"(a) local_tile: the (group_size, num_groups) = ({g}, {ng}) view\n"
                      f"cut by cta_tiler (BLK_M, BLK_K) = ({blk_m}, {blk_k})"
                      + ("; the last tile is ragged" if ng % blk_k or g % blk_m else ""), fontsize=11)
    ax_tile.set_xlabel("k: group (column k shares exponent k)")
    ax_tile.set_ylabel("m: element within its group")
    cb = top.colorbar(im, ax=ax_tile, ticks=range(n_cta), fraction=0.05, pad=0.02)
    cb.set_ticklabels([f"CTA {i}" for i in range(n_cta)])
    cb.set_label("colour = CTA tile")

    # (b) local_partition: thread ids within CTA 0 (at most 32 x 32 shown, a few rows written); colour = warp
    cols, h = min(blk_k, ng, 32), min(blk_m, g, 32)
    tile0 = thread[:h, :cols]
    warps = c["kTileThreads"] // 32
    cmap, norm = _discrete([f"C{i}" for i in range(10)] * 4, warps)
    im = ax_thr.imshow(tile0 // 32, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest", alpha=0.75)
    rows = sorted({0, 1, 2, h - 1})
    for kk in range(cols):
        for mrow in rows:
            ax_thr.text(kk, mrow, str(tile0[mrow, kk]), ha="center", va="center", fontsize=7)
    if h > 6:
        for kk in range(cols):
            ax_thr.text(kk, (3 + h - 1) / 2, "\u22ee", ha="center", va="center", fontsize=9)
    for j in range(1, -(-cols // thr_k)):
        ax_thr.axvline(j * thr_k - 0.5, color="k", lw=1.5)
    shown = "".join(f"{what} 0-{n - 1} of {blk}; " for what, n, blk in (("rows", h, blk_m), ("columns", cols, blk_k))
                    if n < blk)
    ax_thr.set_title(f"(b) local_partition of CTA 0: column-major ({thr_m}, {thr_k}) layout of "
                     f"{c['kTileThreads']} threads;\n{shown}thread id written in rows {', '.join(map(str, rows))}; "
                     f"the layout repeats every {thr_k} columns", fontsize=11)
    ax_thr.set_xlabel("k within CTA 0")
    ax_thr.set_ylabel("m")
    cb = top.colorbar(im, ax=ax_thr, ticks=range(warps), fraction=0.05, pad=0.02)
    cb.set_ticklabels([f"warp {i}" for i in range(warps)])
    cb.set_label("colour = warp (thread id // 32)")

    # (c) the vectorised kernel: three strips over the vector index, each with its own scale
    bottom.suptitle(f"(c) fast path (dequant_vec_kernel): {velems}-element vector v -> thread v % {vthreads}, "
                    f"unroll slot u = (v // {vthreads}) % {unroll}, CTA tile v // {vthreads * unroll} "
                    "(one CTA per tile)", fontsize=11)
    strips = bottom.subplots(3, 1, sharex=True)
    n_tiles = int(vm["cta_tile"].max()) + 1
    specs = [
        ("thread", vm["thread"], "viridis", None, [0, vthreads // 2, vthreads - 1], None),
        ("slot u", vm["slot"], *_discrete(["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02",
                                            "#a6761d", "#666666"] * 4, unroll),
         sorted({0, unroll // 2, unroll - 1}), "u = {}"),
        ("CTA tile", vm["cta_tile"], *_discrete(["#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6"] * 8, n_tiles),
         list(range(n_tiles)), "CTA tile {}"),
    ]
    for ax, (name, values, cmap, norm, ticks, direct) in zip(strips, specs):
        if direct:  # write the value on each run of equal values
            starts = np.flatnonzero(np.diff(values, prepend=values[0] - 1))
            for a, b in zip(starts, list(starts[1:]) + [len(values)]):
                ax.text((a + b - 1) / 2, 0.5, direct.format(values[a]), ha="center", va="center", fontsize=9,
                        color="white" if name == "slot u" else "black")
        extent = (-0.5, len(values) - 0.5, 0, 1)
        im = ax.imshow(values[None, :], cmap=cmap, norm=norm, vmin=None if norm else 0,
                       vmax=None if norm else vthreads - 1, aspect="auto", interpolation="nearest", extent=extent)
        ax.yaxis.set_major_locator(NullLocator())
        ax.set_ylabel(name, rotation=0, ha="right", va="center", fontsize=10)
        cb = bottom.colorbar(im, ax=ax, ticks=ticks, fraction=0.04, pad=0.01, aspect=6)
        cb.ax.tick_params(labelsize=8)
    strips[-1].set_xlabel(f"{velems}-element vector index v (CTA tile boundaries every {vthreads * unroll})")
    for ax in strips:
        for b in range(1, n_tiles):
            ax.axvline(b * vthreads * unroll - 0.5, color="k", lw=1.2)
    return fig


# --- 3d: memory ------------------------------------------------------------------------------------------

def plot_mxint8_memory(payload: dict) -> Figure:
    """The memory figure of an ``mxint8_memory`` payload, on the device that measured it."""
    fig = memory_figure(payload["numbers"]["measured"], device=payload["provenance"]["device"])
    fig.labkit_drawn = {"from": "numbers.measured of this file"}
    return fig


def memory_figure(measured: dict, device: str | None = None) -> Figure:
    """Resident and peak bytes of each model in fp32 and MXINT8: one panel per model (own scale), horizontal
    bars, values written on them. ``measured``: ``{model: memory.compare(...)}`` as stored."""
    names = list(measured)
    fig = _figure(figsize=(9, 1.0 + 2.0 * len(names)), layout="constrained")
    axes = np.atleast_1d(fig.subplots(len(names), 1))
    batch = {(m.get("batch_size"), m.get("seq_len")) for m in measured.values()}
    for ax, name in zip(axes, names):
        entry = measured[name]
        fmts = [f for f in ("fp32", "mxint8") if f in entry]
        labels = [entry[f]["format"].replace("mxint8", "MXINT8") for f in fmts]
        res = np.array([entry[f]["resident"] / 1e6 for f in fmts])
        peak = np.array([entry[f]["peak"] / 1e6 for f in fmts])
        y = np.arange(len(fmts))[::-1]
        ax.barh(y, res, color="#4c72b0", height=0.6, label="resident: parameters and buffers")
        ax.barh(y, peak - res, left=res, color="#dd8452", height=0.6, label="peak - resident: activations and temporaries (a dequantized weight)")
        right = peak.max()
        for yi, r, p in zip(y, res, peak):
            inside = r >= 0.15 * right  # room for the resident value on its own bar
            if inside:
                ax.text(r / 2, yi, f"{r:,.1f} MB", ha="center", va="center", color="white", fontsize=9,
                        fontweight="bold")
            ax.text(p + 0.01 * right, yi, f"peak {p:,.1f} MB (+{p - r:,.1f})" if inside else
                    f"peak {p:,.1f} MB, resident {r:,.1f} MB", ha="left", va="center", fontsize=9)
        ax.set_xlim(0, right * 1.55)
        ax.set_yticks(y, labels)
        ax.tick_params(axis="y", labelsize=10)
        ax.set_xlabel("MB (10^6 bytes)")
        saved = entry.get("saving_peak")
        ax.set_title(name + (f": MXINT8 peak {saved:.1%} lower" if saved is not None else ""), fontsize=11,
                     loc="left")
    handles, lab = axes[0].get_legend_handles_labels()
    fig.legend(handles, lab, loc="outside lower center", ncol=2, fontsize=9, frameon=False)
    (b, s), = batch if len(batch) == 1 else ((None, None),)
    fig.suptitle("Inference memory, fp32 vs MXINT8 (torch.cuda.max_memory_allocated during one forward)"
                 + (f"\nbatch {b} x {s} tokens" if b else "") + (f", {device}" if device else ""), fontsize=11)
    return fig


# --- bandwidth -------------------------------------------------------------------------------------------

def run_label(source: str, created: str | None = None) -> str:
    """The line under the bandwidth figure's title: whose rows it draws. The notebook's own sweep and the
    benchmark command's (``mxint8_bandwidth.json``) are separate runs of one kernel, which differ at small sizes."""
    own = source.startswith("measured in this run")
    return ("numbers: mxint8_bandwidth_plot.json, " + ("the notebook's own sweep" if own else
                                                       "the stored mxint8_bandwidth.json rows")
            + (f" of {created[:16].replace('T', ' ')}" if created else "")
            + ("; mxint8_bandwidth.json is a separate run" if own else ""))


def plot_mxint8_bandwidth_plot(payload: dict) -> Figure:
    """The bandwidth figure of an ``mxint8_bandwidth_plot`` payload: its rows at its group size. The device is
    the one the rows name (``numbers.device``: stored GPU rows shown on a CPU) or else the provenance's; the date
    under the title is the run's own only for the notebook's own sweep (stored rows carry theirs in ``source``)."""
    n, prov = payload["numbers"], payload["provenance"]
    rows = n.get("rows")
    if not rows:
        raise ValueError("mxint8_bandwidth_plot.json stores no rows to draw from (a run before the notebook stored "
                         "them): run the notebook on a GPU")
    source = n.get("source", "")
    own = source.startswith("measured in this run")
    label = run_label(source, prov.get("created") if own else None)
    fig = bandwidth_figure(rows, n.get("group_size") or payload["settings"]["group_size"],
                           device=n.get("device") or prov["device"], source=label)
    fig.labkit_drawn = {"from": "numbers.rows of this file"}
    return fig


def bandwidth_figure(rows: list[dict], group_size: int | None = None, device: str | None = None,
                     source: str | None = None) -> Figure:
    """Fraction of copy bandwidth (%) against size n, one line per implementation, at one group size.

    ``rows``: ``bench.sweep(...)["rows"]`` (``n``, ``group_size``, ``impl``, ``GBps``, ``fraction_of_copy``).
    ``group_size``: which group size to draw; may be left out when the rows hold only one. Each line's
    legend entry gives its GB/s at the largest n (all GB/s stay in the rows). ``source``: which run's rows these
    are (one line under the title: two runs of one kernel differ at small sizes). Sizes where the two CuTe
    kernels take the same time (``labkit.readings.lab4_mxint8.launch_bound_sizes``) are shaded: there the timing
    is not the kernels' own work."""
    from ..readings.lab4_mxint8 import launch_bound_sizes

    groups = sorted({r["group_size"] for r in rows})
    if group_size is None:
        if len(groups) != 1:
            raise ValueError(f"the rows hold group sizes {groups}: say which one to draw")
        group_size = groups[0]
    sel = [r for r in rows if r["group_size"] == group_size]
    if not sel:
        raise ValueError(f"no rows at group size {group_size} (the rows hold {groups})")
    sizes = sorted({r["n"] for r in sel})
    impls = [i for i in IMPLS if any(r["impl"] == i for r in sel)]
    impls += [i for i in dict.fromkeys(r["impl"] for r in sel) if i not in impls]
    fig = _figure(figsize=(8.5, 5.2), layout="constrained")
    ax = fig.subplots()
    big = sizes[-1]
    copy_gbps = [r["GBps"] / r["fraction_of_copy"] for r in sel if r["n"] == big and r["fraction_of_copy"]]
    ax.axhline(100, color="k", ls="--", lw=1.2,
               label="copy of the same bytes = 100%" + (f" ({copy_gbps[0]:,.0f} GB/s at n = {_size_label(big)})"
                                                        if copy_gbps else ""))
    for impl in impls:
        pts = sorted((r["n"], 100 * r["fraction_of_copy"], r["GBps"]) for r in sel if r["impl"] == impl)
        color, marker = IMPL_STYLE.get(impl, (None, "o"))
        last = pts[-1]
        (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, lw=1.8, ms=6,
                          label=f"{IMPL_LABELS.get(impl, impl)}: {last[1]:.0f}% = {last[2]:,.0f} GB/s at "
                                f"n = {_size_label(last[0])}")
        line.set_gid(impl)
    bound = [n for n in launch_bound_sizes(sel, group_size) if n in sizes]
    if bound:
        ax.axvspan(min(bound) / 1.6, max(bound) * 1.6, color="0.85", alpha=0.6, lw=0, zorder=0,
                   label=f"n <= {_size_label(max(bound))}: both CuTe kernels take the same time: what is timed is "
                         "not the kernels' own work")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sizes))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(sizes, [_size_label(n) for n in sizes])
    ax.yaxis.set_major_formatter(PercentFormatter(100, decimals=0))
    highest = max(100 * r["fraction_of_copy"] for r in sel)
    # the scale is the kernels' own: a shaded size (not the kernels' work) that times far above the copy is drawn
    # at the top edge with its value, not allowed to flatten every other point
    own = [100 * r["fraction_of_copy"] for r in sel if r["n"] not in bound] or [highest]
    top = max(120, 10 * np.ceil(max(own) / 10 + 0.5))
    ax.set_ylim(0, top)
    clipped = sorted((r["n"], 100 * r["fraction_of_copy"], r["impl"]) for r in sel if 100 * r["fraction_of_copy"] > top)
    for i, (x, y, impl) in enumerate(clipped):
        ax.annotate(f"{impl}: {y:.0f}% (off scale)", (x, top), xytext=(4, -10 - 10 * i), textcoords="offset points",
                    fontsize=7, color="0.3", ha="left", va="top")
    ax.grid(True, alpha=0.3)
    ax.set_xlabel("elements n (M = 2^20), log scale")
    ax.set_ylabel("% of copy bandwidth (same bytes read + written)")
    ax.set_title(f"MXINT8 -> bf16 dequantization, group size {group_size}" + (f": {device}" if device else "")
                 + f"\nbytes per element: 1 + 1/{group_size} read, 2 written"
                 + ("; above 100%: timed faster than the copy" if highest > 100 else "")
                 + (f"\n{source}" if source else ""), fontsize=11 if not source else 10)
    fig.legend(loc="outside lower center", ncol=2, fontsize=8.5, frameon=False)
    return fig


# --- accuracy --------------------------------------------------------------------------------------------

def plot_mxint8_accuracy(payload: dict) -> Figure:
    """fp32 and MXINT8 accuracy of the converted classifier: mean bars over training seeds, each seed a dot."""
    from ..readings import seeds as _seeds

    numbers, settings = payload["numbers"], payload["settings"]
    k = _seeds.count(numbers)
    g = settings.get("group_size", 32)
    fig = _figure(figsize=(4.8, 3.4))
    ax = fig.add_subplot()
    keys = [("fp32", "fp32 (SFT)", "#4c72b0"), ("mxint8", f"MXINT8 g{g}", "#dd8452")]
    bars = ax.bar([label for _, label, _ in keys], [numbers[key]["accuracy"] for key, _, _ in keys],
                  color=[c for _, _, c in keys])
    ax.bar_label(bars, fmt="%.4f")
    if k > 1:
        for i, (key, _, _) in enumerate(keys):
            ax.scatter([i] * k, _seeds.values(numbers[key], "accuracy", k), s=12, color="k", zorder=3,
                       label="each training seed" if i == 0 else None)
        ax.legend(fontsize=7, loc="lower right")
    ax.set(ylim=(0.4, 1.0), ylabel="IMDb test accuracy")
    ax.set_title(f"{settings['model']}, {numbers['dataset_sizes']['test']:,} reviews; "
                 + (f"means of {k} training seeds" if k > 1 else "one training seed"), fontsize=9)
    fig.tight_layout()
    return fig


# --- checks used by the tests ----------------------------------------------------------------------------

def _texts(fig: Figure) -> list[Text]:
    """Every visible, non-empty text of a drawn figure, tick labels only where a tick is inside the view."""
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or t.get_figure(root=True) is not fig:
            continue
        out.append(t)
    drawn_ticks = set()
    for ax in fig.get_axes():
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            span = hi - lo
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if lo - 1e-9 * span <= tick.get_loc() <= hi + 1e-9 * span:
                    drawn_ticks.update({id(tick.label1), id(tick.label2)})
    tick_labels = {id(lbl) for ax in fig.get_axes() for axis in (ax.xaxis, ax.yaxis)
                   for tick in axis.get_major_ticks() + axis.get_minor_ticks() for lbl in (tick.label1, tick.label2)}
    return [t for t in out if id(t) not in tick_labels or id(t) in drawn_ticks]


def overlapping_texts(fig: Figure, pad: float = 0.0) -> list[tuple[str, str]]:
    """Pairs of texts of ``fig`` whose drawn boxes (grown by ``pad`` pixels) intersect, plus texts that
    stick out of the figure; empty when every label can be read."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = _texts(fig)
    boxes = [t.get_window_extent(renderer).expanded(1, 1).padded(pad) for t in texts]
    out = [(a.get_text(), b.get_text()) for (a, ba), (b, bb) in itertools.combinations(zip(texts, boxes), 2)
           if ba.width > 0 and bb.width > 0 and ba.overlaps(bb)
           and min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > 0.5 and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > 0.5]
    return out


def texts_outside_axes(fig: Figure) -> list[str]:
    """Texts written inside an axes (``ax.text``) that stick out of it: a value label running off its bar's
    panel, for instance."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = []
    for ax in fig.get_axes():
        box = ax.get_window_extent(renderer)
        for t in ax.texts:
            tb = t.get_window_extent(renderer)
            if t.get_visible() and t.get_text().strip() and not (
                    tb.x0 >= box.x0 - 0.5 and tb.x1 <= box.x1 + 0.5 and tb.y0 >= box.y0 - 0.5 and tb.y1 <= box.y1 + 0.5):
                out.append(t.get_text())
    return out


def legend_entries(fig: Figure) -> list[str]:
    return [t.get_text() for leg in fig.legends + [ax.get_legend() for ax in fig.get_axes() if ax.get_legend()]
            for t in leg.get_texts()]


__all__ = ["IMPLS", "bandwidth_figure", "legend_entries", "memory_figure", "overlapping_texts", "plot_mxint8_accuracy",
           "plot_mxint8_bandwidth_plot", "plot_mxint8_memory", "plot_mxint8_tiling", "run_label", "texts_outside_axes",
           "tiling_figure"]
