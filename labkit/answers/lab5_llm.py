"""Lab 5's answers as Markdown from its stored numbers, wording ``labkit.readings.lab5_llm``."""
from __future__ import annotations

from ..readings import by_key, compute
from .sources import header

TITLE = "Lab 5: quantizing SmolLM2-135M group-wise, AWQ, KV-cache decoding"
Q4_1 = ("The shipped weights are Q4_1 (each block of 32 weights along a row holds at most 16 values d * q + m), "
        "dequantized to float32: 8 bits per group of 32 is a finer grid over values already on a 4-bit one")


def perplexity(p: dict, r: dict) -> list[str]:
    s, base, rows = p["settings"], p["numbers"]["base"], p["numbers"]["rows"]
    out = [f"**Reference.** float32 perplexity {base['ppl']:.3f} ± {base['ppl_se']:.3f} over {base['blocks']} "
           f"blocks of {s['block_len']} tokens ({base['tokens']:,} predicted tokens, SE over blocks by the delta "
           "method)."]
    out.append("**The sweep** (perplexity ± SE at the average stored bits per weight, scales included): " + "; ".join(
        f"{row['format']} {row['width']}-bit g{row['group_size']}: {row['ppl']:.4g} ± {row['ppl_se']:.2g} at "
        f"{row['weight_bits']:.3f} bits" for row in rows) + ".")
    int8 = [v for k, v in r.items() if k.startswith("int8.") and k.endswith(".vs_fp32")]
    if int8:
        out.append(f"**8 bits.** {Q4_1}: " + "; ".join(x.says for x in int8) + ".")
    groups = [v for k, v in r.items() if k.startswith("int") and "_vs_g" in k]
    if groups:
        out.append("**Group size** (paired over blocks; group sizes must divide 576 and 1536, so 128 is not among "
                   "them): " + "; ".join(x.says for x in groups) + ". A coarser group shares one scale among more "
                   "weights, so one large weight sets a coarse step for all of them; a finer group pays 16 / g bits "
                   "of scale per weight.")
    else:
        out.append("**Group size.** This run measured one group size per width, so no group sizes are compared.")
    return out


def awq(p: dict, r: dict) -> list[str]:
    rows = [v for k, v in r.items() if k.startswith("awq.")]
    if not rows:
        return []
    s = p["settings"]
    return [f"**AWQ against RTN** (alphas {s['alphas']} searched per layer on {s['calib_blocks']} training-review "
            f"blocks; paired over the evaluation blocks): " + "; ".join(x.says for x in rows) + "."]


def _mlp_share(kinds: list[dict]) -> str:
    mlp = sum(k["weights"] for k in kinds if k["kind"] in ("gate_proj", "up_proj", "down_proj"))
    total = sum(k["weights"] for k in kinds)
    return f" The MLP's projections measured here hold {100 * mlp / total:.0f}% of these kinds' weights." if mlp else ""


def sensitivity(p: dict, r: dict) -> list[str]:
    s, n = p["settings"], p["numbers"]
    kinds = sorted((r[f"sensitivity.{k['kind']}"] for k in n["kinds"]), key=lambda x: -x.quantities["difference"])
    out = [f"**Per kind of projection** (each kind alone at int{s['sens_width']} g{s['awq_group']}, everything else "
           "float32; paired over the evaluation blocks), most harmful first: " + "; ".join(x.says for x in kinds)
           + "." + _mlp_share(n["kinds"])]
    if "sensitivity.worst" in r:
        out.append("**The most harmful kind.** " + r["sensitivity.worst"].says + "; " +
                   r["sensitivity.worst_remeasured"].says + ".")
    out.append("**Keeping it wider.** " + r["sensitivity.keep_wider"].says + ".")
    if "sensitivity.keep_wider_vs_equal_bits" in r:
        out.append("**At the same bits** (the control: those bits spent on finer groups instead): "
                   + r["sensitivity.keep_wider_vs_equal_bits"].says + ".")
    return out


