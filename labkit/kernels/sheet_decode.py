"""The sheet's MXINT8 decode by bit assembly, element by element (the Lab 4 notebook's table, question 3b),
as the CUDA kernel assembles bf16 bits; the exact values it is held against come from the reference in
``labkit.quant.formats.mxint``."""
from __future__ import annotations

import torch

from ..quant.formats.mxint import NAN_EXPONENT, dequantize_mxint8


def _bf16_from_bits(bits: torch.Tensor) -> torch.Tensor:
    """bf16 tensor whose bit patterns are ``bits`` (int32 holding 0..0xFFFF)."""
    b = bits.to(torch.int32) & 0xFFFF
    return torch.where(b >= 0x8000, b - 0x10000, b).to(torch.int16).view(torch.bfloat16)


def bits_of(values: torch.Tensor) -> torch.Tensor:
    """The 16-bit patterns (int32, 0..0xFFFF) of a bf16 tensor."""
    return values.to(torch.bfloat16).contiguous().view(torch.int16).to(torch.int32) & 0xFFFF


def sheet_decode(mantissa: torch.Tensor, exponent: torch.Tensor, patched: bool = False) -> dict:
    """The sheet's bit assembly, vectorised; returns every intermediate (int32 bit fields, bf16 values).

    ``mantissa`` int8 and ``exponent`` uint8 broadcast against each other. ``patched=True`` adds the three
    cases the assembly gets wrong (E = 0, E = 255, m = -128) and writes subnormal results directly, as the
    CUDA kernel does.
    """
    x = mantissa.to(torch.int32)
    e = exponent.to(torch.int32)
    a = x.abs()                                   # |m| in 0..128
    sign = (x & 0x80) << 8                        # bit 7 of the byte -> bf16 bit 15
    exp = e << 7                                  # E -> bf16 exponent field, bits 14..7
    frac = (a & 0x3F) << 1                        # the low 6 bits of |m| -> bf16 fraction bits 6..1
    out = sign | exp | frac                       # +-2^(E-127) * (1 + frac6/64)
    bias = (sign | exp) + torch.zeros_like(out)   # +-2^(E-127), the implicit leading 1 alone
    dont_need_abs = (a & 0x40) != 0               # bit 6 of |m| set: the leading 1 is real
    out_v, bias_v = _bf16_from_bits(out), _bf16_from_bits(bias)
    y = torch.where(dont_need_abs, out_v, (out_v.float() - bias_v.float()).to(torch.bfloat16))
    if patched:
        y_bits = bits_of(y)
        # subnormal results written directly (the kernel never computes a float subnormal)
        tiny = ~dont_need_abs & (e < 7) & ((a << e.clamp(max=7)) < 128)
        y_bits = torch.where(tiny, sign | (a << e.clamp(max=7)), y_bits)
        y_bits = torch.where(e == 0, sign | a, torch.where(a == 128, sign | ((e + 1) << 7), y_bits))
        y_bits = torch.where(e == NAN_EXPONENT, 0x7FC0, y_bits)
        y = _bf16_from_bits(y_bits)
    return {"sign": sign, "exp": exp, "frac": frac, "out": out, "bias": bias,
            "dont_need_abs": dont_need_abs, "out_value": out_v, "bias_value": bias_v, "y": y}


def decode_bits_table(mantissas, exponent: int) -> list[dict]:
    """One row per mantissa: the sheet's fields, ``y``, the exact value, and what happens without
    ``dont_need_abs`` (always subtract ``bias``) or without ``bias`` (never subtract)."""
    if not 0 <= int(exponent) <= 255:
        raise ValueError(f"exponent={exponent}: allowed values are 0..255")
    m = torch.as_tensor(list(mantissas), dtype=torch.int64)
    if m.numel() and (m.min() < -128 or m.max() > 127):
        raise ValueError("mantissas must lie in -128..127 (int8)")
    m = m.to(torch.int8)
    e = torch.full_like(m, int(exponent), dtype=torch.uint8)
    d = sheet_decode(m, e)
    exact = dequantize_mxint8(m.reshape(-1, 1), e.reshape(-1, 1), 1, dtype=torch.float32).reshape(-1)
    always_subtract = (d["out_value"].float() - d["bias_value"].float()).to(torch.bfloat16)
    rows = []
    for i in range(m.numel()):
        mi = int(m[i])
        rows.append({
            "m": mi, "byte": f"{mi & 0xFF:08b}", "|m|": abs(mi),
            "sign": f"0x{int(d['sign'][i]):04X}", "exp": f"0x{int(d['exp'][i]):04X}",
            "frac": f"{int(d['frac'][i]):07b}", "out": f"0x{int(d['out'][i]):04X}",
            "out value": float(d["out_value"][i]), "bias value": float(d["bias_value"][i]),
            "dont_need_abs": bool(d["dont_need_abs"][i]), "y": float(d["y"][i]),
            "exact": float(exact[i]), "y == exact": bool(float(d["y"][i]) == float(exact[i])),
            "without bias": float(d["out_value"][i]), "always subtract": float(always_subtract[i]),
        })
    return rows
