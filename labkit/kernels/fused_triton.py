"""Triton kernels of the fused MXINT8 weight-only linear: ``y = x @ dequant(W)^T (+ bias)``, fp32 accumulation.

Small-batch (M = 1..64) inference is weight-read bound: the floor is one pass over the packed weight
(N*K mantissa bytes + N*K/group exponent bytes), so every kernel streams W once and never writes a bf16 copy.
Four kernels, picked per call by ``pick_config`` (measured choices: benchmarks/mxint8/fused_linear_sweep.json
and fused_linear_sweep_tma.json):

- ``gemv`` (one row): each program takes BLOCK_N output features and walks all of K in (NG, GROUP) tiles,
  int8 -> fp32 in registers, products with each row of x summed per group, then scaled by the group's
  ``2**(E-133)`` and summed. No tensor cores, no shared-memory staging of W, no padding of x to 16 rows.
- ``dq`` (2..64 rows): each (BLOCK_N, BLOCK_K) tile of W is decoded in registers to ``m * 2**(E-133)``
  (exact in bf16 and fp32) and multiplied whole by tl.dot with x as the MMA's row side; K can be
  split across programs (``SPLIT_K``), the partial tiles meeting in one kernel (see ``_dq_kernel``).
- ``tma`` (bf16 x, sm_90+, 33-64 rows where N is small): the dq decomposition with W's and x's tiles fetched by
  tensor descriptors, exponents one tile ahead and the scale applied in bf16 (see ``_tma_kernel``).
- ``gemv_split`` (one row; fused_gemv.py): the gemv decomposition with split-K, per-group sums kept until after
  the loop, and (X_PER_ROW, E_ASM) no shared-memory layout conversion in it; picked at one row only with
  ``ONE_ROW_SPLIT``.

All four give the dequantized product up to fp32 summation order; the split-K order is fixed, so every run gives
the same bits. Requires ``group_size`` a power of two >= 16; ``fused_linear`` routes other sizes to
dequantize-then-matmul. Imported only where Triton is installed. ``triton.jit`` reads
TRITON_INTERPRET when it decorates, and triton.language's own reductions are @jit helpers decorated when
triton was imported, so each mode gets its own copy of the kernels (``kernels()``) whose reduction helper
was decorated in that mode: the interpreter runs them even when triton was imported without the flag.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from ..training.triton_modes import in_mode as _in_mode, interpreter_scalar_compat
from . import fused_gemv
from .device import capability
from ..training.triton_modes import interpreting  # noqa: F401 - interpreting: this module's API

MAX_BLOCK_M = 64
KINDS = ("gemv", "dq", "tma", "gemv_split")  # gemv_split: fused_gemv.py
# One row: True, the gemv_split kernel at fused_gemv.ONE_ROW (faster than the gemv kernel on an H100 in every
# shape of both runs in benchmarks/mxint8/fused_linear_m1.json); False, the gemv kernel.
ONE_ROW_SPLIT = True
GEMV_MAX_ROWS = 8  # the gemv kernel unrolls one pass of its tile per row: above this, only the dq kernel
# Programmatic dependent launch for the picked launches on sm_90+ (see _pdl_enter); a config's own keys win. On
# an H100 (benchmarks/mxint8/fused_linear_pdl.json) the trigger after the main loop without prefetch was never
# slower than no PDL beyond the spread (4096x4096: 4 rows 11.0 -> 10.3 us); the trigger at the start and the L2
# prefetch each lost elsewhere (14336x4096 at 16 rows 26.8 -> 34.9 us: early programs of the next grid crowd SMs).
PDL_DEFAULT = {"PDL": True, "PREFETCH": 0, "TRIGGER": "end"}
# Where streaming W is nearly all of the work (one row; 2-4 rows with K > 4096) the next grid launching at once and
# fetching its first KB of each W row into L2 before it waits overlaps one call's tail with the next one's start:
# on an H100 (benchmarks/mxint8/fused_linear_m1_pdl.json, fused_linear_sweep_pdl.json) one row 22.5 -> 21.1 us at
# 14336x4096, 80.8 -> 80.3 at 28672x8192, 8.1 -> 7.5 at 4096x4096; 4 rows at 28672x8192 96.0 -> 87.7 us. At 16
# rows it lost (94.4 -> 97.5 us), as did 4 rows at 14336x4096 (24.7 us, no gain for any PDL setting).
EARLY_PREFETCH = {"TRIGGER": "start", "PREFETCH": 1024}
EARLY_PREFETCH_ROWS = 4


def _add(a, b):
    return a + b


_ADD = None  # the kernels' copies name a jit-decorated _add here (see _kernels)


def _i8_to_f32(m):
    """int8 -> fp32 without a (quarter-rate) int-to-float conversion: (m + 128) placed in the mantissa of
    2^23, then 2^23 + 128 subtracted; exact for every int8 (full-rate integer and fp32 adds)."""
    return (m.to(tl.int32) + 0x4B000080).to(tl.float32, bitcast=True) - 8388736.0


def _i8x4_to_f32_asm(m):
    """The same decode as ``_i8_to_f32`` in PTX, four bytes per 32-bit register: one XOR flips the four sign
    bits (m + 128 as unsigned bytes) and one PRMT per byte places it under 0x4B00_00xx, i.e. 2^23 + m + 128;
    an fp32 add of -(2^23 + 128) then leaves m exactly. Not in the interpreter (no inline asm there)."""
    bits = tl.inline_asm_elementwise(
        asm="""{
        .reg .b32 t;
        xor.b32 t, $4, 0x80808080;
        prmt.b32 $0, t, 0x4B000000, 0x7440;
        prmt.b32 $1, t, 0x4B000000, 0x7441;
        prmt.b32 $2, t, 0x4B000000, 0x7442;
        prmt.b32 $3, t, 0x4B000000, 0x7443;
        }""",
        constraints="=r,=r,=r,=r,r", args=[m], dtype=tl.float32, is_pure=True, pack=4)
    return bits - 8388736.0


def _prefetch_l2(ptrs):
    """One L2 prefetch per pointer (its 128-byte line); nothing is returned or waited for."""
    tl.inline_asm_elementwise(asm="prefetch.global.L2 [$1];\n mov.u32 $0, 0;", constraints="=r,l", args=[ptrs],
                              dtype=tl.int32, is_pure=False, pack=1)


def _pdl_enter(rows, k_begin, k_end, PDL: tl.constexpr, PREFETCH: tl.constexpr, EARLY: tl.constexpr):
    """Programmatic dependent launch (PDL, sm_90+; ``launch`` sets the launch attribute with ``PDL``): this
    program may start while the previous kernel on the stream is still running. Only the weight is read before
    ``gdc_wait`` (no kernel of a model writes it): the first ``PREFETCH`` bytes of each of this program's W
    ``rows`` (pointers, (BLOCK_N, 1)) from ``k_begin`` go to L2. Then wait for the previous kernel's writes (x,
    and the memory y may reuse). ``EARLY``: let the next kernel launch now, else at ``_pdl_exit``. A no-op
    without ``PDL``."""
    if PDL:
        if PREFETCH > 0:
            lines = tl.minimum(k_begin + tl.arange(0, PREFETCH // 128)[None, :] * 128, k_end - 1)
            _prefetch_l2(rows + lines)
        tl.extra.cuda.gdc_wait()
        if EARLY:
            tl.extra.cuda.gdc_launch_dependents()


def _pdl_exit(PDL: tl.constexpr, EARLY: tl.constexpr):
    """After the main loop: the next kernel may launch (its programs take the slots this grid's leave)."""
    if PDL and not EARLY:
        tl.extra.cuda.gdc_launch_dependents()


def _scale(e):
    """2**(E - 133) as fp32 (normal for E >= 7, subnormal below; shifts kept in 0..31); NaN for E = 255."""
    bits = tl.where(e >= 7, (tl.maximum(e, 7) - 6) << 23, 1 << (tl.minimum(e, 6) + 16))
    return tl.where(e == 255, float("nan"), bits.to(tl.float32, bitcast=True))


def _exponents(e_rows, k0, stride_eg, K, GROUP: tl.constexpr, NG: tl.constexpr, MASKED: tl.constexpr):
    """The (rows, NG) exponents of the K tile starting at ``k0`` as int32; groups past K read 127."""
    g_idx = k0 // GROUP + tl.arange(0, NG)
    if MASKED:
        return tl.load(e_rows + g_idx[None, :] * stride_eg, mask=(g_idx < K // GROUP)[None, :], other=127).to(tl.int32)
    return tl.load(e_rows + g_idx[None, :] * stride_eg).to(tl.int32)


def _scaled(w, e, BLOCK_N: tl.constexpr, NG: tl.constexpr, BLOCK_K: tl.constexpr, BF16: tl.constexpr):
    """The decoded (BLOCK_N, BLOCK_K) mantissas ``w`` (fp32) times each group's ``2**(E-133)``. ``BF16``: rounded to
    bf16 first (exact: |m| <= 127) and scaled there, two elements per instruction (exact too: a power of two,
    bf16 subnormals down to 2**-133 included); else scaled in fp32."""
    if BF16:
        w3 = tl.reshape(w.to(tl.bfloat16), (BLOCK_N, NG, BLOCK_K // NG)) * _scale(e).to(tl.bfloat16)[:, :, None]
    else:
        w3 = tl.reshape(w, (BLOCK_N, NG, BLOCK_K // NG)) * _scale(e)[:, :, None]
    return tl.reshape(w3, (BLOCK_N, BLOCK_K))


def _gemv_kernel(x_ptr, m_ptr, e_ptr, b_ptr, y_ptr, M, N, K,
                 stride_xm, stride_xk, stride_mn, stride_mk, stride_en, stride_eg,
                 GROUP: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, PDL: tl.constexpr, PREFETCH: tl.constexpr, EARLY: tl.constexpr):
    pid_n, pid_m = tl.program_id(0), tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    _pdl_enter(m_ptr + tl.minimum(offs_n, N - 1).to(tl.int64)[:, None] * stride_mn, 0, K, PDL, PREFETCH, EARLY)
    offs_g = tl.arange(0, BLOCK_K // GROUP)  # groups per tile (BLOCK_K is a multiple of GROUP)
    kk = offs_g[:, None] * GROUP + tl.arange(0, GROUP)[None, :]  # (NG, GROUP): k within a tile, group-major
    w_tile = m_ptr + offs_n.to(tl.int64)[:, None, None] * stride_mn + kk[None, :, :] * stride_mk
    e_tile = e_ptr + offs_n.to(tl.int64)[:, None] * stride_en + offs_g[None, :] * stride_eg
    row0 = pid_m * BLOCK_M
    cols = tl.arange(0, BLOCK_M)
    n_groups = K // GROUP
    acc = tl.full((BLOCK_N, BLOCK_M), 0.0, tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_mask = (k0 + kk) < K  # K is a multiple of GROUP: whole groups are in or out
        m = tl.load(w_tile + k0 * stride_mk, mask=n_mask[:, None, None] & k_mask[None, :, :], other=0)
        g0 = k0 // GROUP
        e = tl.load(e_tile + g0 * stride_eg, mask=n_mask[:, None] & ((g0 + offs_g) < n_groups)[None, :],
                    other=127).to(tl.int32)
        scale = _scale(e)  # (BLOCK_N, NG); a masked-out group has m = 0 and a finite scale
        w = _i8_to_f32(m)
        for r in tl.static_range(BLOCK_M):
            row = row0 + r
            xr = tl.load(x_ptr + row.to(tl.int64) * stride_xm + (k0 + kk) * stride_xk,
                         mask=k_mask & ((kk * 0 + row) < M), other=0.0).to(tl.float32)
            part = tl.reduce(w * xr[None, :, :], 2, _ADD)  # (BLOCK_N, NG): one group's sum per feature
            s = tl.reduce(part * scale, 1, _ADD)  # (BLOCK_N,)
            acc += tl.where(cols[None, :] == r, s[:, None], 0.0)
    _pdl_exit(PDL, EARLY)
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)[:, None]
    offs_m = row0 + cols
    out = offs_m.to(tl.int64)[None, :] * N + offs_n[:, None]  # y: contiguous (M, N)
    tl.store(y_ptr + out, acc.to(y_ptr.dtype.element_ty), mask=n_mask[:, None] & (offs_m < M)[None, :])


def _dq_kernel(x_ptr, m_ptr, e_ptr, b_ptr, y_ptr, ws_ptr, count_ptr, M, N, K,
               stride_xm, stride_xk, stride_mn, stride_mk, stride_en, stride_eg,
               GROUP: tl.constexpr, HAS_BIAS: tl.constexpr, W_BF16: tl.constexpr, DOT_F32: tl.constexpr,
               INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr, ASM: tl.constexpr,
               EVEN_K: tl.constexpr, X_ROWS: tl.constexpr, E_AHEAD: tl.constexpr, BF16_SCALE: tl.constexpr,
               PDL: tl.constexpr, PREFETCH: tl.constexpr, EARLY: tl.constexpr):
    """One dot per BLOCK_K tile: the W tile is decoded to ``m * 2**(E-133)`` in registers (exact in bf16 and
    fp32: 7 magnitude bits, and bf16 keeps fp32's exponent range, subnormals included) and multiplied whole,
    x the MMA's row side (16+ rows) and W^T its column side: acc is (BLOCK_M, BLOCK_N). (One K=GROUP dot
    and an accumulator rescale per group ran 1.3-2.4x slower; W as the row side, wgmma for 64 rows, lost
    every case: the dq kernel's steps in benchmarks/mxint8/MXINT8_NOTES.md.)

    Split-K: each split stores its fp32 partial tile in its own slice of ``ws`` and bumps the tile's counter
    (zeroed per call); the split that arrives last sums the slices in split order (the same bits every run)
    and writes y: no zeroed fp32 workspace, no atomics on data, no copy-out kernel."""
    pid_n, pid_m, pid_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    tiles = ((K + BLOCK_K - 1) // BLOCK_K + SPLIT_K - 1) // SPLIT_K
    k_begin = pid_k * tiles * BLOCK_K
    k_end = tl.minimum(k_begin + tiles * BLOCK_K, K)
    offs_k = tl.arange(0, BLOCK_K)
    NG: tl.constexpr = (BLOCK_K + GROUP - 1) // GROUP  # groups per tile (1 when a group spans tiles)
    # Rows past N or M re-read the last row instead of being masked: the loads need no per-element
    # predicate (a row mask costs instructions in every tile), and the store drops those rows.
    rows_n = tl.minimum(offs_n, N - 1).to(tl.int64)
    # Fewer rows than the MMA's 16 (X_ROWS < BLOCK_M): load only those and repeat them in registers. Loading
    # the padded rows (masked or re-read) made every program fetch the same few lines of x from L2 at once
    # (at 14336x4096, 4 rows took 1.5x the time of 16 on the H100: benchmarks/mxint8/MXINT8_NOTES.md).
    rows_m = tl.minimum(pid_m * BLOCK_M + tl.arange(0, X_ROWS), M - 1).to(tl.int64)
    w_rows = m_ptr + rows_n[:, None] * stride_mn
    x_cols = x_ptr + rows_m[None, :] * stride_xm
    e_rows = e_ptr + rows_n[:, None] * stride_en
    _pdl_enter(w_rows, k_begin, k_end, PDL, PREFETCH, EARLY)  # unit K stride: the launch sends others to no PREFETCH
    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
    # Exponents one tile ahead (E_AHEAD): with fewer than 4 bytes per row and tile the pipeliner cannot make
    # them an async copy, so each tile's exponent load was a full memory round trip the tile waited on.
    if E_AHEAD:
        e_next = _exponents(e_rows, k_begin, stride_eg, K, GROUP, NG, True)
    for k0 in range(k_begin, k_end, BLOCK_K):
        if E_AHEAD:
            e = e_next
            e_next = _exponents(e_rows, k0 + BLOCK_K, stride_eg, K, GROUP, NG, True)
        else:
            e = _exponents(e_rows, k0, stride_eg, K, GROUP, NG, not EVEN_K)
        kk = k0 + offs_k
        k_mask = kk < K  # K is a multiple of GROUP: whole groups are in or out
        if EVEN_K:  # K % BLOCK_K == 0: every tile is whole
            m = tl.load(w_rows + kk[None, :] * stride_mk)
        else:
            m = tl.load(w_rows + kk[None, :] * stride_mk, mask=k_mask[None, :], other=0)
        if ASM:
            w = _i8x4_to_f32_asm(m)
        else:
            w = _i8_to_f32(m)
        # one exponent per (row, group), broadcast over the group (a per-element gather of the exponents
        # measured 3-10x slower: benchmarks/mxint8/MXINT8_NOTES.md)
        w = _scaled(w, e, BLOCK_N, NG, BLOCK_K, W_BF16 and BF16_SCALE)
        if EVEN_K:
            xt = tl.load(x_cols + kk[:, None] * stride_xk)
        else:
            xt = tl.load(x_cols + kk[:, None] * stride_xk, mask=k_mask[:, None], other=0.0)
        if X_ROWS < BLOCK_M:  # (BLOCK_K, X_ROWS) -> (BLOCK_K, BLOCK_M): row r is x's row r % X_ROWS
            xt = tl.reshape(tl.broadcast_to(xt[:, None, :], (BLOCK_K, BLOCK_M // X_ROWS, X_ROWS)),
                            (BLOCK_K, BLOCK_M))
        if DOT_F32:  # fp16 x (W's range exceeds fp16's) and the interpreter's bf16: exact values in fp32
            xt = xt.to(tl.float32)
        elif W_BF16:
            w = w.to(tl.bfloat16)
        acc = tl.dot(tl.trans(xt), tl.trans(w), acc, input_precision=INPUT_PRECISION)
    _pdl_exit(PDL, EARLY)
    _finish(tl.trans(acc), b_ptr, y_ptr, ws_ptr, count_ptr, M, N, pid_n, pid_m, pid_k, offs_n, offs_m,
            HAS_BIAS, SPLIT_K)


def _finish(acc, b_ptr, y_ptr, ws_ptr, count_ptr, M, N, pid_n, pid_m, pid_k, offs_n, offs_m,
            HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr):
    """The epilogue of both dot kernels: ``acc`` (BLOCK_N, BLOCK_M) fp32 plus the bias, stored to y, or
    through the split-K workspace (see ``_dq_kernel``)."""
    n_mask, m_mask = offs_n < N, offs_m < M
    if HAS_BIAS:
        b = tl.load(b_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
        acc += b[:, None] * (pid_k == 0).to(tl.float32)
    out_mask = n_mask[:, None] & m_mask[None, :]
    out = offs_m.to(tl.int64)[None, :] * N + offs_n[:, None]
    if SPLIT_K == 1:
        tl.store(y_ptr + out, acc.to(y_ptr.dtype.element_ty), mask=out_mask)
    else:
        plane = tl.cast(M, tl.int64) * N  # M can be a constexpr 1
        tl.store(ws_ptr + pid_k * plane + out, acc, mask=out_mask)
        tl.debug_barrier()  # every thread's partial is written before the release below publishes it
        tile = pid_m * tl.num_programs(0) + pid_n
        arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:
            total = tl.load(ws_ptr + out, mask=out_mask, other=0.0, cache_modifier=".cg")
            for s in tl.static_range(1, SPLIT_K):
                total += tl.load(ws_ptr + s * plane + out, mask=out_mask, other=0.0, cache_modifier=".cg")
            tl.store(y_ptr + out, total.to(y_ptr.dtype.element_ty), mask=out_mask)


def _tma_kernel(x_desc, m_desc, m_ptr, e_ptr, b_ptr, y_ptr, ws_ptr, count_ptr, M, N, K, stride_mn, stride_en,
                stride_eg, GROUP: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr, ASM: tl.constexpr,
                W_LEFT: tl.constexpr, DOT_F32: tl.constexpr, E_AHEAD: tl.constexpr, BF16_SCALE: tl.constexpr,
                PDL: tl.constexpr, PREFETCH: tl.constexpr, EARLY: tl.constexpr):
    """The dq kernel with W's and x's tiles fetched by the Hopper tensor-memory accelerator (TMA): one thread
    issues a whole tile's copy into shared memory and Triton's pipeliner keeps ``num_stages`` of them in
    flight, so a program has tens of KB of loads outstanding with few registers (the pointer-load dq kernel
    was latency-bound at 12% occupancy). Tiles past N, M or K arrive zero-filled, so no row is re-read and no
    load is masked. bf16 x only. ``W_LEFT``: W is the MMA's row side (acc (BLOCK_N, BLOCK_M)), the decoded tile
    feeding the MMA from registers; else x is, as in ``_dq_kernel``. ``E_AHEAD`` as in ``_dq_kernel``;
    ``BF16_SCALE``: see ``_scaled`` (7-15% faster here). Measured: the tma kernel's steps in
    benchmarks/mxint8/MXINT8_NOTES.md, its sweeps in benchmarks/mxint8/fused_linear_sweep_tma.json."""
    pid_n, pid_m, pid_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    n0, m0 = pid_n * BLOCK_N, pid_m * BLOCK_M
    offs_n = n0 + tl.arange(0, BLOCK_N)
    offs_m = m0 + tl.arange(0, BLOCK_M)
    tiles = ((K + BLOCK_K - 1) // BLOCK_K + SPLIT_K - 1) // SPLIT_K
    k_begin = pid_k * tiles * BLOCK_K
    k_end = tl.minimum(k_begin + tiles * BLOCK_K, K)
    NG: tl.constexpr = (BLOCK_K + GROUP - 1) // GROUP
    rows_n = tl.minimum(offs_n, N - 1).to(tl.int64)[:, None]
    e_rows = e_ptr + rows_n * stride_en
    _pdl_enter(m_ptr + rows_n * stride_mn, k_begin, k_end, PDL, PREFETCH, EARLY)  # m_ptr: m_desc's bytes, to prefetch
    if W_LEFT:
        acc = tl.full((BLOCK_N, BLOCK_M), 0.0, tl.float32)
    else:
        acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
    if E_AHEAD:
        e_next = _exponents(e_rows, k_begin, stride_eg, K, GROUP, NG, True)
    for k0 in range(k_begin, k_end, BLOCK_K):
        if E_AHEAD:  # as in _dq_kernel
            e = e_next
            e_next = _exponents(e_rows, k0 + BLOCK_K, stride_eg, K, GROUP, NG, True)
        else:
            e = _exponents(e_rows, k0, stride_eg, K, GROUP, NG, True)
        m = m_desc.load([n0, k0])
        if ASM:
            w = _i8x4_to_f32_asm(m)
        else:
            w = _i8_to_f32(m)
        w = _scaled(w, e, BLOCK_N, NG, BLOCK_K, BF16_SCALE and not DOT_F32)
        xt = x_desc.load([m0, k0])  # (BLOCK_M, BLOCK_K)
        if DOT_F32:  # the interpreter's bf16 dot is wrong (see launch)
            xt = xt.to(tl.float32)
        else:
            w = w.to(tl.bfloat16)
        if W_LEFT:
            acc = tl.dot(w, tl.trans(xt), acc)
        else:
            acc = tl.dot(xt, tl.trans(w), acc)
    _pdl_exit(PDL, EARLY)
    if not W_LEFT:
        acc = tl.trans(acc)
    _finish(acc, b_ptr, y_ptr, ws_ptr, count_ptr, M, N, pid_n, pid_m, pid_k, offs_n, offs_m, HAS_BIAS, SPLIT_K)


@functools.cache
def _kernels(mode: bool) -> dict:
    interpreter_scalar_compat()  # range() over runtime bounds in Triton 3.6's interpreter
    helpers = {"_ADD": triton.jit(_add), "_scale": triton.jit(_scale), "_i8_to_f32": triton.jit(_i8_to_f32),
               "_prefetch_l2": triton.jit(_prefetch_l2),
               "_exponents": triton.jit(_exponents),
               "_i8x4_to_f32_asm": triton.jit(_i8x4_to_f32_asm)}
    helpers["_scaled"] = triton.jit(_in_mode(_scaled, helpers))
    helpers["_pdl_enter"] = triton.jit(_in_mode(_pdl_enter, helpers))
    helpers["_pdl_exit"] = triton.jit(_in_mode(_pdl_exit, helpers))
    helpers["_finish"] = triton.jit(_in_mode(_finish, helpers))
    out = {kind: triton.jit(_in_mode(fn, helpers))
           for kind, fn in (("gemv", _gemv_kernel), ("dq", _dq_kernel), ("tma", _tma_kernel))}
    out[fused_gemv.KIND] = fused_gemv.jit_kernel(helpers, _in_mode)
    return out


def kernels() -> dict:
    """{kind: jit kernel} (KINDS) for the current TRITON_INTERPRET mode."""
    return _kernels(interpreting())


def block_m(M: int, kind: str) -> int:
    """Rows per program: gemv unrolls up to GEMV_MAX_ROWS; tl.dot needs >= 16 (rows are padded)."""
    if kind == "gemv":
        return min(GEMV_MAX_ROWS, triton.next_power_of_2(M))
    return min(MAX_BLOCK_M, max(16, triton.next_power_of_2(M)))


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def tma_ok(x2: torch.Tensor, mantissa: torch.Tensor) -> str | None:
    """Why the ``tma`` kernel cannot take these operands, or None: it needs bf16 x, a Hopper or newer GPU (or the
    interpreter) and tensor-descriptor-legal operands (unit inner stride, 16-byte aligned bases and rows)."""
    if x2.dtype != torch.bfloat16:
        return f"x is {x2.dtype}: the tma kernel takes bfloat16"
    if x2.is_cuda and capability(x2.device)[0] < 9:
        return "the tma kernel needs sm_90 or newer (tensor memory accelerator)"
    for name, t in (("x", x2), ("mantissa", mantissa)):
        if t.stride(-1) != 1 or t.data_ptr() % 16 or (t.stride(0) * t.element_size()) % 16:
            return f"{name} is not 16-byte aligned with unit inner stride (a tensor descriptor needs both)"
    return None


# the gemv kernel's one-row launch (ONE_ROW_SPLIT False)
GEMV_ONE_ROW = {"kind": "gemv", "BLOCK_N": 4, "BLOCK_K": 1024, "num_warps": 4, "num_stages": 3}


def _one_row(K: int, group_size: int) -> dict:
    """pick_config's launch for one row: fused_gemv.ONE_ROW with ONE_ROW_SPLIT, else GEMV_ONE_ROW, its K tile no
    wider than K needs and at least a group."""
    base = fused_gemv.ONE_ROW if ONE_ROW_SPLIT else GEMV_ONE_ROW
    return {**base, "BLOCK_K": max(group_size, min(base["BLOCK_K"], triton.next_power_of_2(K)))}


def pick_config(M: int, N: int, K: int, group_size: int, sms: int = 132, dtype=torch.bfloat16,
                tma: bool = False) -> dict:
    """The launch for (M, N, K) on a GPU with ``sms`` multiprocessors, as rules read off the H100 sweeps in
    benchmarks/mxint8/fused_linear_sweep_tma.json (4096x4096, 14336x4096, 28672x8192 at batch 4-64;
    for each row range the configuration whose worst ratio to cuBLAS was highest), ``tma`` whether the tma kernel
    can run (``tma_ok``):
    one row: gemv in long K tiles (or gemv_split: ``_one_row``). 2-16 rows: dq with 16 features and K tiles of
    512, or 32 and 256 where N gives 2+ programs per SM at 32 and K <= 4096. 17-32 rows: dq with 64 features,
    K tiles of 256, split-K 2. 33-64 rows: 128 features where N gives half the SMs a program at 128; else the tma
    kernel with 32 features (dq's 64-feature split-K 2 without it). fp16/fp32 x decode W to fp32 tiles: shorter K
    tiles. ``picked`` adds the PDL choices (``pdl_choice``)."""
    def dq(bn: int, bk: int, split: int, warps: int, stages: int) -> dict:
        bk = max(group_size, bk if dtype == torch.bfloat16 else min(bk, 128))
        return {"kind": "dq", "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split, "num_warps": warps,
                "num_stages": stages}

    if M == 1:
        return _one_row(K, group_size)
    if M <= 16:
        wide = triton.cdiv(N, 32) >= 2 * sms and K <= 4096
        return dq(32, 256, 1, 2, 3) if wide else dq(16, 512, 1, 2, 3)
    if M <= 32:
        return dq(64, 256, 2, 4, 3)
    if triton.cdiv(N, 128) >= sms // 2:
        return dq(128, 128, 1, 4, 4 if triton.cdiv(N, 128) < sms else 3)
    if tma and dtype == torch.bfloat16 and group_size <= 256:
        return {"kind": "tma", "BLOCK_N": 32, "BLOCK_K": 256, "SPLIT_K": 1, "W_LEFT": False, "num_warps": 4,
                "num_stages": 4, "E_AHEAD": True}
    return dq(64, 256, 2, 4, 3)


def pdl_blocker(device) -> str | None:
    """Why programmatic dependent launch cannot be used on ``device``, or None."""
    device = torch.device(device)
    if device.type != "cuda" or interpreting():
        return "PDL needs a compiled launch on a CUDA GPU (the interpreter has no grid dependency control)"
    major, minor = capability(device)
    if major < 9:
        return f"PDL needs sm_90 or newer (this GPU is sm_{major}{minor})"
    return None


def pdl_choice(config: dict, M: int, K: int) -> dict:
    """The PREFETCH and TRIGGER of a picked launch: ``EARLY_PREFETCH`` for the one-row gemv_split kernel and for
    2..EARLY_PREFETCH_ROWS rows at dq's 16-feature tile with K > 4096, else PDL_DEFAULT's."""
    early = config["kind"] == fused_gemv.KIND or (config["kind"] == "dq" and config["BLOCK_N"] == 16
                                                 and M <= EARLY_PREFETCH_ROWS and K > 4096)
    return EARLY_PREFETCH if early else {k: PDL_DEFAULT[k] for k in EARLY_PREFETCH}


def with_pdl(config: dict, x2: torch.Tensor) -> dict:
    """``config`` plus PDL_DEFAULT's PDL with ``pdl_choice``'s PREFETCH and TRIGGER where the config names no PDL
    and the device allows."""
    if "PDL" in config or pdl_blocker(x2.device):
        return config
    return {**config, "PDL": PDL_DEFAULT["PDL"], **pdl_choice(config, x2.shape[0], x2.shape[1])}


def picked(x2: torch.Tensor, mantissa: torch.Tensor, group_size: int) -> dict:
    """``pick_config``'s launch for these operands on their device (what ``launch`` runs without a config)."""
    M, K = x2.shape
    sms = _sm_count(x2.device.index or 0) if x2.is_cuda else 132
    return with_pdl(pick_config(M, mantissa.shape[0], K, group_size, sms, x2.dtype,
                                tma=M > 32 and tma_ok(x2, mantissa) is None), x2)


def check_config(config: dict, group_size: int) -> dict:
    """``config`` with its kind (default "dq"); ValueError naming the bad key and its allowed values."""
    kind = config.get("kind", "dq")
    if kind not in KINDS:
        raise ValueError(f"config kind={kind!r}: allowed values are {', '.join(map(repr, KINDS))}")
    if "PDL" in config and config["PDL"] not in (0, 1):  # True/False compare equal to 1/0
        raise ValueError(f"config PDL={config['PDL']!r}: allowed values are True, False")
    pf = config.get("PREFETCH", 0)
    if not isinstance(pf, int) or pf < 0 or (pf and (pf < 128 or pf & (pf - 1))):
        raise ValueError(f"config PREFETCH={pf!r}: allowed values are 0 and powers of two >= 128 (bytes a W row)")
    if config.get("TRIGGER", "end") not in ("start", "end"):
        raise ValueError(f"config TRIGGER={config['TRIGGER']!r}: allowed values are 'start', 'end' (where a program "
                         "lets the next PDL kernel launch)")
    if pf and not config.get("PDL", False):
        raise ValueError(f"config PREFETCH={pf} needs PDL=True (it prefetches before waiting on the previous kernel)")
    if kind == "gemv_split":
        return fused_gemv.check({**config, "kind": kind}, group_size)
    bk = int(config["BLOCK_K"])
    if bk < 16 or bk & (bk - 1):
        raise ValueError(f"config BLOCK_K={bk}: allowed values are powers of two >= 16")
    if kind == "gemv" and (bk < group_size or bk % group_size):
        raise ValueError(f"gemv config BLOCK_K={bk} must be a multiple of group_size={group_size}")
    if "BLOCK_M" in config:
        bm = int(config["BLOCK_M"])
        if kind == "gemv" or bm not in (16, 32, 64):
            raise ValueError(f"config BLOCK_M={bm} (kind {kind!r}): allowed values are 16, 32, 64, for 'dq' and 'tma'")
    return {**config, "kind": kind}


def launch(x2: torch.Tensor, mantissa: torch.Tensor, exponent2: torch.Tensor, bias: torch.Tensor | None,
           group_size: int, config: dict | None = None) -> torch.Tensor:
    """``x2`` (M, K) times dequant(``mantissa`` (N, K), ``exponent2`` (N, K / group_size))^T (+ bias), in x's
    dtype. ``config`` ({kind, BLOCK_N, BLOCK_K[, SPLIT_K, num_warps, num_stages, ASM, PDL, PREFETCH, TRIGGER]})
    overrides ``picked`` (tests, the sweeps); a given config runs without PDL unless it says PDL=True. Inputs are
    checked by the caller."""
    M, K = x2.shape
    N = mantissa.shape[0]
    interp = interpreting()
    if config is None:  # pick_config's choices are valid by construction: only given configs are checked
        config = picked(x2, mantissa, group_size)
    else:
        config = check_config(config, group_size)
        why = tma_ok(x2, mantissa) if config["kind"] == "tma" else None
        if why:
            raise ValueError(f"config kind='tma': {why}; allowed: kind 'dq' (any operands) or 'gemv'")
        if config.get("PDL"):
            why = pdl_blocker(x2.device)
            if why:
                raise ValueError(f"config PDL=True: {why}; allowed: PDL=False")
    kind = config["kind"]
    pdl = bool(config.get("PDL", False))
    early = config.get("TRIGGER", "end") == "start"
    # PREFETCH bytes a W row, at most the row's K range (a power of two for tl.arange); unit K stride only
    prefetch = min(int(config.get("PREFETCH", 0)), triton.next_power_of_2(K)) if mantissa.stride(1) == 1 else 0
    y = torch.empty((M, N), dtype=x2.dtype, device=x2.device)
    bm = int(config.get("BLOCK_M", block_m(M, kind)))
    warps, stages = config.get("num_warps", 4), config.get("num_stages", 3)
    strides = (x2.stride(0), x2.stride(1), mantissa.stride(0), mantissa.stride(1), exponent2.stride(0),
               exponent2.stride(1))
    b = bias if bias is not None else x2
    if kind == "gemv_split":
        return fused_gemv.launch(kernels()[kind], x2, mantissa, exponent2, bias, y, group_size, config,
                                 asm=bool(config.get("ASM", True)) and not interp, pdl=pdl, prefetch=prefetch,
                                 early=early)
    if kind == "gemv":
        grid = (triton.cdiv(N, config["BLOCK_N"]), triton.cdiv(M, bm))
        kernels()["gemv"][grid](x2, mantissa, exponent2, b, y, M, N, K, *strides, GROUP=group_size,
                                HAS_BIAS=bias is not None, BLOCK_M=bm, BLOCK_N=config["BLOCK_N"],
                                BLOCK_K=config["BLOCK_K"], PDL=pdl, PREFETCH=prefetch, EARLY=early, num_warps=warps,
                                num_stages=stages, launch_pdl=pdl)
        return y
    split = int(config.get("SPLIT_K", 1))
    grid = (triton.cdiv(N, config["BLOCK_N"]), triton.cdiv(M, bm), split)
    ws = counts = y
    if split > 1:  # per call: zeroed arrival counters (one memset, captured with the kernel in a CUDA graph)
        counts = torch.zeros(grid[0] * grid[1], dtype=torch.int32, device=x2.device)
        ws = torch.empty((split, M, N), dtype=torch.float32, device=x2.device)
    asm = bool(config.get("ASM", True)) and not interp  # the PTX decode: no inline asm in the interpreter
    if kind == "tma":
        from triton.tools.tensor_descriptor import TensorDescriptor

        bn, bk = config["BLOCK_N"], config["BLOCK_K"]
        x_desc = TensorDescriptor.from_tensor(x2, [bm, bk])
        m_desc = TensorDescriptor.from_tensor(mantissa, [bn, bk])
        kernels()["tma"][grid](x_desc, m_desc, mantissa, exponent2, b, y, ws, counts, M, N, K, mantissa.stride(0),
                               exponent2.stride(0), exponent2.stride(1), GROUP=group_size,
                               HAS_BIAS=bias is not None, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=split, ASM=asm,
                               W_LEFT=bool(config.get("W_LEFT", True)), DOT_F32=interp,
                               E_AHEAD=bool(config.get("E_AHEAD", True)),
                               BF16_SCALE=bool(config.get("BF16_SCALE", True)), PDL=pdl, PREFETCH=prefetch,
                               EARLY=early, num_warps=warps, num_stages=stages, launch_pdl=pdl)
        return y
    # fp32 x: IEEE fp32 products unless torch allows TF32 (as F.linear does). fp16 x: W stays fp32 (its range
    # exceeds fp16's) and x goes to fp32, both exact in tf32. The interpreter's bf16 dot is wrong: fp32 there.
    ieee = x2.dtype == torch.float32 and not (x2.is_cuda and torch.backends.cuda.matmul.allow_tf32)
    f32 = x2.dtype != torch.bfloat16 or interp
    kernels()["dq"][grid](x2, mantissa, exponent2, b, y, ws, counts, M, N, K, *strides, GROUP=group_size,
                          HAS_BIAS=bias is not None, W_BF16=not f32, DOT_F32=f32,
                          INPUT_PRECISION="ieee" if ieee else "tf32", BLOCK_M=bm, BLOCK_N=config["BLOCK_N"],
                          BLOCK_K=config["BLOCK_K"], SPLIT_K=split, ASM=asm,
                          EVEN_K=K % config["BLOCK_K"] == 0,
                          X_ROWS=min(bm, max(2, triton.next_power_of_2(M))), E_AHEAD=bool(config.get("E_AHEAD", False)),
                          BF16_SCALE=bool(config.get("BF16_SCALE", False)), PDL=pdl, PREFETCH=prefetch, EARLY=early,
                          num_warps=warps, num_stages=stages, launch_pdl=pdl)
    return y
