"""The one-row kernel of the fused MXINT8 linear, launch kind ``gemv_split``: ``y = x @ dequant(W)^T (+ bias)``
for x of one row (more rows run as one program per row and W slice, each re-reading its slice).

Each program streams one (BLOCK_N features) x (K range) slice of W once, in (BLOCK_N, NG, GROUP) tiles (NG =
BLOCK_K / GROUP groups a tile): int8 decoded to fp32 in registers, multiplied by x, summed within each group,
then scaled by the group's ``2**(E-133)`` into a (BLOCK_N, NG) fp32 accumulator. No reduction crosses warps
inside the loop: the sum over a tile's groups waits until after it (the ``gemv`` kernel reduced every tile to
one value per feature and picked its row with ``tl.where``). W and its exponents are loaded ``evict_first``
(read once), x ``evict_last`` (every program reads it). Options, all compile-time:

- ``AHEAD``: the next tile's loads are issued before this tile's arithmetic, two tiles in flight per program.
- ``X_PER_ROW`` and ``E_ASM``: Triton gives each tl.load its own register layout, so x's tile and the exponents
  reach W's layout through shared memory, with barriers, in every tile (offline sm_90 compiles: 9 barriers a
  tile at 8x512, 4 warps). ``X_PER_ROW`` loads x through W-shaped pointers (the same layout: W in 8-byte
  vectors), ``E_ASM`` loads the exponents by PTX in the sums' layout (compiled only; the interpreter takes
  tl.load): together, no barrier is left in the loop.

Split-K (``SPLIT_K`` > 1): the K range is cut into SPLIT_K runs of whole tiles, one program each, so that a
narrow layer still gives every SM several programs. Partials meet as in ``fused_triton._dq_kernel``: each
split stores its fp32 partial in its own slice of a workspace and bumps its tile's arrival counter; the last
to arrive sums the slices in split order (the same bits every run), adds the bias, writes y and sets the
counter back to 0. So the counters need no zeroing per call (no memset before the kernel): they live in a
buffer per device kept by ``_counters``. Two split-K launches that run at the same time on different streams of
one device would share counters: such concurrency is not supported (one stream, CUDA graphs included, is).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

KIND = "gemv_split"
# pick_config's launch at M == 1 (with fused_triton.ONE_ROW_SPLIT): the fastest of 16 launches at 14336x4096 and
# 28672x8192 on an H100 (benchmarks/mxint8/fused_linear_m1_big.json: 22.5 and 80.8 us, 1-2% ahead of the 1024-wide
# tile with PTX exponent loads that both 74-launch sweeps of fused_linear_m1.json (its runs) had picked, and
# level with it at 4096x4096 in fused_linear_m1_pdl.json). fused_triton.EARLY_PREFETCH adds its PDL choice.
ONE_ROW = {"kind": KIND, "BLOCK_N": 4, "BLOCK_K": 2048, "SPLIT_K": 1, "AHEAD": False, "X_PER_ROW": False,
           "E_ASM": False, "num_warps": 4, "num_stages": 1}
WARPS = (1, 2, 4, 8, 16)
MAX_BLOCK_N = 256


def _tile(w_ptrs, e_ptrs, x_ptrs, k0, k_end, stride_mk, stride_eg, stride_xk, BLOCK_N: tl.constexpr,
          GROUP: tl.constexpr, NG: tl.constexpr, MASKED: tl.constexpr, X_PER_ROW: tl.constexpr,
          E_ASM: tl.constexpr):
    """The tile at ``k0``: mantissas (BLOCK_N, NG, GROUP) int8, exponents (BLOCK_N, NG) int32, x fp32 (NG, GROUP),
    or (BLOCK_N, NG, GROUP) with ``X_PER_ROW``. ``MASKED``: k >= k_end reads m = 0, E = 127 (a finite scale) and
    x = 0 (K is a multiple of GROUP, so whole groups are in or out).

    ``X_PER_ROW``: x is loaded once per W row through pointers of W's shape, its K offsets built in runs of 8 so
    that W's and bf16/fp16 x's loads get the same layout (8 bytes of W and 16 of x a thread); x is used where it lands,
    with no shared-memory layout conversion and its barriers in the loop (x's rereads hit L1). Else x is loaded
    once per program and converted to W's layout (16 bytes of W a thread)."""
    j = tl.arange(0, GROUP)
    if X_PER_ROW:
        j = (j // 8) * 8 + j % 8  # the same offsets, provably contiguous in runs of 8 only
    kk = k0 + tl.arange(0, NG)[:, None] * GROUP + j[None, :]
    g = k0 // GROUP + tl.arange(0, NG)
    x_off = kk[None, :, :] + tl.full((BLOCK_N, 1, 1), 0, tl.int32) if X_PER_ROW else kk
    if MASKED:
        m = tl.load(w_ptrs + kk[None, :, :] * stride_mk, mask=(kk < k_end)[None, :, :], other=0,
                    eviction_policy="evict_first")
        x = tl.load(x_ptrs + x_off * stride_xk, mask=x_off < k_end, other=0.0, eviction_policy="evict_last")
        g_in = (g * GROUP < k_end)[None, :]
        if E_ASM:  # a group past k_end reads group 0 of its row, then 127
            e = tl.where(g_in, _ld_u8(e_ptrs + tl.where(g_in, g[None, :], 0) * stride_eg), 127)
        else:
            e = tl.load(e_ptrs + g[None, :] * stride_eg, mask=g_in, other=127, eviction_policy="evict_first")
    else:
        m = tl.load(w_ptrs + kk[None, :, :] * stride_mk, eviction_policy="evict_first")
        x = tl.load(x_ptrs + x_off * stride_xk, eviction_policy="evict_last")
        if E_ASM:
            e = _ld_u8(e_ptrs + g[None, :] * stride_eg)
        else:
            e = tl.load(e_ptrs + g[None, :] * stride_eg, eviction_policy="evict_first")
    return m, e.to(tl.int32), x.to(tl.float32)


def _ld_u8(ptrs):
    """One byte a pointer, zero-extended to int32, in PTX: unlike tl.load, Triton gives it no layout of its own,
    so the exponents are loaded where the per-group sums are (no shared-memory conversion in the loop)."""
    return tl.inline_asm_elementwise(asm="ld.global.L1::evict_first.u8 $0, [$1];", constraints="=r,l", args=[ptrs],
                                     dtype=tl.int32, is_pure=True, pack=1)


def _group_sums(m, e, x, ASM: tl.constexpr, X_PER_ROW: tl.constexpr):
    """(BLOCK_N, NG): each group's sum of decoded mantissa times x, scaled by its ``2**(E-133)``."""
    # fused_triton's helpers, named in this mode's copy of this function (fused_triton._kernels); _ADD, not
    # tl.sum: tl.sum's combine function was decorated in the mode triton was imported in
    if ASM:
        w = _i8x4_to_f32_asm(m)  # noqa: F821
    else:
        w = _i8_to_f32(m)  # noqa: F821
    if X_PER_ROW:
        p = w * x
    else:
        p = w * x[None, :, :]
    return tl.reduce(p, 2, _ADD) * _scale(e)  # noqa: F821


def _row_out(total, b_ptr, y_ptr, out, n_mask, offs_n, HAS_BIAS: tl.constexpr):
    if HAS_BIAS:
        total += tl.load(b_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + out, total.to(y_ptr.dtype.element_ty), mask=n_mask)


def _gemv_split_kernel(x_ptr, m_ptr, e_ptr, b_ptr, y_ptr, ws_ptr, count_ptr, M, N, K,
                       stride_xm, stride_xk, stride_mn, stride_mk, stride_en, stride_eg,
                       GROUP: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       SPLIT_K: tl.constexpr, ASM: tl.constexpr, EVEN_K: tl.constexpr, AHEAD: tl.constexpr,
                       X_PER_ROW: tl.constexpr, E_ASM: tl.constexpr, PDL: tl.constexpr, PREFETCH: tl.constexpr,
                       EARLY: tl.constexpr):
    # one flat grid, row fastest then split: the programs of one W slice are launched together
    pid = tl.program_id(0)
    pid_m = pid % M
    tile = pid // M  # (feature block, split)
    pid_k = tile % SPLIT_K
    pid_n = tile // SPLIT_K
    NG: tl.constexpr = BLOCK_K // GROUP
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    # features past N re-read the last row (no load predicate); the store drops them
    rows = tl.minimum(offs_n, N - 1).to(tl.int64)
    w_ptrs = m_ptr + rows[:, None, None] * stride_mn
    e_ptrs = e_ptr + rows[:, None] * stride_en
    x_ptrs = x_ptr + pid_m.to(tl.int64) * stride_xm
    tiles = ((K + BLOCK_K - 1) // BLOCK_K + SPLIT_K - 1) // SPLIT_K
    k_begin = pid_k * tiles * BLOCK_K
    k_end = tl.minimum(k_begin + tiles * BLOCK_K, K)
    _pdl_enter(m_ptr + rows[:, None] * stride_mn, k_begin, k_end, PDL, PREFETCH, EARLY)  # noqa: F821
    acc = tl.full((BLOCK_N, NG), 0.0, tl.float32)  # not tl.zeros: a jit helper of the mode triton was imported in
    if AHEAD:
        m_next, e_next, x_next = _tile(w_ptrs, e_ptrs, x_ptrs, k_begin, k_end, stride_mk, stride_eg, stride_xk,
                                       BLOCK_N, GROUP, NG, True, X_PER_ROW, E_ASM)
    for k0 in range(k_begin, k_end, BLOCK_K):
        if AHEAD:  # this tile's loads were issued a tile ago; issue the next one's before the arithmetic
            m, e, x = m_next, e_next, x_next
            m_next, e_next, x_next = _tile(w_ptrs, e_ptrs, x_ptrs, k0 + BLOCK_K, k_end, stride_mk, stride_eg,
                                           stride_xk, BLOCK_N, GROUP, NG, True, X_PER_ROW, E_ASM)
        else:
            m, e, x = _tile(w_ptrs, e_ptrs, x_ptrs, k0, k_end, stride_mk, stride_eg, stride_xk, BLOCK_N, GROUP, NG,
                            not EVEN_K, X_PER_ROW, E_ASM)
        acc += _group_sums(m, e, x, ASM, X_PER_ROW)
    _pdl_exit(PDL, EARLY)  # noqa: F821
    part = tl.reduce(acc, 1, _ADD)  # noqa: F821 - (BLOCK_N,): the one cross-warp reduction
    out = pid_m.to(tl.int64) * N + offs_n
    if SPLIT_K == 1:
        _row_out(part, b_ptr, y_ptr, out, n_mask, offs_n, HAS_BIAS)
    else:
        plane = tl.cast(M, tl.int64) * N
        tl.store(ws_ptr + pid_k * plane + out, part, mask=n_mask)
        tl.debug_barrier()  # every thread's partial is written before the release below publishes it
        slot = pid_n * M + pid_m
        arrived = tl.atomic_add(count_ptr + slot, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:
            total = tl.load(ws_ptr + out, mask=n_mask, other=0.0, cache_modifier=".cg")
            for s in tl.static_range(1, SPLIT_K):
                total += tl.load(ws_ptr + s * plane + out, mask=n_mask, other=0.0, cache_modifier=".cg")
            tl.atomic_xchg(count_ptr + slot, 0, sem="relaxed", scope="gpu")  # every split has arrived: reusable
            _row_out(total, b_ptr, y_ptr, out, n_mask, offs_n, HAS_BIAS)


def jit_kernel(helpers: dict, in_mode):
    """The kernel for one Triton mode: ``helpers`` are fused_triton's jit helpers of that mode."""
    own = dict(helpers)
    own["_ld_u8"] = triton.jit(_ld_u8)
    for fn in (_tile, _group_sums, _row_out):
        own[fn.__name__] = triton.jit(in_mode(fn, own))
    return triton.jit(in_mode(_gemv_split_kernel, own))


def _pow2(v) -> bool:
    return isinstance(v, int) and v > 0 and v & (v - 1) == 0


def check(config: dict, group_size: int) -> dict:
    """``config`` with its gemv_split defaults filled in; ValueError naming the key and its allowed values."""
    c = {"SPLIT_K": 1, "AHEAD": False, "X_PER_ROW": False, "E_ASM": False, "num_warps": 4, "num_stages": 1, **config}
    bn, bk, sk = c.get("BLOCK_N"), c.get("BLOCK_K"), c["SPLIT_K"]
    if not (_pow2(bn) and bn <= MAX_BLOCK_N):
        raise ValueError(f"gemv_split config BLOCK_N={bn!r}: allowed values are powers of two 1..{MAX_BLOCK_N}")
    if not (_pow2(bk) and bk >= group_size):
        raise ValueError(f"gemv_split config BLOCK_K={bk!r}: allowed values are powers of two >= group_size="
                         f"{group_size}")
    if not (isinstance(sk, int) and 1 <= sk <= 64):
        raise ValueError(f"gemv_split config SPLIT_K={sk!r}: allowed values are integers 1..64")
    for key in ("AHEAD", "X_PER_ROW", "E_ASM"):
        if c[key] not in (0, 1):  # True/False compare equal to 1/0
            raise ValueError(f"gemv_split config {key}={c[key]!r}: allowed values are True, False")
    if c["num_warps"] not in WARPS:
        raise ValueError(f"gemv_split config num_warps={c['num_warps']!r}: allowed values are "
                         f"{', '.join(map(str, WARPS))}")
    if not (isinstance(c["num_stages"], int) and 1 <= c["num_stages"] <= 8):
        raise ValueError(f"gemv_split config num_stages={c['num_stages']!r}: allowed values are integers 1..8")
    if "BLOCK_M" in c:
        raise ValueError(f"gemv_split config BLOCK_M={c['BLOCK_M']!r}: not a gemv_split key (one row a program)")
    return c


_COUNTERS: dict = {}  # device -> [int32 buffers]: every one kept alive (a captured CUDA graph may name it)


def _counters(device: torch.device, n: int) -> torch.Tensor:
    """``n`` zero arrival counters on ``device``, reused across calls (the kernel leaves them at 0). Made only
    outside CUDA-graph capture (a capture records the zeroing without running it); a capture that finds no
    buffer large enough gets a fresh one, zeroed by a memset in the graph."""
    kept = _COUNTERS.setdefault(device, [])
    if kept and kept[-1].numel() >= n:
        return kept[-1]
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return torch.zeros(n, dtype=torch.int32, device=device)
    kept.append(torch.zeros(max(n, 1024), dtype=torch.int32, device=device))
    return kept[-1]


def launch(kernel, x2, mantissa, exponent2, bias, y, group_size: int, config: dict, asm: bool, pdl: bool,
           prefetch: int, early: bool) -> torch.Tensor:
    """Run ``kernel`` (this mode's ``_gemv_split_kernel``) into ``y`` (M, N) with a checked ``config``."""
    M, K = x2.shape
    N = mantissa.shape[0]
    bn, bk, split = config["BLOCK_N"], config["BLOCK_K"], config["SPLIT_K"]
    slots = triton.cdiv(N, bn) * M
    ws = counts = y
    if split > 1:
        counts = _counters(x2.device, slots)
        ws = torch.empty((split, M, N), dtype=torch.float32, device=x2.device)
    kernel[(slots * split,)](
        x2, mantissa, exponent2, bias if bias is not None else x2, y, ws, counts, M, N, K, x2.stride(0), x2.stride(1),
        mantissa.stride(0), mantissa.stride(1), exponent2.stride(0), exponent2.stride(1), GROUP=group_size,
        HAS_BIAS=bias is not None, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=split, ASM=asm, EVEN_K=K % bk == 0,
        AHEAD=bool(config["AHEAD"]), X_PER_ROW=bool(config["X_PER_ROW"]),
        E_ASM=bool(config["E_ASM"]) and asm, PDL=pdl, PREFETCH=prefetch, EARLY=early, num_warps=config["num_warps"],
        num_stages=config["num_stages"], launch_pdl=pdl)
    return y
