"""``mxint8_linear``: ``y = x @ dequant(W)^T (+ bias)`` with W packed as MXINT8, as the torch custom op
``labkit::mxint8_linear(x, mantissa, exponent, bias, group_size)``.

W is stored as ``MXINT8Linear`` stores it: ``mantissa`` (N, K) int8 and ``exponent`` (N, K / group_size)
uint8 (or flat), groups along K. The result is in x's dtype, accumulated in fp32:
``F.linear(x, dequantize(W).to(x.dtype), bias.to(x.dtype))`` up to fp32 summation order; the kernel adds
the bias to the fp32 sum before the one rounding to x's dtype. (W is exact in bf16 and fp32; for fp16 x
the kernel never rounds W to fp16, the dequant path does.)

Two paths; ``path_for`` picks per call, ``describe()`` names the one a device gets and why:

- ``triton``: the fused kernel (``fused_triton``): CUDA tensors (sm_80+), Triton importable, x bf16/fp16/fp32,
  group_size a power of two >= 16, at most ``MAX_FUSED_ROWS`` rows (the weight-read-bound regime it is
  written for). With TRITON_INTERPRET=1, CPU tensors take it too, through Triton's interpreter (for tests).
- ``dequant``: dequantize (the CUDA extension or the reference, see ``dequant.py``) then ``F.linear``:
  everything else. ``LABKIT_MXINT8_TRITON=0`` forces it.

``path_counts`` counts the calls per path in this process, so a test or a benchmark can check what ran.
"""
from __future__ import annotations

import collections
import importlib
import os
from typing import Optional

import torch
import torch.nn.functional as F

from . import dequant
from .device import capability
from ..quant.formats.mxint import _check_pair, check_group_size, dequantize_mxint8

FUSED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# The fused kernel serves up to this many rows (benchmarks/mxint8/fused_linear.json has its H100 ratios to cuBLAS
# bf16 per batch and shape); above, cuBLAS on a dequantized copy.
MAX_FUSED_ROWS = 64
path_counts: collections.Counter = collections.Counter()
_TRITON: dict = {}


def _triton_import_error() -> str | None:
    if "error" not in _TRITON:
        try:
            _TRITON["version"] = importlib.import_module("triton").__version__
            _TRITON["error"] = None
        except Exception as err:  # ImportError, or a broken install
            _TRITON["error"] = f"Triton is not importable ({type(err).__name__}: {err}); pip install triton"
    return _TRITON["error"]


def interpreting() -> bool:
    """Whether Triton kernels would run in the interpreter (TRITON_INTERPRET=1)."""
    if _triton_import_error():
        return False
    from triton import knobs

    return bool(knobs.runtime.interpret)


def blocker(device) -> str | None:
    """Why the fused kernel cannot run on ``device`` at all, or None."""
    device = torch.device(device)
    if os.environ.get("LABKIT_MXINT8_TRITON", "auto") == "0":
        return "disabled by LABKIT_MXINT8_TRITON=0"
    error = _triton_import_error()
    if error:
        return error
    if device.type == "cpu":
        return None if interpreting() else ("CPU tensors: the Triton kernel runs on CUDA (TRITON_INTERPRET=1 "
                                            "runs it on CPU in Triton's interpreter, for tests)")
    if device.type != "cuda":
        return f"{device.type} tensors: the Triton kernel runs on CUDA only"
    if not torch.cuda.is_available():
        return "no CUDA: torch.cuda.is_available() is False"
    major, minor = capability(device)
    if major < 8:
        return f"GPU is sm_{major}{minor}: the kernel's bf16 tl.dot needs sm_80 or newer"
    return None


def group_ok(group_size: int) -> bool:
    """The kernel's K tiles hold whole groups (or a group spans whole tiles): a power of two >= 16."""
    return group_size >= 16 and group_size & (group_size - 1) == 0


def path_for(x: torch.Tensor, group_size: int, dtype: torch.dtype | None = None) -> tuple[str, str | None]:
    """("triton" | "dequant", why not triton) for an input ``x`` (..., K) computed in ``dtype`` (x's)."""
    dtype = dtype or x.dtype
    reason = blocker(x.device)
    if reason is None and dtype not in FUSED_DTYPES:
        reason = f"x is {dtype}; the kernel takes {', '.join(str(d) for d in FUSED_DTYPES)}"
    if reason is None and not group_ok(group_size):
        reason = f"group_size={group_size}: the kernel takes powers of two >= 16 (16, 32, 64, 128, ...)"
    rows = x.numel() // x.shape[-1] if x.dim() and x.shape[-1] else 0
    if reason is None and not 0 < rows <= MAX_FUSED_ROWS:
        reason = (f"{rows} rows: the fused kernel is for 1..{MAX_FUSED_ROWS} (above, cuBLAS on a dequantized "
                  "copy; no rows: nothing to launch)")
    return ("dequant", reason) if reason else ("triton", None)


def describe(device="cuda") -> str:
    """One line: which path ``mxint8_linear`` takes on ``device`` and why. Builds nothing."""
    reason = blocker(device)
    if reason:
        return f"MXINT8 linear on {device}: dequantize-then-matmul (reason: {reason})"
    how = "Triton interpreter" if interpreting() else "compiled"
    from . import fused_triton  # triton imports here (blocker said so)

    if fused_triton.PDL_DEFAULT["PDL"] and fused_triton.pdl_blocker(device) is None:
        how += ", programmatic dependent launch"
    return (f"MXINT8 linear on {device}: fused Triton kernel (triton {_TRITON['version']}, {how}) for "
            f"{'/'.join(str(d).replace('torch.', '') for d in FUSED_DTYPES)} inputs of 1..{MAX_FUSED_ROWS} "
            "rows and power-of-two groups >= 16; dequantize-then-matmul otherwise")


