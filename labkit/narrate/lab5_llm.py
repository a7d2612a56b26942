"""What the Lab 5 notebook says while it runs (the answers' words are ``labkit.answers.lab5_llm``)."""
from __future__ import annotations

import math


def sensitivity_text(kinds: list[dict], base: dict, width: int, group: int) -> str:
    """One line per projection kind rounded alone, most harmful first: its perplexity and the mean NLL it adds."""
    def added(r):
        return sum(a - b for a, b in zip(r["per_block"], base["per_block"])) / len(base["per_block"])

    lines = [f"each kind alone at int{width} g{group} (float32 {base['ppl']:.3f}):"]
    for r in sorted(kinds, key=added, reverse=True):
        lines.append(f"  {r['kind']:<10} {r['layers']:>3} layers, {r['weights'] / 1e6:5.1f}M weights: ppl "
                     f"{r['ppl']:.3f} (x{math.exp(added(r)):.3f})")
    return "\n".join(lines)


def sweep_text(rows: list[dict]) -> str:
    return "\n".join(f"{r['spec']}: {r['weight_bits']:.3f} bits, ppl {r['ppl']:.3f} ± {r['ppl_se']:.3f}" for r in rows)


def awq_text(rows: list[dict]) -> str:
    return "\n".join(f"int{r['width']} g{r['group_size']}: RTN {r['rtn']['ppl']:.3f}, AWQ {r['awq']['ppl']:.3f}; "
                     f"AWQ - RTN mean NLL {r['paired']['nll_diff']:+.4f} ± {r['paired']['nll_diff_se']:.4f}"
                     for r in rows)


def decode_text(d: dict) -> str:
    return (f"same {d['new_tokens']} tokens as generate (the KV-cache loop and labkit's static step); "
            f"{d['decode_ms_per_token']:.1f} ms/token (generate {d['generate_ms_per_token']:.1f}): {d['text']!r}")
