"""What every checked kernel of ``labkit.quant`` shares: the switch that turns them off, the record of those
that fell back, and the bit-for-bit comparison a kernel's first result must pass against its reference.

Below both users, the one-pass fake quantization (``fast``) and the binary formats' sign GEMM
(``sign_matmul``), so the formats (which use the sign GEMM) never reach back up to ``fast``.
"""
from __future__ import annotations

import os

import torch

# LABKIT_TRITON_FAKE_QUANT=0 turns every kernel here off: the reference formulas run (the same values)
TRITON_FAKE_QUANT = os.environ.get("LABKIT_TRITON_FAKE_QUANT", "1") != "0"
FALLBACKS: dict = {}  # what fell back to its reference (a format's description, "sign GEMM (Triton)") -> why


def failed(err: Exception) -> str:
    """Why a kernel (or a compilation) could not be used, in one line."""
    return f"failed to compile ({type(err).__name__}: {str(err).strip().splitlines()[0][:200]})"


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, dtypes and zero signs, NaN where the other is NaN."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    nan = torch.isnan(a)
    # a NaN's sign and payload carry no value (conversions canonicalise them differently): not compared
    return bool(torch.equal(nan, torch.isnan(b)) and torch.equal(torch.where(nan, 0, a), torch.where(nan, 0, b))
                and torch.equal(torch.signbit(a) & ~nan, torch.signbit(b) & ~nan))
