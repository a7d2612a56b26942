"""Lab 5's readings (``perplexity.json``, ``awq.json``, ``decode.json``): 8-bit integer against float32, the
coarsest group against the finest at each integer width, AWQ against RTN at each width, and the decode loop's
tokens against ``generate``'s. Every comparison of two models is paired over the same evaluation blocks: the mean
of the per-block NLL differences and its SE, sd / sqrt(k), established beyond Student's t for k - 1 degrees of
freedom (about 2 SE for 16 blocks and more)."""
from __future__ import annotations

import dataclasses
import math

from .core import Reading, check, selected
from .lab4_perf import timing
from .stats import replicates

RULE = ("paired over evaluation blocks: mean per-block NLL difference a - b, SE = sd / sqrt(k); established when "
        "|mean| > t SE (Student's 95% t, k - 1 degrees of freedom), else level")

# key -> the verdict the committed full-profile numbers give (readings.core.compute makes them claims): the findings
# with room to spare (a timing within a few percent, or "level" on two steady calls, is not claimed)
CLAIMS: dict[str, tuple[str, ...]] = {
    "int4.g192_vs_g32": ("higher",), "int3.g192_vs_g32": ("higher",),
    "awq.int4.g64": ("lower",), "awq.int3.g64": ("lower",),
    "sensitivity.worst_remeasured": ("higher",), "sensitivity.keep_wider": ("lower",),
    "sensitivity.keep_wider_vs_equal_bits": ("higher",),
    "speed.graph_vs_generate.smollm2-1.7b.b1": ("lower",), "speed.graph_vs_generate.smollm2-135m.b1": ("lower",),
    "speed.mxint8_vs_bf16.smollm2-1.7b.b64": ("higher",),
}


