"""Which CTA and which thread of the CuTe kernels touch each element (question 3c), in NumPy.

Mirrors csrc/mxint8_dequant.cuh: ``kernel_constants()`` reads the launch constants out of the header, so
the drawing cannot drift from the kernel (a test also checks the copies below against it).

Lab-structure kernel: the tensor is viewed as (group_size, num_groups), column-major (element
``k * group_size + m`` at (m, k)). ``local_tile(mX, (BLK_M, BLK_K), (tm, tk))`` gives CTA tile
``tm + tiles_m * tk`` the block of rows ``[tm*BLK_M, ...)`` and columns ``[tk*BLK_K, ...)``;
``local_partition(tile, Layout<(THR_M, THR_K)>, t)`` gives thread t the elements at
``(t % THR_M + i*THR_M, t // THR_M + j*THR_K)``.
Fast kernel: the tensor viewed as (8, n_vec); CTA tile = 8 x (threads * unroll) vectors; thread t owns
vectors ``t + u * threads`` (8 elements each: an 8-byte load and a 16-byte store).
"""
from __future__ import annotations

import re

import numpy as np

from . import build_config

VEC_ELEMS, VEC_THREADS, VEC_UNROLL, TILE_ELEMS, TILE_THREADS = 8, 256, 8, 1024, 256


def kernel_constants() -> dict:
    """The ``constexpr int kName = value;`` constants of csrc/mxint8_dequant.cuh."""
    text = (build_config.CSRC / "mxint8_dequant.cuh").read_text()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"constexpr int (k\w+) = (\d+);", text)}


def lab_tile_shape(group_size: int) -> dict:
    """BLK_M, BLK_K, THR_M, THR_K the lab-structure kernel uses for ``group_size`` (as its launcher picks)."""
    blk_m = 128 if group_size >= 128 else 64 if group_size >= 64 else 32 if group_size >= 32 \
        else 16 if group_size >= 16 else 8
    return {"BLK_M": blk_m, "BLK_K": TILE_ELEMS // blk_m, "THR_M": blk_m, "THR_K": TILE_THREADS // blk_m}


def lab_tile_map(group_size: int, num_groups: int) -> dict:
    """Arrays of shape (group_size, num_groups): CTA tile, thread, and the thread's value index per element,
    plus ``valid`` (False nowhere here: ragged tiles only leave threads idle)."""
    t = lab_tile_shape(group_size)
    m, k = np.meshgrid(np.arange(group_size), np.arange(num_groups), indexing="ij")
    tiles_m = -(-group_size // t["BLK_M"])
    cta = m // t["BLK_M"] + tiles_m * (k // t["BLK_K"])
    mm, kk = m % t["BLK_M"], k % t["BLK_K"]
    thread = mm % t["THR_M"] + t["THR_M"] * (kk % t["THR_K"])
    value = mm // t["THR_M"] + (t["BLK_M"] // t["THR_M"]) * (kk // t["THR_K"])
    return {**t, "cta": cta, "thread": thread, "value": value, "tiles_m": tiles_m,
            "tiles_k": -(-num_groups // t["BLK_K"])}


def vec_map(n_vectors: int, threads: int = VEC_THREADS, unroll: int = VEC_UNROLL) -> dict:
    """Per 8-element vector of the fast kernel: CTA tile, thread and unroll slot (``threads`` per CTA,
    ``unroll`` vectors per thread: the kernel's kVecThreads and kVecUnroll unless given)."""
    v = np.arange(n_vectors)
    per_tile = threads * unroll
    return {"cta_tile": v // per_tile, "thread": v % threads, "slot": (v % per_tile) // threads}
