"""Triton kernel of the fused MXINT8 weight-only linear: ``y = x @ dequant(W)^T (+ bias)``, fp32 accumulation.

Small-batch (M = 1..64) inference is weight-read bound, so the work is shaped around streaming W once:

- swapped operands: each program computes ``acc[BLOCK_N, BLOCK_M] = W_tile @ x_tile^T``, so the weight (the
  operand converted in registers) is the dot's left operand and the few rows of x its narrow right one,
  the usual layout for small-M weight-only GEMMs (tl.dot needs every dimension >= 16; rows are padded);
- the scale is applied per group, not per element: the int8 mantissas convert exactly to x's dtype, each
  group's partial dot is multiplied by ``2**(E - 133)`` (exact, a power of two) and added, so
  ``sum_g 2^(E_g-133) * sum_k m_k x_k`` equals ``sum_k (m_k 2^(E_g-133)) x_k``, the dequantized product, with
  one conversion per weight element and no exponent gather; no bf16 copy of W is ever written;
- split-K (grid axis 2) gives enough programs when N / BLOCK_N alone would leave SMs idle; the partial
  sums meet in an fp32 workspace by ``atomic_add`` (so with SPLIT_K > 1 the order of the final additions,
  hence the last bits, can vary run to run).

Requires ``group_size`` a power of two >= 16 (a dot per group); ``fused_linear`` routes other sizes to
dequantize-then-matmul. Imported only where Triton is installed. ``triton.jit`` reads TRITON_INTERPRET
when it decorates, so the kernel is decorated lazily, once per mode (``kernels()``); it calls no @jit
helpers of triton.language, so the interpreter runs it even when triton was imported without the flag.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton import knobs

MAX_BLOCK_M = 64


def _mxint8_linear_kernel(x_ptr, m_ptr, e_ptr, b_ptr, y_ptr, ws_ptr, M, N, K,
                          stride_xm, stride_xk, stride_mn, stride_mk, stride_en, stride_eg,
                          GROUP: tl.constexpr, HAS_BIAS: tl.constexpr, DOT_F32: tl.constexpr,
                          INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr, SUB_K: tl.constexpr):
    pid_n, pid_m, pid_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    n_mask, m_mask = offs_n < N, offs_m < M
    # This split's share of K, in whole BLOCK_K tiles (a split past the end runs no iteration).
    # Builtins only (no tl.cdiv/tl.zeros, which are @jit helpers): see the module doc.
    tiles = ((K + BLOCK_K - 1) // BLOCK_K + SPLIT_K - 1) // SPLIT_K
    k_begin = pid_k * tiles * BLOCK_K
    k_end = tl.minimum(k_begin + tiles * BLOCK_K, K)
    w_rows = m_ptr + offs_n.to(tl.int64)[:, None] * stride_mn    # W tile (BLOCK_N, SUB_K), K contiguous
    x_cols = x_ptr + offs_m.to(tl.int64)[None, :] * stride_xm    # x^T tile (SUB_K, BLOCK_M)
    e_rows = e_ptr + offs_n.to(tl.int64) * stride_en
    acc = tl.full((BLOCK_N, BLOCK_M), 0.0, tl.float32)
    for k0 in range(k_begin, k_end, BLOCK_K):
        for j in tl.static_range(0, BLOCK_K, SUB_K):  # SUB_K = min(BLOCK_K, GROUP): one exponent per sub-tile
            offs_k = k0 + j + tl.arange(0, SUB_K)
            k_mask = offs_k < K
            m = tl.load(w_rows + offs_k[None, :] * stride_mk, mask=n_mask[:, None] & k_mask[None, :], other=0)
            xt = tl.load(x_cols + offs_k[:, None] * stride_xk, mask=k_mask[:, None] & m_mask[None, :], other=0.0)
            # a sub-tile past K (all masked, partial sum 0) reads the row's last exponent: in bounds, and a
            # NaN there (E = 255) makes the row NaN anyway
            group = tl.minimum((k0 + j) // GROUP, K // GROUP - 1)
            e = tl.load(e_rows + group * stride_eg, mask=n_mask, other=127).to(tl.int32)
            # 2**(E-133) from its fp32 bits: normal for E >= 7, subnormal below; shifts kept in 0..31
            bits = tl.where(e >= 7, (tl.maximum(e, 7) - 6) << 23, 1 << (tl.minimum(e, 6) + 16))
            scale = tl.where(e == 255, float("nan"), bits.to(tl.float32, bitcast=True))
            w = m.to(tl.float32)  # |m| <= 127: exact in bf16, fp16 and fp32
            if DOT_F32:  # the interpreter's bf16 dot is wrong; the same exact values go through fp32 there
                part = tl.dot(w, xt.to(tl.float32))
            else:
                part = tl.dot(w.to(xt.dtype), xt, input_precision=INPUT_PRECISION)
            acc += part * scale[:, None]
    if HAS_BIAS:
        b = tl.load(b_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
        acc += b[:, None] * (pid_k == 0).to(tl.float32)  # one split adds it
    out_mask = n_mask[:, None] & m_mask[None, :]
    out = offs_m.to(tl.int64)[None, :] * N + offs_n[:, None]  # y and ws: contiguous (M, N)
    if SPLIT_K == 1:
        tl.store(y_ptr + out, acc.to(y_ptr.dtype.element_ty), mask=out_mask)
    else:
        tl.atomic_add(ws_ptr + out, acc, mask=out_mask)


def _zero_workspace(nargs):
    nargs["ws_ptr"].zero_()


def _config(block_n, block_k, split_k, warps, stages):
    return triton.Config({"BLOCK_N": block_n, "BLOCK_K": block_k, "SPLIT_K": split_k}, num_warps=warps,
                         num_stages=stages, pre_hook=_zero_workspace if split_k > 1 else None)


# For H100/H200 at M <= 64 (weight-read bound): BLOCK_N 64/128 (the MMA's wide side), 8-32 KB of int8 weight
# per tile and stage, split-K for enough programs on 132 SMs. Not yet measured (benchmarks/fused_linear.py).
AUTOTUNE_CONFIGS = [
    _config(bn, bk, sk, w, s)
    for bn, bk, w, s in ((64, 128, 4, 4), (128, 128, 4, 4), (64, 256, 4, 3), (128, 256, 8, 3), (32, 256, 4, 4))
    for sk in (1, 2, 4, 8)
]


def _prune(configs, named_args, **kwargs):
    """Drop configs whose split leaves splits without a K tile, or whose BLOCK_K is far above K."""
    K = named_args["K"]
    kept = [c for c in configs
            if c.kwargs["SPLIT_K"] <= triton.cdiv(K, c.kwargs["BLOCK_K"])
            and c.kwargs["BLOCK_K"] <= max(32, triton.next_power_of_2(K))]
    return kept or configs[:1]


_KERNELS: dict[bool, tuple] = {}


def kernels():
    """(raw jit kernel, autotuned kernel) for the current TRITON_INTERPRET mode."""
    mode = bool(knobs.runtime.interpret)
    if mode not in _KERNELS:
        raw = triton.heuristics({"SUB_K": lambda a: min(a["BLOCK_K"], a["GROUP"])})(triton.jit(_mxint8_linear_kernel))
        tuned = triton.autotune(AUTOTUNE_CONFIGS, key=["N", "K", "GROUP", "BLOCK_M", "HAS_BIAS"],
                                prune_configs_by={"early_config_prune": _prune})(raw)
        _KERNELS[mode] = (raw, tuned)
    return _KERNELS[mode]


def interpreting() -> bool:
    return bool(knobs.runtime.interpret)


def _interpreter_scalar_compat() -> None:
    """Triton 3.6's interpreter turns a scalar into a Python int with ``int(array of shape (1,))``, which
    NumPy >= 2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars"), so ``range()``
    over a program-id-derived bound fails (the GPU image's Triton 3.6 with NumPy 2.5). Triton 3.9 squeezes
    the array first; give older interpreters the same ``__index__``. A no-op where the private hook is gone."""
    from triton.runtime import interpreter as interp

    patch = getattr(interp, "_patch_lang_tensor", None)
    if patch is None or getattr(patch, "labkit_compat", False):
        return

    def patched(tensor, scope):
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    patched.labkit_compat = True
    interp._patch_lang_tensor = patched


def block_m(M: int) -> int:
    """tl.dot needs >= 16 rows; above MAX_BLOCK_M the grid tiles M."""
    return min(MAX_BLOCK_M, max(16, triton.next_power_of_2(M)))


def launch(x2: torch.Tensor, mantissa: torch.Tensor, exponent2: torch.Tensor, bias: torch.Tensor | None,
           group_size: int, config: dict | None = None) -> torch.Tensor:
    """``x2`` (M, K) times dequant(``mantissa`` (N, K), ``exponent2`` (N, K / group_size))^T (+ bias), in x's
    dtype. ``config`` ({BLOCK_N, BLOCK_K, SPLIT_K[, num_warps, num_stages]}) skips autotuning (tests, the
    interpreter, which cannot autotune); inputs are checked by the caller."""
    M, K = x2.shape
    N = mantissa.shape[0]
    y = torch.empty((M, N), dtype=x2.dtype, device=x2.device)
    raw, tuned = kernels()
    interp = interpreting()
    if interp:
        _interpreter_scalar_compat()
    if config is None and interp:
        config = {"BLOCK_N": 32, "BLOCK_K": 32, "SPLIT_K": 1}
    split = 1 if config is None else int(config["SPLIT_K"])
    # fp32 workspace for split-K partial sums; autotune's split configs zero it in their pre_hook
    if config is None:
        ws = torch.empty((M, N), dtype=torch.float32, device=x2.device)
    else:
        ws = (torch.zeros if split > 1 else torch.empty)((M, N) if split > 1 else (1,), dtype=torch.float32,
                                                         device=x2.device)
    # fp32 x: IEEE fp32 products unless torch allows TF32 (as F.linear does); bf16/fp16: Triton's default
    ieee = x2.dtype == torch.float32 and not (x2.is_cuda and torch.backends.cuda.matmul.allow_tf32)
    bm = block_m(M)
    args = (x2, mantissa, exponent2, bias if bias is not None else x2, y, ws, M, N, K,
            x2.stride(0), x2.stride(1), mantissa.stride(0), mantissa.stride(1), exponent2.stride(0),
            exponent2.stride(1))
    meta = dict(GROUP=group_size, HAS_BIAS=bias is not None, DOT_F32=interp and x2.dtype == torch.bfloat16,
                INPUT_PRECISION="ieee" if ieee else "tf32", BLOCK_M=bm)
    if config is None:
        grid = lambda c: (triton.cdiv(N, c["BLOCK_N"]), triton.cdiv(M, bm), c["SPLIT_K"])  # noqa: E731
        tuned[grid](*args, **meta)
        split = tuned.best_config.kwargs["SPLIT_K"]
    else:
        grid = (triton.cdiv(N, config["BLOCK_N"]), triton.cdiv(M, bm), split)
        raw[grid](*args, **meta, BLOCK_N=config["BLOCK_N"], BLOCK_K=config["BLOCK_K"], SPLIT_K=split,
                  num_warps=config.get("num_warps", 4), num_stages=config.get("num_stages", 3))
    if split > 1:
        y.copy_(ws)
    return y
