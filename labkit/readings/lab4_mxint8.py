"""Lab 4 part 3's readings: every dequantization the notebook's bandwidth sweep measured is bit-exact, which
sizes of that sweep time the host's launch rather than the kernel (``mxint8_bandwidth_plot.json``), MXINT8's peak
and parameter savings against theory (``mxint8_memory.json``), and MXINT8's accuracy against fp32 over training
seeds (``mxint8_accuracy.json``)."""
from __future__ import annotations

from . import seeds as _seeds
from .core import Reading, check, compare

PEAK_SAVING = 0.60     # a model whose converted weights are most of its bytes saves at least this of its peak
THEORY_POINTS = 0.005  # measured parameter saving = whole-model theory within half a point
# at one size, the two CuTe kernels (16 B against 4 B in flight per thread: 2.6x apart in time at the largest
# size) within this of each other time the same thing: the host issuing the call, not the kernel
SAME_TIME = 0.10


def bandwidth(payload: dict) -> list[Reading]:
    rows, source = payload["numbers"]["rows"], "mxint8_bandwidth_plot"
    inexact = [(r["n"], r["group_size"], r["impl"]) for r in rows if not r.get("bit_exact")]
    out = [check("bandwidth.bit_exact", not inexact,
                 f"Every one of the {len(rows)} dequantizations timed here is bit-exact against the reference",
                 f"Dequantizations **not** bit-exact against the reference: {inexact}", source=source,
                 rule="bf16 output equal bit for bit to the eager reference (any NaN matches any NaN)",
                 quantities={"rows": len(rows), "inexact": inexact})]
    ms = times(rows, payload["numbers"]["group_size"])
    sizes = sorted({n for n, impl in ms if impl == "cute_vec" and (n, "cute_tile") in ms})
    if len(sizes) > 1:
        bound = launch_bound_sizes(rows, payload["numbers"]["group_size"])
        copy = payload["numbers"]["copy"]
        n0 = sizes[0]
        ratio = ms[sizes[-1], "cute_tile"] / ms[sizes[-1], "cute_vec"]
        vec_us, tile_us, copy_us = 1e3 * ms[n0, "cute_vec"], 1e3 * ms[n0, "cute_tile"], 1e3 * copy[str(n0)]["ms"]
        head = f"At n = {n0:,} the two CuTe kernels take {vec_us:.1f} and {tile_us:.1f} us"
        out.append(check(
            "bandwidth.smallest_launch_bound", n0 in bound,
            f"{head}, within {SAME_TIME:.0%} of each other although at n = {sizes[-1]:,} the tile kernel takes "
            f"{ratio:.1f}x the vectorised one's time (the copy of the same bytes took {copy_us:.1f} us here, "
            f"{copy_vs(max(vec_us, tile_us), copy_us)}): at that size the timing measures what both calls share, most likely the host issuing "
            "the call (Python, the dispatcher, the output's allocation), not the kernel's memory traffic, so that "
            "point's % of copy belongs to the run, not to the kernel, and moves between runs",
            f"{head}, more than {SAME_TIME:.0%} apart: even the smallest size times the kernels themselves",
            source=source,
            rule=f"vectorised and tile kernel times within {SAME_TIME:.0%} of each other at the smallest size",
            quantities={"n": n0, "vec_us": vec_us, "tile_us": tile_us, "copy_us": copy_us,
                        "launch_bound_sizes": bound, "largest_ratio": ratio}, expect=False))
    return out


def copy_vs(kernel_us: float, copy_us: float) -> str:
    """The slower kernel's time against the copy's, as a ratio either way (the copy of a small size can itself
    time the host and come out the slower)."""
    if kernel_us >= copy_us:
        return f"{kernel_us / copy_us:.1f}x shorter than the slower kernel's"
    return f"{copy_us / kernel_us:.1f}x longer than the slower kernel's"


def times(rows: list[dict], group_size: int) -> dict:
    """``{(n, impl): ms}`` of the rows at ``group_size``."""
    return {(r["n"], r["impl"]): r["ms"] for r in rows if r["group_size"] == group_size}


