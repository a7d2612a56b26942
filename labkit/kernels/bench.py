"""GPU bandwidth of MXINT8 dequantization: the CuTe kernels, eager PyTorch, torch.compile, and a plain copy.

Bytes counted per element: 1 (mantissa) + 1/group_size (exponent) read, 2 (bf16) written. The copy
baseline moves the same number of bytes (a uint8 buffer of half the traffic, read and written), so
"fraction of copy" compares like with like at every size. Times are ``labkit.perf.timing.MedianTimer``'s:
medians of per-call CUDA-event timings, each call preceded by a write of twice the L2 size so that no input is
served from L2. Used by ``labkit.kernels.bandwidth`` and ``labkit.kernels.variants`` (the regeneration steps) and, on a GPU, by
the Lab 4 notebook.
"""
from __future__ import annotations

import time

import torch

from ..perf.timing import MedianTimer
from ..quant.formats.mxint import NAN_EXPONENT, dequantize_groups, dequantize_mxint8
from . import extension

DEFAULT_SIZES = (1 << 20, 1 << 22, 1 << 24, 1 << 26, 8192 * 28672)
DEFAULT_GROUPS = (16, 32, 128)


def _formula_bf16(m2: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    return dequantize_groups(m2, e).to(torch.bfloat16)


def traffic_bytes(n: int, group_size: int) -> int:
    return n + n // group_size + 2 * n


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """bf16 tensors equal bit for bit, except that any NaN matches any NaN."""
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    return bool(torch.equal(nan_a, nan_b) and torch.equal(_bits(a)[~nan_a], _bits(b)[~nan_b]))


def sweep(sizes=DEFAULT_SIZES, groups=DEFAULT_GROUPS, compile: bool = True, reps: int = 50, seed: int = 0,
          progress: bool = True) -> dict:
    """Time every implementation at every (size, group size); returns rows plus the copy baseline."""
    if not torch.cuda.is_available():
        raise RuntimeError("bench.sweep needs a CUDA GPU")
    dev = torch.device("cuda")
    if not extension.load():
        raise RuntimeError(f"the MXINT8 CUDA extension is unavailable: {extension.reason()}")
    timer = MedianTimer(dev, reps=reps)
    gen = torch.Generator(device=dev).manual_seed(seed)
    rows, copy = [], {}
    op = torch.ops.labkit_mxint8.dequantize
    for n in sizes:
        half = (3 * n) // 2
        src = torch.empty(half, dtype=torch.uint8, device=dev).random_(0, 256, generator=gen)
        dst = torch.empty_like(src)
        ms = timer(lambda: dst.copy_(src))
        copy[n] = {"ms": ms, "GBps": 2 * half / ms / 1e6}
        del src, dst
        for g in groups:
            m = torch.randint(-127, 128, (n,), dtype=torch.int8, device=dev, generator=gen)
            # realistic exponents (weights around 2^-27..2^13); the edge values are checked in the tests
            e = torch.randint(100, 141, (n // g,), dtype=torch.uint8, device=dev, generator=gen)
            ref = dequantize_mxint8(m, e, g)
            impls = {
                "cute_vec": lambda: op(m, e, g, 1),
                "cute_tile": lambda: op(m, e, g, 2),
                "eager": lambda: dequantize_mxint8(m, e, g),
            }
            if compile:
                # static shapes, as each layer's weight has; a fresh compile per shape (no recompile limit)
                torch._dynamo.reset()
                compiled = torch.compile(_formula_bf16, dynamic=False)
                m2 = m.view(-1, g)
                t0 = time.perf_counter()
                compiled(m2, e)
                torch.cuda.synchronize()
                compile_s = time.perf_counter() - t0
                impls["compile"] = lambda: compiled(m2, e).view(-1)
            for name, fn in impls.items():
                exact = same_bits(fn(), ref)
                ms = timer(fn)
                gbps = traffic_bytes(n, g) / ms / 1e6
                row = {"n": n, "group_size": g, "impl": name, "ms": ms, "GBps": gbps,
                       "fraction_of_copy": gbps / copy[n]["GBps"], "bit_exact": exact}
                if name == "compile":
                    row["first_call_s"] = compile_s
                rows.append(row)
                if progress:
                    print(f"n={n:>10} g={g:>3} {name:>9}: {ms:8.4f} ms {gbps:8.1f} GB/s "
                          f"{100 * row['fraction_of_copy']:5.1f}% of copy  exact={exact}", flush=True)
            del m, e, ref
            torch.cuda.empty_cache()
    return {"rows": rows, "copy": {str(k): v for k, v in copy.items()}, "reps": reps,
            "method": "median of per-call CUDA-event times; L2 flushed before each call; traffic = "
                      "n*(1 + 1/g) read + 2n written; copy = uint8 copy_ of 1.5n bytes (read + written)",
            "nan_exponent": NAN_EXPONENT, "extension": extension.describe()}


def summary_table(result: dict) -> list[dict]:
    """One row per (n, group size): GB/s and % of copy of each implementation."""
    table = {}
    for r in result["rows"]:
        key = (r["n"], r["group_size"])
        row = table.setdefault(key, {"n": r["n"], "g": r["group_size"],
                                     "copy GB/s": result["copy"][str(r["n"])]["GBps"]})
        row[f"{r['impl']} GB/s"] = r["GBps"]
        row[f"{r['impl']} %copy"] = 100 * r["fraction_of_copy"]
    return list(table.values())
