"""MXINT8 in pure PyTorch: quantize, dequantize, fake-quantize, and the sheet's bit-level decode.

The format (Lab 4): groups of ``group_size`` consecutive elements along the last dimension share one
uint8 exponent ``E`` (bias 127); each element keeps an int8 mantissa ``m`` in [-127, 127]; the value is
``m * 2**(E - 127) / 64``. 8 + 8/group_size bits per element (8.25 for groups of 32).

Definitions this module fixes (the CUDA kernel agrees bit for bit; tests/test_mxint8.py checks):

- ``E`` is the float32 exponent field of the group's largest magnitude: ``floor(log2(amax)) + 127`` for a
  normal ``amax``; 0 for an all-zero group or a subnormal ``amax`` (scale 2**-127, the smallest); 255 when
  the group holds inf or NaN (the OCP MX spec's NaN scale; mantissas then 0). Inputs are converted to
  float32 first, so float64 magnitudes beyond float32's range count as inf.
- ``m = sign(w) * clamp(round(|w| * 2**(133 - E)), 0, 127)`` with ``torch.round`` (half to even),
  computed in float64, where scaling by a power of two is exact.
- Decoding is exact: ``m * 2**(E - 133)`` is representable in bf16 for every byte pair (E = 0 lands on
  bf16 subnormals), except ``m = -128, E = 254`` (-2**128, rounds to -inf) and ``E = 255`` (NaN).
"""
from __future__ import annotations

import torch

MANTISSA_MAX = 127
EXPONENT_BIAS = 127
NAN_EXPONENT = 255


def _divisors(n: int, limit: int = 12) -> str:
    divs = [d for d in range(1, n + 1) if n % d == 0]
    return ", ".join(map(str, divs[:limit])) + (", ..." if len(divs) > limit else "")


def check_group_size(shape, group_size, name: str = "w") -> int:
    """``group_size`` as an int after checking it divides the last dimension of ``shape``."""
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size={group_size!r}: must be a positive int dividing the last dimension of {name}")
    if len(shape) == 0:
        raise ValueError(f"{name} is a scalar; MXINT8 groups run along the last dimension, so it needs one")
    last = shape[-1]
    if last % group_size:
        raise ValueError(f"group_size={group_size} does not divide the last dimension of {name} "
                         f"(shape {tuple(shape)}); allowed values: divisors of {last}: {_divisors(last)}")
    return group_size


