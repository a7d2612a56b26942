"""Lab 4 parts 1-2's readings (``compile_<dev>.json``, ``sdpa_<dev>.json``): each compiled variant against eager
in the same state and batch, and fused against naive attention over the sequence sweep, read by one rule: two
timings whose medians differ by no more than either side's spread (max - min of the steady calls), and whose
steady calls overlap, are within noise. On CUDA, Inductor beating eager and fused attention beating naive everywhere are claims."""
from __future__ import annotations

from ..perf.compile_study import get_comparison, timings
from ..perf.timing import fmt_seconds as fmt
from ..perf.timing import iqr, spread, within_noise
from .core import Reading, by_key, check

# the findings the committed results state, as claims (labkit.readings.core.compute)
CLAIMS = {"compile_cuda.cudagraphs.eval+no_grad.b128": ('higher',)}

DEVICES = ("cpu", "cuda")
INDUCTOR = ("inductor", "reduce-overhead", "max-autotune")  # Inductor's generated code (cudagraphs replays eager's)
RULE = ("within noise when the medians differ by no more than either side's max - min over the steady calls and "
        "the two sides' steady calls overlap; else faster (lower) or slower (higher)")


def timing(key: str, new: dict, old: dict, source: str, new_name: str = "compiled", old_name: str = "eager") -> Reading:
    """``new`` against ``old`` (``Timing.summary()``s): ``lower`` (faster), ``higher`` (slower) or ``level``
    (within noise, said with the numbers that make it so)."""
    a, b = new["steady_median_s"], old["steady_median_s"]
    q = {"a": a, "b": b, "a_name": new_name, "b_name": old_name, "difference": a - b, "spread_a": spread(new),
         "spread_b": spread(old), "ratio": b / a}
    if within_noise(new, old):
        return Reading(key, "level", (
            f"**within noise**: the medians differ by {fmt(abs(a - b))}, no more than the spread of the steady calls "
            f"(max-min: {old_name} {fmt(spread(old))}, {new_name} {fmt(spread(new))}), and their calls overlap, so this measurement shows "
            "neither a speedup nor a slowdown"), RULE, q, source)
    return Reading(key, "lower" if a < b else "higher", "faster" if a < b else "slower", RULE, q, source)


def convolution_change(eager: dict, compiled: dict, source: str) -> Reading:
    """Whether the convolutions of one profiled inference call changed compiled (``eager``/``compiled``: runs with
    ``timing`` and ``op_shares``): ``lower``/``higher`` beyond the calls' noise, else ``level``. One profiled call
    each: its noise is taken as its run's relative interquartile range (a typical call's deviation; a max - min
    let a burst of slow calls from another process make any difference noise). Quantities: the convolution
    seconds, that noise, the steady speedup and its bound if convolutions kept their eager time."""
    te, tk = eager["timing"], compiled["timing"]
    conv_e = eager["op_shares"]["seconds"].get("convolution", 0.0)
    conv_k = compiled["op_shares"]["seconds"].get("convolution", 0.0)
    noise = max(conv_e * iqr(te) / te["steady_median_s"], conv_k * iqr(tk) / tk["steady_median_s"])
    q = {"eager": conv_e, "compiled": conv_k, "noise": noise, "speedup": te["steady_median_s"] / tk["steady_median_s"],
         "bound": te["steady_median_s"] / conv_e if conv_e else float("inf")}
    verdict = "level" if abs(conv_e - conv_k) <= noise else "lower" if conv_k < conv_e else "higher"
    return Reading(f"{source}.convolutions", verdict, {"level": "within noise", "lower": "faster",
                                                       "higher": "slower"}[verdict],
                   "convolution seconds of one profiled call each, within noise when they differ by no more than "
                   "either run's relative interquartile range moves them", q, source)


def compiler_share(c: dict, source: str = "") -> Reading:
    """Whether compilation dominates the sheet's average (comparison ``c``): the first compiled call's excess over
    a steady call, as a share of the averaged calls' total, ``holds`` above half."""
    share = (c["compiled_first_s"] - c["compiled_steady_s"]) / (c["sheet_calls"] * c["compiled_sheet_mean_s"])
    return check(f"{source}.compiler_dominates", share > 0.5, "mostly the compiler", "not dominated by the compiler",
                 source=source, rule="the first call's excess over a steady call is more than half the averaged total",
                 quantities={"share": share}, expect=False)


def within_bound(conv: Reading) -> Reading:
    """Whether the steady speedup stays within the bound that removing the non-convolution time alone could give
    (``convolution_change``'s quantities): ``fails`` when the steady calls ran faster than that."""
    q = conv.quantities
    return check(f"{conv.source}.within_bound", not q["speedup"] > q["bound"], "within the bound", "beyond the bound",
                 source=conv.source, rule="steady speedup <= steady median / eager convolution seconds",
                 quantities={"speedup": q["speedup"], "bound": q["bound"]}, expect=False)


