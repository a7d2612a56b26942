"""``dequantize``: MXINT8 -> bf16 through the CUDA extension where it can run, else the reference, loudly.

``backend="auto"`` uses the extension for CUDA tensors when it is available and the pure-PyTorch
reference otherwise, with a one-time ``MXINT8ReferenceWarning`` naming the reason; ``"cuda"`` insists on
the extension (a clear error where it cannot run); ``"reference"`` always runs the reference.
"""
from __future__ import annotations

import warnings

import torch

from . import extension
from ..quant.formats.mxint import _check_pair, dequantize_mxint8

BACKENDS = ("auto", "cuda", "reference")
IMPLS = {"auto": 0, "vec": 1, "tile": 2}
_warned: set[str] = set()


class MXINT8ReferenceWarning(UserWarning):
    """The pure-PyTorch reference ran because the CUDA extension could not."""


def _warn_reference(reason: str) -> None:
    if reason in _warned:
        return
    _warned.add(reason)
    message = f"labkit MXINT8: dequantizing with the pure-PyTorch reference ({reason})"
    warnings.warn(message, MXINT8ReferenceWarning, stacklevel=3)


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: allowed values are {', '.join(map(repr, BACKENDS))}")
    return backend


def dequantize(mantissa: torch.Tensor, exponent: torch.Tensor, group_size: int, backend: str = "auto",
               impl: str = "auto") -> torch.Tensor:
    """bf16 values of MXINT8 ``mantissa``/``exponent`` (``labkit.quant.formats.mxint``), bit-identical on every path.

    ``impl`` picks the CUDA kernel: ``auto`` (vectorised when the mantissa is 8-byte aligned), ``vec``, or ``tile``
    (the lab's CuTe structure).
    """
    check_backend(backend)
    if impl not in IMPLS:
        raise ValueError(f"impl={impl!r}: allowed values are {', '.join(map(repr, IMPLS))}")
    if backend == "reference":
        return dequantize_mxint8(mantissa, exponent, group_size)
    on_cuda = isinstance(mantissa, torch.Tensor) and mantissa.device.type == "cuda"
    if not on_cuda:
        if backend == "cuda":
            where = mantissa.device if isinstance(mantissa, torch.Tensor) else type(mantissa).__name__
            raise RuntimeError(f"backend='cuda' needs CUDA tensors, got mantissa on {where}; "
                               f"{extension.describe()}")
        # Worth a warning only where a GPU could have run it: on a machine without CUDA the reference is the
        # only path (`labkit ext status` and the Lab 4 notebook say so), and a warning in every notebook
        # that touches MXINT8 would tell the student nothing they can act on.
        if torch.cuda.is_available():
            _warn_reference(f"tensors on {mantissa.device}: the extension runs on CUDA tensors only")
        return dequantize_mxint8(mantissa, exponent, group_size)
    if not extension.load():
        if backend == "cuda":
            raise RuntimeError(f"backend='cuda' but the MXINT8 CUDA extension is unavailable: {extension.reason()}")
        _warn_reference(extension.reason())
        return dequantize_mxint8(mantissa, exponent, group_size)
    e = _check_pair(mantissa, exponent, group_size)  # same checks and messages as the reference
    return torch.ops.labkit_mxint8.dequantize(mantissa.contiguous(), e.contiguous(), group_size, IMPLS[impl])