def exponent_shape(shape, group_size: int) -> tuple:
    """Shape of the exponent tensor for mantissas of ``shape``: one exponent per group."""
    return (*shape[:-1], shape[-1] // group_size)


def quantize_mxint8(w: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 mantissas (``w``'s shape) and uint8 exponents (``(*w.shape[:-1], K // group_size)``)."""
    if not isinstance(w, torch.Tensor) or not w.is_floating_point():
        raise TypeError(f"w must be a floating-point tensor, got {type(w).__name__}"
                        + (f" of dtype {w.dtype}" if isinstance(w, torch.Tensor) else ""))
    check_group_size(w.shape, group_size)
    shape = w.shape
    groups = w.detach().to(torch.float32).reshape(*shape[:-1], shape[-1] // group_size, group_size)
    amax = groups.abs().amax(dim=-1)                                   # NaN propagates; inf stays inf
    exponent = ((amax.contiguous().view(torch.int32) >> 23) & 0xFF)   # float32 exponent field
    # |w| / 2**(E-127) * 64 = |w| * 2**(133 - E); 2**(133 - E) built from float64 bits (exact, any E).
    scale = ((1023 + 133 - exponent.to(torch.int64)) << 52).view(torch.float64)
    mag = torch.round(groups.abs().to(torch.float64) * scale.unsqueeze(-1)).clamp_(0, MANTISSA_MAX)
    mantissa = torch.where(groups < 0, -mag, mag)
    mantissa = torch.where((exponent == NAN_EXPONENT).unsqueeze(-1), 0.0, mantissa)
    return mantissa.to(torch.int8).reshape(shape), exponent.to(torch.uint8)


def _check_pair(mantissa: torch.Tensor, exponent: torch.Tensor, group_size: int) -> torch.Tensor:
    """Validate a (mantissa, exponent) pair; returns the exponent flattened to one per group."""
    if not isinstance(mantissa, torch.Tensor) or mantissa.dtype != torch.int8:
        raise TypeError(f"mantissa must be a torch.int8 tensor, got "
                        f"{mantissa.dtype if isinstance(mantissa, torch.Tensor) else type(mantissa).__name__}")
    if not isinstance(exponent, torch.Tensor) or exponent.dtype != torch.uint8:
        raise TypeError(f"exponent must be a torch.uint8 tensor, got "
                        f"{exponent.dtype if isinstance(exponent, torch.Tensor) else type(exponent).__name__}")
    check_group_size(mantissa.shape, group_size, "mantissa")
    if mantissa.device != exponent.device:
        raise ValueError(f"mantissa is on {mantissa.device} but exponent on {exponent.device}")
    expected = exponent_shape(mantissa.shape, group_size)
    n_groups = mantissa.numel() // group_size
    if tuple(exponent.shape) != expected and tuple(exponent.shape) != (n_groups,):
        raise ValueError(f"exponent shape {tuple(exponent.shape)} does not match mantissa shape "
                         f"{tuple(mantissa.shape)} with group_size={group_size}; expected {expected} "
                         f"(or flat ({n_groups},))")
    return exponent.reshape(-1)


def dequantize_groups(m_groups: torch.Tensor, e_groups: torch.Tensor) -> torch.Tensor:
    """float32 values of ``m_groups`` (G, group_size) int8 with ``e_groups`` (G,) uint8: the formula alone.

    Plain tensor code (no checks), the version that eager PyTorch and torch.compile run in the benchmark.
    """
    e = e_groups.to(torch.int32)
    # 2**(E-127) as float32 bits; E = 0 means the same scale as the bf16 subnormal range, 2**-127.
    scale = torch.where(e == 0, 1 << 22, e << 23).view(torch.float32)
    values = m_groups.to(torch.float32) * (1 / 64) * scale.unsqueeze(-1)   # exact: no rounding anywhere
    return torch.where((e == NAN_EXPONENT).unsqueeze(-1), float("nan"), values)


def dequantize_mxint8(mantissa: torch.Tensor, exponent: torch.Tensor, group_size: int,
                      dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """``mantissa * 2**(exponent - 127) / 64`` in ``dtype`` (exact in bf16 and float32), ``mantissa``'s shape.

    ``exponent`` is ``(*mantissa.shape[:-1], K // group_size)`` as ``quantize_mxint8`` returns it, or flat.
    """
    e = _check_pair(mantissa, exponent, group_size)
    values = dequantize_groups(mantissa.reshape(-1, group_size), e).to(dtype)
    # One NaN bit pattern (0x7FC0 in bf16) whatever the conversion kernels do with NaN payloads/signs.
    nan = torch.full((), float("nan"), dtype=dtype, device=values.device)
    values = torch.where((e == NAN_EXPONENT).unsqueeze(-1), nan, values)
    return values.reshape(mantissa.shape)


class _FakeQuantize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group_size):
        mantissa, exponent = quantize_mxint8(x, group_size)
        return dequantize_mxint8(mantissa, exponent, group_size, dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad, None  # straight-through: rounding and clamping pass the gradient unchanged


def fake_quantize_mxint8(x: torch.Tensor, group_size: int) -> torch.Tensor:
    """Quantize to MXINT8 and back, in ``x``'s dtype, with a straight-through gradient.

    The one MXINT8 fake quantizer: ``make_format("mxint8")`` calls it too. STE: the gradient passes
    unchanged everywhere. The shared exponent follows the group max, so the clamp at 127 only catches
    the group max's own rounding (|x| in (127.5, 128) mantissa units, less than half a step off); a
    clipped STE would zero exactly that element's gradient and freeze it in QAT (0.6% of the groups of a
    Gaussian 4096 x 1024 weight, group 32).
    """
    return _FakeQuantize.apply(x, group_size)


# ------------------------------------------------------------------------------------------------
# The sheet's decode by bit assembly, element by element (the notebook's table, question 3b)
# ------------------------------------------------------------------------------------------------

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
