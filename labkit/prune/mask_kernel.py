"""L1 activation pruning: zero the ``k`` smallest ``|x|`` of every row, exactly ``k``, in one Triton pass on a GPU
(``mask_smallest``, ``prune_smallest``) and by NumPy's selection on a CPU (``cpu_keep``, ``prune_smallest_cpu``).

Why: ``torch.topk`` + ``scatter`` (the reference, ``ActivationMask``) took most of a pruned model's GPU time: in a
Lab 2 Task 2 trial on an H100, 10 of an evaluation batch's 15 ms of kernels and 3 of a training step's 10 ms were
topk's radix sorts and gathers (benchmarks/search/task2_trial_profile.json). Here each program holds whole rows
in registers (at most ``MAX_FEATURES``) and finds each row's k-th smallest magnitude by a radix select on the
float's bits: 31 passes of compare-and-count, the threshold built from the top bit down. Entries below it are
zeroed; of those equal to it, the lowest-indexed are zeroed until exactly ``k`` are (``topk`` picks among equal
magnitudes in no documented order; this order is fixed, so a run repeats bit for bit). Magnitudes compare as
fp32 bit patterns (bf16 and fp16 widen exactly), which orders them as numbers, NaN above infinity as topk does.

On a CPU, ``numpy.partition`` finds each row's k-th smallest magnitude (introselect), and the same rule settles ties,
so both devices zero the same entries: on 2 cores, 26 ms for 4096 rows of 1536 at 50% where topk took 92 ms
(benchmarks/prune/activation_mask.json).

The result is ``where(keep, x, 0)``, its gradient ``where(keep, grad, 0)``: the reference's values and gradient
wherever both choose the same entries (always, unless magnitudes tie at the cut). ``LABKIT_PRUNE_KERNEL=0``
runs the reference (``torch.topk`` + ``scatter``) on every device.
"""
from __future__ import annotations

import functools
import os

import numpy as np
import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the reference runs
    triton = None

from ..training.triton_modes import in_mode, interpreter_scalar_compat, interpreting

ENV = "LABKIT_PRUNE_KERNEL"
# in the cache keys of trials that prune activations (labkit.labs.lab2_objectives): the GPU's and the CPU's path
VERSION = "radix-select-1"
CPU_VERSION = "numpy-partition-1"
MAX_FEATURES = 8192  # a row must fit one program's registers
DTYPES = (torch.float32, torch.bfloat16, torch.float16)

_ADD = None  # the kernel's copy names triton's own sum combiner here (see _kernel)