def paired_nll(a: list[float], b: list[float]) -> dict:
    """a - b per block (``stats.replicates``: the blocks are independent draws): mean, SE, t and the perplexity
    ratio exp(mean)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired over blocks needs the same blocks on both sides: {len(a)} and {len(b)}")
    d = replicates([x - y for x, y in zip(a, b)])
    k = d.seeds
    return {"difference": d.mean, "se": d.se_seed, "t": d.t if k > 1 else math.nan, "blocks": k,
            "ppl_ratio": math.exp(d.mean), "established": d.established}


def compare(key: str, a: dict, b: dict, names: tuple[str, str], source: str) -> Reading:
    """``a`` against ``b`` (rows holding ``per_block`` and ``ppl``): higher / lower (worse / better) or level."""
    q = paired_nll(a["per_block"], b["per_block"])
    v = ("higher" if q["difference"] > 0 else "lower") if q["established"] else "level"
    how = (f"mean NLL {q['difference']:+.4f} ± {q['se']:.4f} nats per token over {q['blocks']} blocks, "
           f"perplexity x{q['ppl_ratio']:.3f}")
    words = {"higher": f"{names[0]} is worse than {names[1]}", "lower": f"{names[0]} is better than {names[1]}",
             "level": f"{names[0]} is level with {names[1]} (within {q['t']:.2f} SE)" if q["blocks"] > 1 else
             f"{names[0]} against {names[1]}: one block, no SE"}
    q.update({"a": a["ppl"], "b": b["ppl"], "a_name": names[0], "b_name": names[1]})
    return Reading(key, v, f"{words[v]} ({names[0]} {a['ppl']:.3f}, {names[1]} {b['ppl']:.3f}; {how})", RULE, q,
                   source)


def perplexity_readings(p: dict) -> list[Reading]:
    base, rows = p["base"], [r for r in p["rows"] if r["format"] == "integer"]
    out = []
    for r in rows:
        if r["width"] == 8:
            out.append(compare(f"int8.g{r['group_size']}.vs_fp32", r, base,
                               (f"int8 g{r['group_size']}", "float32"), "perplexity"))
    for w in sorted({r["width"] for r in rows}, reverse=True):
        by_group = {r["group_size"]: r for r in rows if r["width"] == w}
        if len(by_group) > 1:
            fine, coarse = min(by_group), max(by_group)
            out.append(compare(f"int{w}.g{coarse}_vs_g{fine}", by_group[coarse], by_group[fine],
                               (f"int{w} g{coarse}", f"int{w} g{fine}"), "perplexity"))
    return out


def awq_readings(p: dict) -> list[Reading]:
    return [compare(f"awq.int{r['width']}.g{r['group_size']}", r["awq"], r["rtn"],
                    (f"AWQ int{r['width']} g{r['group_size']}", f"RTN int{r['width']} g{r['group_size']}"), "awq")
            for r in p["rows"]]


def decode_readings(p: dict) -> list[Reading]:
    n = p["new_tokens"]
    out = [check("decode.tokens_equal", bool(p["tokens_equal"]),
                 f"the KV-cache loop makes the same {n} tokens as generate (greedy)",
                 f"the KV-cache loop's {n} tokens **differ** from generate's", source="decode",
                 rule="greedy_decode's tokens == generate(do_sample=False)'s", quantities={"new_tokens": n})]
    if "static_tokens_equal" in p:
        out.append(check("decode.static_tokens_equal", bool(p["static_tokens_equal"]),
                         f"labkit's static-shape step makes the same {n} tokens as generate",
                         f"labkit's static-shape step's {n} tokens **differ** from generate's", source="decode",
                         rule="StaticDecoder's tokens == generate(do_sample=False)'s", quantities={"new_tokens": n}))
    return out


def sensitivity_readings(p: dict) -> list[Reading]:
    base, kinds = p["base"], p["kinds"]
    w = p["uniform"]["width"]
    out = [compare(f"sensitivity.{r['kind']}", r, base, (f"{r['kind']} alone at int{w}", "float32"), "sensitivity")
           for r in kinds]
    if len(p["again"]) == 2:
        worst, second = p["again"]
        pick = compare("sensitivity.worst", next(r for r in kinds if r["kind"] == worst["kind"]),
                       next(r for r in kinds if r["kind"] == second["kind"]),
                       (f"{worst['kind']} alone", f"{second['kind']} alone"), "sensitivity")
        again = compare("sensitivity.worst_remeasured", worst, second,
                        (f"{worst['kind']} alone", f"{second['kind']} alone"), "sensitivity")
        again = dataclasses.replace(again, says=f"on {again.quantities['blocks']} fresh test blocks, " + again.says)
        out += selected(pick, len(kinds), again)
    mixed, uniform = p["mixed"], p["uniform"]
    out.append(compare("sensitivity.keep_wider", mixed, uniform,
                       (f"int{w} with {mixed['wide']} at int{w + 1} ({mixed['weight_bits']:.3f} bits)",
                        f"int{w} throughout ({uniform['weight_bits']:.3f} bits)"), "sensitivity"))
    return out


SPEED_BATCHES = (1, 64)  # the readings' batches: the host-bound end and the largest the fused kernel serves


def speed_readings(p: dict) -> list[Reading]:
    by = {(r["shape"], r["batch"], r["loop"]): r for r in p["rows"]}
    out = []
    for shape in dict.fromkeys(r["shape"] for r in p["rows"]):
        for b in SPEED_BATCHES:
            pairs = (("graph_vs_generate", "labkit_graph", "generate", "labkit's graphed step", "generate"),
                     ("compiled_vs_graph", "labkit_compiled", "labkit_graph", "the graphed step with compiled pieces",
                      "the graphed step"),
                     ("mxint8_vs_bf16", "labkit_graph_mxint8", "labkit_graph", "MXINT8 fused (graphed)",
                      "bf16 (graphed)"),
                     ("mxint8_vs_bf16_compiled", "labkit_compiled_mxint8", "labkit_compiled",
                      "MXINT8 fused (graphed, compiled pieces)", "bf16 (graphed, compiled pieces)"),
                     ("fused_vs_compiled", "labkit_fused", "labkit_compiled",
                      "the compiled step with stacked projections", "the compiled step"),
                     ("mxint8_vs_bf16_fused", "labkit_fused_mxint8", "labkit_fused",
                      "MXINT8 fused (compiled, stacked projections)", "bf16 (compiled, stacked projections)"))
            for name, a, c, a_words, c_words in pairs:
                if (shape, b, a) not in by or (shape, b, c) not in by:
                    continue
                ra, rc = by[shape, b, a], by[shape, b, c]
                r = timing(f"speed.{name}.{shape}.b{b}", ra["timing"], rc["timing"], "decode_speed", a, c)
                how = (f"{a_words} {ra['tokens_per_s']:,.0f} tokens/s against {c_words} {rc['tokens_per_s']:,.0f}, "
                       f"x{ra['tokens_per_s'] / rc['tokens_per_s']:.2f} ({shape} shape, batch {b})")
                says = {"lower": f"{a_words} is faster than {c_words}: {how}",
                        "higher": f"{a_words} is slower than {c_words}: {how}"}.get(
                    r.verdict, r.says.replace("**", "") + ": " + how)  # never bold unless claimed
                out.append(dataclasses.replace(r, says=says))
            for key, loop, words in (("roofline", "labkit_graph", "labkit's graphed bf16 step"),
                                     ("roofline_compiled", "labkit_compiled",
                                      "labkit's graphed bf16 step with compiled pieces"),
                                     ("roofline_fused", "labkit_fused",
                                      "labkit's compiled bf16 step with stacked projections")):
                if (shape, b, loop) not in by:
                    continue
                f = by[shape, b, loop]["fraction_of_roofline"]
                out.append(check(f"speed.{key}.{shape}.b{b}", f >= ROOFLINE_GOAL,
                                 f"{words} reaches {100 * f:.0f}% of its weight-bandwidth roofline "
                                 f"({shape} shape, batch {b}; goal {100 * ROOFLINE_GOAL:.0f}%)",
                                 f"{words} reaches {100 * f:.0f}% of its weight-bandwidth roofline, "
                                 f"below the {100 * ROOFLINE_GOAL:.0f}% goal ({shape} shape, batch {b})",
                                 source="decode_speed", rule=f"tokens/s >= {ROOFLINE_GOAL} x batch x copy bandwidth / "
                                 "step weight bytes", quantities={"fraction": f}, expect=False))
    return out


ROOFLINE_GOAL = 0.7


def readings(payloads: dict) -> list[Reading]:
    out = []
    for source, read in (("perplexity", perplexity_readings), ("awq", awq_readings),
                         ("sensitivity", sensitivity_readings), ("decode", decode_readings),
                         ("decode_speed", speed_readings)):
        p = payloads.get(source)
        if p is not None:
            out += read(p["numbers"])
    if payloads.get("perplexity") is not None and payloads.get("sensitivity") is not None:
        out += equal_bits_readings(payloads["sensitivity"]["numbers"], payloads["perplexity"]["numbers"])
    return out


def equal_bits_readings(sens: dict, sweep: dict) -> list[Reading]:
    """The control of keeping one kind wider: the sweep's uniform integer point at the same width and the same
    average bits (finer groups instead of a wider kind), where the sweep has one."""
    mixed, w = sens["mixed"], sens["uniform"]["width"]
    same = [r for r in sweep["rows"] if r["format"] == "integer" and r["width"] == w
            and abs(r["weight_bits"] - mixed["weight_bits"]) < 1e-9]
    return [compare("sensitivity.keep_wider_vs_equal_bits", mixed, r,
                    (f"int{w} with {mixed['wide']} at int{w + 1} ({mixed['weight_bits']:.3f} bits)",
                     f"int{w} g{r['group_size']} throughout ({r['weight_bits']:.3f} bits)"), "sensitivity")
            for r in same[:1]]
