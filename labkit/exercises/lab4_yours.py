"""Lab 4's exercises put to work: the student's functions (labkit's own until theirs pass their checks) run
beside labkit's, as the rows and text the notebooks show under each exercise: the MXINT8 quantizer and decoder
(``lab4_mxint8``), the timer and naive attention (``lab4_perf``)."""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from ..kernels.sheet_decode import bits_of
from ..perf import sdpa
from ..perf.timing import fmt_seconds, synchronize
from ..quant.formats import mxint
from ..report import table
from ..labs.lab4_checks import RULE_EXAMPLES
from ..readings.tables import DECODE_COLUMNS


def rule_rows(quantize, rules: list[dict]) -> list[dict]:
    """The rule examples through ``quantize`` beside labkit's ``rules`` (``mxint8_format``'s)."""
    rows = []
    for (name, values), ref in zip(RULE_EXAMPLES.items(), rules):
        try:
            m, e = quantize(torch.tensor(values), 4)
            mine = {"your E": int(e), "your m": m.tolist()}
        except Exception as err:  # noqa: BLE001 (an input the check did not cover)
            mine = {"your E": "-", "your m": f"raised {type(err).__name__}"}
        rows.append({"group": name, "labkit E": ref["E"], "labkit m": ref["m"], **mine,
                     "same": (mine["your E"], mine["your m"]) == (ref["E"], ref["m"])})
    return rows


def decode_text(decode, table_rows: list[dict], table_exponent: int) -> str:
    """The decode table (``mxint8_format``'s) with ``decode``'s value of each mantissa beside it."""
    mine = decode(torch.tensor([r["m"] for r in table_rows], dtype=torch.int8).reshape(-1, 1),
                  torch.full((len(table_rows), 1), table_exponent, dtype=torch.uint8), 1).reshape(-1)
    shown = [{**r, "your y": float(y)} for r, y in zip(table_rows, mine)]
    return (f"E = {table_exponent} (scale 2^{table_exponent - 127}); `your y`: your decoder (labkit's until "
            "yours passes):\n\n" + table(shown, DECODE_COLUMNS + ["your y"], floatfmt=".6g"))


def round_trip_rows(quantize, decode, errors: list[dict], seed: int) -> list[dict]:
    """A seeded 768 x 3072 Gaussian weight (std 0.02) through ``quantize`` and ``decode`` at the group sizes of
    ``errors`` (``mxint8_format``'s): relative error beside labkit's, and whether the bits are labkit's."""
    weight = torch.randn(768, 3072, generator=torch.Generator().manual_seed(seed)) * 0.02
    rows = []
    for ref in errors:
        g = ref["group_size"]
        m, e = quantize(weight, g)
        back = decode(m, e, g)
        lm, le = mxint.quantize_mxint8(weight, g)
        same_bits = torch.equal(bits_of(back), bits_of(mxint.dequantize_mxint8(lm, le, g)))
        rows.append({"group_size": g, "bits/element": 8 + 8 / g,
                     "your relative L2 error": f"{((back.float() - weight).norm() / weight.norm()).item():.4%}",
                     "labkit's": f"{ref['relative L2 error']:.4%}",
                     "same m, E": bool(torch.equal(m, lm) and torch.equal(e, le)), "same bf16 bits": same_bits})
    return rows


def timer_text(timer, device: str) -> str:
    """``timer`` on a real first call: ``torch.compile`` with the ``eager`` backend captures a small function
    with Dynamo on its first call, then replays the captured graph."""
    x = torch.randn(256, 256, device=device)
    captured = torch.compile(lambda t: F.gelu(t @ t.T).sum(), backend="eager")
    got = timer(lambda: captured(x), repeats=20, warmup=2, clock=time.perf_counter, sync=lambda: synchronize(device))
    torch._dynamo.reset()  # leave no captured graph behind
    return (f"On {device}: first call **{fmt_seconds(got['first'])}** (Dynamo captures the function), steady median "
            f"**{fmt_seconds(got['median'])}**, {got['first'] / got['median']:,.0f}x. Averaging the first 5 calls "
            f"with no warm-up, as the sheet does, would report about "
            f"{fmt_seconds((got['first'] + 4 * got['median']) / 5)} a call.")


def attention_rows(attention, timer, device: str) -> list[dict]:
    """``attention`` against ``F.scaled_dot_product_attention`` on ``device``, float32, batch 1, 4 heads, seq
    512, head dim 64, both timed with ``timer``, causal and not."""
    q, k, v = sdpa.random_qkv(1, 4, 512, 64, torch.float32, device, seed=0)
    rows = []
    for causal in (False, True):
        row = {"is_causal": causal}
        for name, impl in (("naive (yours)", attention), ("fused", F.scaled_dot_product_attention)):
            t = timer(lambda: impl(q, k, v, is_causal=causal), repeats=10, warmup=2, clock=time.perf_counter,
                      sync=lambda: synchronize(device))
            row[f"{name} first (ms)"], row[f"{name} median (ms)"] = 1e3 * t["first"], 1e3 * t["median"]
        diff = attention(q, k, v, is_causal=causal) - F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        row["max |naive - fused|"] = diff.abs().max().item()
        rows.append(row)
    return rows
