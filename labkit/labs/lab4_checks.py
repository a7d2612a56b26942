"""Exact checks of the MXINT8 format behind answers 3a and 3b: deterministic computations, not timings,
so they run on any device and their numbers are stored (``mxint8_format.json``) for the answers."""
from __future__ import annotations

import math
from typing import Callable

import torch

from ..kernels import memory
from ..kernels.sheet_decode import bits_of, decode_bits_table, sheet_decode
from ..quant.formats.mxint import dequantize_mxint8, quantize_mxint8

# hand-made groups of 4, one per quantization rule
RULE_EXAMPLES = {
    "tie 2.5/64 -> 2, 3.5/64 -> 4 (half to even)": [1.0, 2.5 / 64, 3.5 / 64, -2.5 / 64],
    "saturation: 1.999 -> 127": [1.999, 0.5, 0.25, -1.0],
    "all zero": [0.0, 0.0, 0.0, 0.0],
    "subnormal max (1e-40)": [1e-40, -5e-41, 0.0, 1e-45],
    "huge (3e38)": [3e38, -1e38, 1.0, 0.0],
    "holds inf": [float("inf"), 1.0, 2.0, 3.0],
}
TABLE_MANTISSAS = (0, 1, 5, 32, 63, 64, 65, 100, 127, -1, -63, -64, -127)


def rule_rows() -> list[dict]:
    rows = []
    for name, values in RULE_EXAMPLES.items():
        m, e = quantize_mxint8(torch.tensor(values), 4)
        back = dequantize_mxint8(m, e, 4, dtype=torch.float32)
        rows.append({"group": name, "E": int(e), "m": m.tolist(), "decoded": [f"{v:.4g}" for v in back.tolist()]})
    return rows


def error_rows(weight: torch.Tensor, groups=(16, 32, 128)) -> list[dict]:
    """Relative L2 error of quantizing ``weight`` at each group size, with its storage cost."""
    rows = []
    for g in groups:
        m, e = quantize_mxint8(weight, g)
        back = dequantize_mxint8(m, e, g, dtype=torch.float32)
        rows.append({"group_size": g, "bits/element": 8 + 8 / g, "saving vs fp32": memory.theoretical_saving(g),
                     "relative L2 error": ((back - weight).norm() / weight.norm()).item(),
                     "mean |m|": m.float().abs().mean().item()})
    return rows


def group_dot(w: torch.Tensor, x: torch.Tensor, group_size: int) -> dict:
    """``w . x`` with both MXINT8: integer dot products per group and one exponent add, against the float64
    dot product of the dequantized values."""
    mw, ew = quantize_mxint8(w, group_size)
    mx, ex = quantize_mxint8(x, group_size)
    ints = (mw.view(-1, group_size).long() * mx.view(-1, group_size).long()).sum(-1)   # exact integers
    scales = torch.pow(2.0, (ew.long() + ex.long() - 254 - 12).double())                 # 2^(Ew+Ex-254) / 64^2
    dot_int = (ints.double() * scales).sum().item()
    dot_float = (dequantize_mxint8(mw, ew, group_size, torch.float64)
                 * dequantize_mxint8(mx, ex, group_size, torch.float64)).sum().item()
    bound = group_size * 127 * 127
    return {"group_size": group_size, "elements": w.numel(), "dot_int": dot_int, "dot_float": dot_float,
            "equal": dot_int == dot_float, "accumulator_bound": bound, "accumulator_bits": math.ceil(math.log2(bound)),
            "max_group_sum": int(ints.abs().max())}


def _differs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return ~((bits_of(a) == bits_of(b)) | (torch.isnan(a) & torch.isnan(b)))


def decode_check(kernel: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                 table_exponent: int = 127) -> dict:
    """The sheet's bit assembly on all 65,536 (mantissa byte, exponent byte) pairs against the exact value;
    ``kernel(m, e)`` (int8, uint8 columns -> bf16) is checked on the same pairs when given."""
    mm = torch.arange(-128, 128, dtype=torch.int32).to(torch.int8).reshape(-1, 1).expand(256, 256).contiguous()
    ee = torch.arange(256, dtype=torch.int32).to(torch.uint8).reshape(1, -1).expand(256, 256).contiguous()
    exact = dequantize_mxint8(mm.reshape(-1, 1), ee.reshape(-1, 1), 1).reshape(256, 256)
    d = sheet_decode(mm, ee)
    domain = (mm != -128) & (ee >= 1) & (ee <= 254)
    bad = _differs(d["y"], exact)
    always_sub = (d["out_value"].float() - d["bias_value"].float()).to(torch.bfloat16)
    return {
        "pairs": mm.numel(), "domain_pairs": int(domain.sum()), "sheet_wrong_in_domain": int((bad & domain).sum()),
        "sheet_wrong_E0": int((bad & (ee == 0)).sum()),
        "sheet_inf_E255": int(torch.isinf(d["y"].float())[ee == 255].sum()),
        "sheet_nan_E255": int(torch.isnan(d["y"].float())[ee == 255].sum()),
        "sheet_wrong_m_minus128": int((bad & (mm == -128) & (ee > 0) & (ee < 255)).sum()),
        "without_bias_wrong": int((_differs(d["out_value"], exact) & domain).sum()),
        "always_subtract_wrong": int((_differs(always_sub, exact) & domain).sum()),
        "patched_wrong": int(_differs(sheet_decode(mm, ee, patched=True)["y"], exact).sum()),
        "kernel_wrong_all_pairs": (None if kernel is None else
                                   int(_differs(kernel(mm.reshape(-1, 1), ee.reshape(-1, 1)).reshape(256, 256),
                                                exact).sum())),
        "table_exponent": table_exponent, "table": decode_bits_table(TABLE_MANTISSAS, table_exponent),
    }


def format_numbers(group_size: int, seed: int, table_exponent: int = 127, kernel=None) -> dict:
    """Everything answers 3a and 3b quote, from a seeded 768 x 3072 Gaussian weight (std 0.02)."""
    torch.manual_seed(seed)
    weight = torch.randn(768, 3072) * 0.02
    x = torch.randn(3072)
    return {"rules": rule_rows(), "errors": error_rows(weight), "dot": group_dot(weight[0], x, group_size),
            "decode": decode_check(kernel, table_exponent)}