def check_inputs(x, mantissa, exponent, bias, group_size) -> torch.Tensor:
    """Validate; returns the exponent as (N, K / group_size)."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got "
                        f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
    if not isinstance(mantissa, torch.Tensor) or mantissa.dim() != 2:
        raise ValueError(f"mantissa must be a 2-D (out_features, in_features) int8 tensor, got "
                         f"{tuple(mantissa.shape) if isinstance(mantissa, torch.Tensor) else type(mantissa).__name__}")
    check_group_size(mantissa.shape, group_size, "mantissa (out_features, in_features)")
    e = _check_pair(mantissa, exponent, group_size)
    N, K = mantissa.shape
    if x.dim() == 0 or x.shape[-1] != K:
        raise ValueError(f"x has shape {tuple(x.shape)}: its last dimension must be in_features={K}")
    if x.device != mantissa.device:
        raise ValueError(f"x is on {x.device} but the weight on {mantissa.device}")
    if bias is not None and (not bias.is_floating_point() or tuple(bias.shape) != (N,) or bias.device != x.device):
        raise ValueError(f"bias must be a floating-point ({N},) tensor on {x.device}, got {bias.dtype} "
                         f"{tuple(bias.shape)} on {bias.device}")
    return e.reshape(N, K // group_size)


def _weight(mantissa, exponent, group_size, dtype) -> torch.Tensor:
    """The dense weight in ``dtype`` (exact in bf16/fp32; one rounding for fp16)."""
    if mantissa.is_cuda:  # the CUDA extension where it runs, else the reference (dequant.py warns)
        return dequant.dequantize(mantissa, exponent, group_size).to(dtype)
    return dequantize_mxint8(mantissa, exponent, group_size, dtype=dtype)


def _dequant_linear(x, mantissa, e2, bias, group_size):
    w = _weight(mantissa, e2, group_size, x.dtype)
    return F.linear(x, w, bias.to(x.dtype) if bias is not None else None)


@torch.library.custom_op("labkit::mxint8_linear", mutates_args=())
def _mxint8_linear(x: torch.Tensor, mantissa: torch.Tensor, exponent: torch.Tensor, bias: Optional[torch.Tensor],
                   group_size: int) -> torch.Tensor:
    return _forward(x, mantissa, check_inputs(x, mantissa, exponent, bias, group_size), bias, group_size)


def _forward(x, mantissa, e2, bias, group_size):
    """The op's body, on checked inputs."""
    path, _ = path_for(x, group_size)
    path_counts[path] += 1
    if path == "dequant":
        return _dequant_linear(x, mantissa, e2, bias, group_size)
    from . import fused_triton

    N, K = mantissa.shape
    bias = bias.to(x.dtype) if bias is not None else None  # as the dequant path uses it
    y = fused_triton.launch(x.reshape(-1, K), mantissa, e2, bias, group_size)
    return y.reshape(*x.shape[:-1], N)


@_mxint8_linear.register_fake
def _(x, mantissa, exponent, bias, group_size):
    torch._check(mantissa.dim() == 2, lambda: "mantissa must be 2-D (out_features, in_features)")
    torch._check(x.shape[-1] == mantissa.shape[1], lambda: "x's last dimension must be in_features")
    return x.new_empty((*x.shape[:-1], mantissa.shape[0]))


def _setup_context(ctx, inputs, output):
    x, mantissa, exponent, bias, group_size = inputs
    ctx.save_for_backward(mantissa, exponent)
    ctx.group_size, ctx.x_dtype = group_size, x.dtype
    ctx.bias_dtype = bias.dtype if bias is not None else None


def _backward(ctx, grad):
    mantissa, exponent = ctx.saved_tensors
    grad_x = grad_b = None
    if ctx.needs_input_grad[0]:  # dy @ W, with W as the forward saw it (x's dtype)
        grad_x = torch.matmul(grad.to(ctx.x_dtype), _weight(mantissa, exponent, ctx.group_size, ctx.x_dtype))
    if ctx.needs_input_grad[3]:
        grad_b = grad.reshape(-1, grad.shape[-1]).sum(0).to(ctx.bias_dtype)
    return grad_x, None, None, grad_b, None


_mxint8_linear.register_autograd(_backward, setup_context=_setup_context)


def mxint8_linear(x: torch.Tensor, mantissa: torch.Tensor, exponent: torch.Tensor, group_size: int,
                  bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ dequant(mantissa, exponent)^T + bias`` in x's dtype (fp32 accumulation); see the module doc."""
    e2 = check_inputs(x, mantissa, exponent, bias, group_size)  # clear errors before the dispatcher
    grad = torch.is_grad_enabled() and (x.requires_grad or (bias is not None and bias.requires_grad))
    if grad or torch.compiler.is_compiling():  # autograd and tracing need the registered op
        return torch.ops.labkit.mxint8_linear(x, mantissa, exponent, bias, group_size)
    # inference: the same body without the custom-op dispatcher, whose Python cost per call exceeded the
    # kernel's GPU time at batch 1 on an H100 (eager 125 us against 10 us of GPU time at 4096 x 4096)
    return _forward(x, mantissa, e2, bias, group_size)
