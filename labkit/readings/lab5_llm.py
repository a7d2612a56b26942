"""Lab 5's readings (``perplexity.json``, ``awq.json``, ``decode.json``): 8-bit integer against float32, the
coarsest group against the finest at each integer width, AWQ against RTN at each width, and the decode loop's
tokens against ``generate``'s. Every comparison of two models is paired over the same evaluation blocks: the mean
of the per-block NLL differences and its SE, sd / sqrt(k), established beyond Student's t for k - 1 degrees of
freedom (about 2 SE for 16 blocks and more)."""
from __future__ import annotations

import math

from .core import Reading, check
from .stats import t95

RULE = ("paired over evaluation blocks: mean per-block NLL difference a - b, SE = sd / sqrt(k); established when "
        "|mean| > t SE (Student's 95% t, k - 1 degrees of freedom), else level")

# key -> the verdicts the committed full-profile numbers give (readings.core.compute makes them claims); none
# yet: no full-profile results of Lab 5 are committed
CLAIMS: dict[str, tuple[str, ...]] = {}


def paired_nll(a: list[float], b: list[float]) -> dict:
    """a - b per block: mean, SE, t and the perplexity ratio exp(mean)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired over blocks needs the same blocks on both sides: {len(a)} and {len(b)}")
    d = [x - y for x, y in zip(a, b)]
    k = len(d)
    mean = sum(d) / k
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (k - 1) / k) if k > 1 else math.nan
    t = t95(k - 1) if k > 1 else math.nan
    return {"difference": mean, "se": se, "t": t, "blocks": k, "ppl_ratio": math.exp(mean),
            "established": k > 1 and abs(mean) > t * se}


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
    return [check("decode.tokens_equal", bool(p["tokens_equal"]),
                  f"the KV-cache loop makes the same {n} tokens as generate (greedy)",
                  f"the KV-cache loop's {n} tokens **differ** from generate's", source="decode",
                  rule="greedy_decode's tokens == generate(do_sample=False)'s", quantities={"new_tokens": n})]


def readings(payloads: dict) -> list[Reading]:
    out = []
    for source, read in (("perplexity", perplexity_readings), ("awq", awq_readings), ("decode", decode_readings)):
        p = payloads.get(source)
        if p is not None:
            out += read(p["numbers"])
    return out