def decode(p: dict, r: dict) -> list[str]:
    n = p["numbers"]
    card = p.get("provenance", {}).get("device") or n["device"]  # numbers name the torch device (cuda:0)
    says = r["decode.tokens_equal"].says
    out = [f"**Decoding.** Greedy, {says}; {n['decode_ms_per_token']:.1f} ms per token for the "
           f"loop, {n['generate_ms_per_token']:.1f} for generate ({card}, batch {n['batch']}, prompt "
           f"{n['prompt_len']} tokens, steady-call medians)."]
    if "decode.static_tokens_equal" in r:
        out[-1] = out[-1][:-1] + "; " + r["decode.static_tokens_equal"].says + "."
    return out


def decode_speed(p: dict, r: dict) -> list[str]:
    n = p["numbers"]
    rates = n.get("copy_rates_bytes_per_s")  # the ways of copying timed; the roofline takes the fastest
    how = (" (the faster of " + ", ".join(f"{k} {v / 1e12:.2f}" for k, v in rates.items()) + ")") if rates else (
        " (a graphed copy_ alone, a memcpy node, which moves bytes slower than a copy kernel on an H200: "
        "benchmarks/README.md; the fractions below are upper bounds)")
    out = [f"**Decode speed** ({n['device']}, copy bandwidth {n['copy_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s{how} "
           f"measured in the run, {n['new_tokens']} new tokens after a {n['prompt_len']}-token prompt; random-init "
           "models of SmolLM2's shapes; tokens/s, and the fraction of the weight-bandwidth roofline):"]
    for shape in dict.fromkeys(row["shape"] for row in n["rows"]):
        rows = [row for row in n["rows"] if row["shape"] == shape]
        cells = []
        for b in sorted({row["batch"] for row in rows}):
            cells.append(f"batch {b}: " + ", ".join(
                f"{row['loop']} {row['tokens_per_s']:,.0f} ({100 * row['fraction_of_roofline']:.0f}%)"
                for row in rows if row["batch"] == b))
        out.append(f"{shape}: " + "; ".join(cells) + ".")
    agree = {}
    for row in n["rows"]:
        if row["loop"] != row["peer"]:
            agree.setdefault((row["loop"], row["peer"]), []).append(row["tokens_agree_with_peer"])
    if agree:
        cells = ", ".join(f"{loop} {100 * sum(v) / len(v):.0f}% of {peer}'s" for (loop, peer), v in agree.items())
        text = (f"**Tokens** (the share of sequences whose tokens all equal their peer loop's, over every shape and "
                f"batch): {cells}.")
        low = any(sum(v) < len(v) for (loop, _), v in agree.items() if "compiled" in loop or "fused" in loop)
        rounded = n.get("compile_options", {}).get("emulate_precision_casts")
        if low and not rounded:
            text += (" Where a compiled loop's share is low, it is rounding, not a wrong step: Inductor computed "
                     "each compiled piece's bf16 operations in float32 without rounding between them, a random-init "
                     "model's logits are near ties, so one greedy token flips and the rest follow (on a CPU in "
                     "float32 the compiled step makes generate's tokens exactly: the tests).")
        elif rounded:
            text += (" The compiled pieces round their bf16 intermediates as eager does (Inductor's "
                     "emulate_precision_casts; the tests hold at least 99% of each piece's bf16 outputs equal to eager's "
                     "and the rest within one bf16 step, on a CPU and on CUDA).")
        out.append(text)
    found = [x.says for k, x in r.items() if k.startswith("speed.")]
    if found:
        out.append("**Read:** " + "; ".join(found) + ".")
    return out


def render(payloads: dict, folder=None) -> str:
    r = by_key(compute("lab5_llm", payloads))
    out = []
    for name, words in (("perplexity", perplexity), ("awq", awq), ("sensitivity", sensitivity), ("decode", decode),
                        ("decode_speed", decode_speed)):
        if payloads.get(name) is not None:
            out += words(payloads[name], r)
    return header(TITLE, payloads, "lab5_llm") + "\n\n" + "\n\n".join(f"- {line}" for line in out) + "\n"