def launch_bound_sizes(rows: list[dict], group_size: int) -> list[int]:
    """Sizes where the vectorised and the tile kernel take the same time (within ``SAME_TIME``) while they differ
    beyond it at the largest size: what is timed there is not the kernels' own work."""
    # both kernels move the same bytes at one size, so their times stand in inverse ratio to their GB/s
    gbps = {(r["n"], r["impl"]): r["GBps"] for r in rows if r["group_size"] == group_size}
    sizes = sorted({n for n, impl in gbps if impl == "cute_vec" and (n, "cute_tile") in gbps})
    ratio = {n: gbps[n, "cute_vec"] / gbps[n, "cute_tile"] for n in sizes}
    if len(sizes) < 2 or abs(ratio[sizes[-1]] - 1) <= SAME_TIME:
        return []
    return [n for n in sizes if abs(ratio[n] - 1) <= SAME_TIME]


def memory(payload: dict) -> list[Reading]:
    measured, source = payload["numbers"]["measured"], "mxint8_memory"
    big = {name: m for name, m in measured.items() if m["theory_whole_model"] > 0.5}
    peaks = ", ".join(f"{m['saving_peak']:.1%} for {name}" for name, m in big.items())
    out = []
    if big:
        out.append(check("memory.peak_saving", all(m["saving_peak"] >= PEAK_SAVING for m in big.values()),
                         f"The inference peak saving is {peaks}: at least {PEAK_SAVING:.0%} where the converted weights are "
                         "most of the model",
                         f"The inference peak saving is {peaks}: **less** than {PEAK_SAVING:.0%} where the converted weights "
                         "are most of the model",
                         source=source, rule=f"peak saving >= {PEAK_SAVING:.0%} for every model whose whole-model "
                                             "theory exceeds 50%",
                         quantities={n: m["saving_peak"] for n, m in big.items()}))
    gaps = {name: m["saving_parameter_bytes"] - m["theory_whole_model"] for name, m in measured.items()}
    worst = max(abs(g) for g in gaps.values())
    out.append(check("memory.parameters_match_theory", worst < THEORY_POINTS,
                     f"The measured parameter saving equals the whole-model prediction for every model (largest "
                     f"gap {100 * worst:.1g} points, under {100 * THEORY_POINTS:g})",
                     f"The measured parameter saving is **{100 * worst:.2g} points** off the whole-model prediction",
                     source=source, rule=f"|measured - theory| < {100 * THEORY_POINTS:g} point for every model",
                     quantities=gaps, expect=False))  # one byte accounting read twice: bookkeeping, not a claim
    return out


def accuracy(numbers: dict) -> Reading:
    k, n = _seeds.count(numbers), numbers["fp32"]["n"]
    mx, fp = _seeds.values(numbers["mxint8"], "accuracy", k), _seeds.values(numbers["fp32"], "accuracy", k)
    one = k < 2
    says = {"higher": "MXINT8 minus fp32 {text}: " + ("beyond two test-set SE with one training seed" if one else
                                                      "an established gain"),
            "lower": "MXINT8 minus fp32 {text}: " + ("beyond two test-set SE with one training seed" if one else
                                                     "an established loss"),
            "level": "MXINT8 minus fp32 {text}: no established difference" + (" (one training seed)" if one else "")}
    return compare("accuracy.mxint8_vs_fp32", mx, fp, n, source="mxint8_accuracy", says=says,
                   names=("MXINT8", "fp32"))


def readings(payloads: dict) -> list[Reading]:
    out = []
    if (p := payloads.get("mxint8_bandwidth_plot")) is not None and p["numbers"].get("rows"):
        out += bandwidth(p)
    if (p := payloads.get("mxint8_memory")) is not None:
        out += memory(p)
    if (p := payloads.get("mxint8_accuracy")) is not None:
        out.append(accuracy(p["numbers"]))
    return out