def enabled(env: dict | None = None) -> bool:
    """``LABKIT_PRUNE_KERNEL`` (default on): 1/0; another value is an error naming the allowed ones."""
    value = (os.environ if env is None else env).get(ENV, "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"{ENV}={value!r}: allowed values are 0 (torch.topk, the reference), 1 (the Triton kernel on "
                         "a GPU, NumPy's selection on a CPU)")
    return value == "1"


if triton is not None:
    def _mask_kernel(x_ptr, out_ptr, keep_ptr, R, N, k, BR: tl.constexpr, BN: tl.constexpr):
        """Rows [pid*BR, pid*BR + BR) of x [R, N]: out = x with each row's k smallest |x| zeroed, keep = 1 elsewhere."""
        pid = tl.program_id(0)
        r = pid.to(tl.int64) * BR + tl.arange(0, BR)
        c = tl.arange(0, BN)
        mask = (r < R)[:, None] & (c < N)[None, :]
        at = r[:, None] * N + c[None, :]
        x = tl.load(x_ptr + at, mask=mask, other=0.0)
        # |x| as its fp32 bit pattern without the sign: ordered as the magnitudes; padding above every value
        mag = tl.where(mask, x.to(tl.float32).to(tl.int32, bitcast=True) & 0x7FFFFFFF, 0x7FFFFFFF)
        thr = (r * 0).to(tl.int32)  # not tl.zeros: a jit helper, decorated in the mode triton was imported in
        for b in range(30, -1, -1):  # the largest t with fewer than k magnitudes below it: the k-th smallest
            cand = thr | (1 << b)
            below = tl.reduce((mag < cand[:, None]).to(tl.int32), 1, _ADD)
            thr = tl.where(below < k, cand, thr)
        less = mag < thr[:, None]
        tie = mag == thr[:, None]
        left = k - tl.reduce(less.to(tl.int32), 1, _ADD)  # ties to zero, lowest index first
        rank = tl.associative_scan(tie.to(tl.int32), 1, _ADD)
        keep = ~(less | (tie & (rank <= left[:, None])))
        tl.store(out_ptr + at, tl.where(keep, x, 0.0).to(out_ptr.dtype.element_ty), mask=mask)
        tl.store(keep_ptr + at, keep.to(tl.int8), mask=mask)


@functools.cache
def _kernel(interp: bool):
    interpreter_scalar_compat()
    # triton's own sum combiner: compiled, tl.sum's code; interpreted, recognised and run as numpy's sum and
    # cumsum (a combiner of our own runs element by element there: seconds for a few rows)
    return triton.jit(in_mode(_mask_kernel, {"_ADD": tl.standard._sum_combine}))


def supported(x: torch.Tensor) -> bool:
    """Whether ``x`` takes the kernel: CUDA (or Triton's interpreter), a float dtype, rows that fit, and enabled."""
    return (triton is not None and (x.is_cuda or interpreting()) and x.dtype in DTYPES and x.numel() > 0
            and 0 < x.shape[-1] <= MAX_FEATURES and enabled())


def cpu_supported(x: torch.Tensor) -> bool:
    """Whether ``x`` takes the NumPy path: a CPU float tensor, and enabled."""
    return x.device.type == "cpu" and x.dtype in DTYPES and x.numel() > 0 and enabled()


def cpu_keep(x: torch.Tensor, k: int) -> torch.Tensor:
    """The bool mask of what ``mask_smallest`` keeps, computed on the CPU: each row's k-th smallest magnitude by
    ``numpy.partition``, the entries below it and the lowest-indexed ones equal to it dropped (exactly ``k``)."""
    n = x.shape[-1]
    if not 0 < k < n:
        raise ValueError(f"k={k}: allowed values are 0 < k < {n} (the row length)")
    mag = x.detach().reshape(-1, n).abs()
    mag = mag if mag.dtype == torch.float32 else mag.float()  # bf16 and fp16 widen exactly; NaN sorts last
    thr = torch.from_numpy(np.partition(mag.numpy(), k - 1, axis=-1)[:, k - 1:k])
    drop = mag <= thr
    # rows with magnitudes equal at the cut (lowest index first there); a bool sum as bytes: 10x faster than sum()
    tied = (drop.view(torch.uint8).sum(-1, dtype=torch.int32) != k).nonzero().squeeze(1)
    if len(tied):
        m, t = mag[tied], thr[tied]
        less, tie = m < t, m == t
        drop[tied] = less | (tie & (tie.cumsum(-1) <= k - less.sum(-1, keepdim=True)))
    return ~drop.view(x.shape)


def prune_smallest_cpu(x: torch.Tensor, k: int) -> torch.Tensor:
    """``prune_smallest`` on a CPU tensor: ``where(keep, x, 0)``, whose gradient passes where kept."""
    return torch.where(cpu_keep(x, k), x, 0.0)


def _blocks(n: int) -> tuple[int, int, int]:
    """(rows per program, padded features, warps): about 2048 elements a program."""
    bn = triton.next_power_of_2(n)
    return max(1, 2048 // bn), bn, 4 if bn <= 2048 else 8


def mask_smallest(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(out, keep)``: ``x`` with the ``k`` smallest magnitudes of each last-dim row zeroed (``0 < k < n``), and
    the bool mask of what was kept."""
    n = x.shape[-1]
    if not 0 < k < n:
        raise ValueError(f"k={k}: allowed values are 0 < k < {n} (the row length)")
    x2 = x.detach().reshape(-1, n).contiguous()
    out = torch.empty_like(x2)
    keep = torch.empty(x2.shape, dtype=torch.int8, device=x.device)
    br, bn, warps = _blocks(n)
    _kernel(interpreting())[(triton.cdiv(x2.shape[0], br),)](x2, out, keep, x2.shape[0], n, k, BR=br, BN=bn,
                                                             num_warps=warps)
    return out.view_as(x), keep.view(x.shape).bool()


class _MaskSmallest(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        out, keep = mask_smallest(x, k)
        ctx.save_for_backward(keep)
        return out

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return torch.where(keep, grad, 0.0), None


def prune_smallest(x: torch.Tensor, k: int) -> torch.Tensor:
    """``x`` with each row's ``k`` smallest magnitudes zeroed, differentiable (the gradient passes where kept)."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _MaskSmallest.apply(x, k)
    return mask_smallest(x, k)[0]