BUSY = 0.8  # a GPU busy this share of an eager call leaves little idle time between launches for CUDA graphs


def gpu_busy(eager: dict, source: str = "") -> Reading:
    """How busy one profiled eager call (``eager``: a run with ``timing`` and ``op_shares``) kept the GPU: its
    kernels' total over the steady median. ``not established`` above 1 (the profile counted more than the call's
    work: results stored before labkit left the profiler's own bookkeeping row out), ``holds`` above ``BUSY``
    (little launch idle left), else ``fails`` (the GPU waits on Python and kernel launches)."""
    busy = eager["op_shares"]["total_s"] / eager["timing"]["steady_median_s"]
    verdict = "not established" if busy > 1 else "holds" if busy > BUSY else "fails"
    says = {"not established": "the profile counts more than the call", "holds": "busy between launches",
            "fails": "waiting on launches"}[verdict]
    return Reading(f"{source}.gpu_busy", verdict, says, f"kernel seconds / steady median above {BUSY} (at most 1)",
                   {"busy": busy}, source)


def compile_key(c: dict) -> str:
    return f"{c['variant']}.{c['state']}.b{c['batch']}"


def compile_readings(payload: dict | None, dev: str) -> list[Reading]:
    if payload is None:
        return []
    st, source = payload["numbers"], f"compile_{dev}"
    out = [timing(f"{source}.{compile_key(c)}", *timings(st, c)[::-1], source) for c in st["comparisons"]]
    ind = [(c, r) for c, r in zip(st["comparisons"], out) if c["variant"] in INDUCTOR]
    fast = [f"{c['variant']} {c['state']}" for c, r in ind if r.verdict == "lower"]
    slow = [f"{c['variant']} {c['state']}" for c, r in ind if r.verdict == "higher"]
    if ind:
        out.append(check(f"{source}.inductor_faster", bool(fast) and not slow,
                         f"Inductor's compiled code is faster than eager beyond noise in {len(fast)} of the {len(ind)} "
                         f"comparisons here and slower in none",
                         f"Inductor's compiled code is **not** faster than eager everywhere: slower beyond noise in "
                         f"{slow or 'none'}, faster in {fast or 'none'}", source=source,
                         rule="some Inductor comparison faster beyond noise and none slower",
                         quantities={"faster": fast, "slower": slow, "comparisons": len(ind)}, expect=dev == "cuda"))
    return out


def ok_sweep(st: dict) -> list[dict]:
    return [r for r in st["sweep"] if r["naive"]["status"] == r["fused"]["status"] == "ok"]


def sdpa_readings(payload: dict | None, dev: str) -> list[Reading]:
    if payload is None:
        return []
    st, source = payload["numbers"], f"sdpa_{dev}"
    ok = ok_sweep(st)
    out = [timing(f"{source}.seq{r['seq']}", r["fused"]["timing"], r["naive"]["timing"], source, "fused", "naive")
           for r in ok]
    if ok:
        tied = [r["seq"] for r, x in zip(ok, out) if x.verdict == "level"]
        out.append(check(f"{source}.sweep_beyond_noise", not tied, "every point beyond the spread of both sides",
                         f"within noise at seq {', '.join(map(str, tied))}", source=source, rule=RULE,
                         quantities={"within_noise": tied}, expect=False))
    ran = [r for r in st["sweep"] if r["naive"].get("status") == "ok"]
    slow = [r["seq"] for r in ran if r["fused"]["timing"]["steady_median_s"] >= r["naive"]["timing"]["steady_median_s"]]
    if ran:
        out.append(check(f"{source}.fused_faster", not slow,
                         f"Fused attention's median is below naive's at every sequence length naive ran "
                         f"({len(ran)} of {len(st['sweep'])})",
                         f"Fused attention is **not** faster than naive at seq {slow}", source=source,
                         rule="fused steady median < naive's at every length naive ran", quantities={"slower": slow},
                         expect=dev == "cuda"))
    return out


def readings(payloads: dict) -> list[Reading]:
    out = []
    for dev in DEVICES:
        out += compile_readings(payloads.get(f"compile_{dev}"), dev)
        out += sdpa_readings(payloads.get(f"sdpa_{dev}"), dev)
    return out


def of_comparison(found: dict[str, Reading], dev: str, c: dict) -> Reading:
    return found[f"compile_{dev}.{compile_key(c)}"]


def comparison(payload: dict, dev: str, variant: str, state: str) -> Reading | None:
    """The reading of ``variant`` against eager in ``state`` (None when not measured)."""
    c = get_comparison(payload["numbers"], variant, state)
    return None if c is None else of_comparison(by_key(compile_readings(payload, dev)), dev, c)
