"""Opcode histogram of the fused MXINT8 linear's compiled kernels (SASS via cuobjdump): what each W element
costs in instructions, per configuration.

    python benchmarks/mxint8/fused_linear_sass.py --configs '[{"kind": "dq", ...}, ...]' --batch 16 --out s.json
    python benchmarks/mxint8/fused_linear_sass.py --offline --configs '[{"kind": "tma", ...}]' --batch 64 --out s.json

``--offline`` needs no GPU: Triton compiles each kernel for sm_90 (N, K, strides divisible by 16, as Triton
specializes them at 4096x4096) and the ptxas/cuobjdump bundled with Triton's wheel report registers, spills and
SASS, so configurations can be screened for spills, shared memory and instruction counts before a device run.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def _tool(name: str) -> str:
    """Triton's bundled CUDA tool (the offline path), else the one on PATH."""
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    return str(bundled) if bundled.exists() else name


def opcodes(cubin: bytes) -> tuple[collections.Counter, str]:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([_tool("cuobjdump"), "-sass", f.name], capture_output=True, text=True,
                              check=True).stdout
    ops = collections.Counter()
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            ops[m.group(1).split(".")[0]] += 1
    return ops, sass


def offline_compile(cfg: dict, M: int, group: int = 32, capability: int = 90):
    """``cfg`` (kind dq, tma or gemv_split, bf16 x) compiled for sm_``capability`` without a GPU: (kernel, registers, local
    memory bytes a thread, i.e. spills)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from labkit.kernels import fused_triton

    kind, bm = cfg["kind"], int(cfg.get("BLOCK_M", fused_triton.block_m(M, "dq")))
    bn, bk, split = cfg["BLOCK_N"], cfg["BLOCK_K"], int(cfg.get("SPLIT_K", 1))
    tail = {"e_ptr": "*u8", "b_ptr": "*bf16", "y_ptr": "*bf16", "ws_ptr": "*fp32", "count_ptr": "*i32",
            "M": "i32", "N": "i32", "K": "i32"}
    common = {"GROUP": group, "HAS_BIAS": False, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split,
              "ASM": bool(cfg.get("ASM", True)), "PDL": bool(cfg.get("PDL", False)),
              "PREFETCH": int(cfg.get("PREFETCH", 0)), "EARLY": cfg.get("TRIGGER", "end") == "start"}
    if kind == "tma":
        sig = {"x_desc": f"tensordesc<bf16[{bm}, {bk}]>", "m_desc": f"tensordesc<i8[{bn}, {bk}]>", "m_ptr": "*i8",
               **tail, "stride_mn": "i32", "stride_en": "i32", "stride_eg": "constexpr"}
        const = {**common, "stride_eg": 1, "W_LEFT": bool(cfg.get("W_LEFT", True)), "DOT_F32": False,
                 "E_AHEAD": bool(cfg.get("E_AHEAD", True)), "BF16_SCALE": bool(cfg.get("BF16_SCALE", True))}
    elif kind == "dq":
        sig = {"x_ptr": "*bf16", "m_ptr": "*i8", **tail, "stride_xm": "i32", "stride_xk": "constexpr",
               "stride_mn": "i32", "stride_mk": "constexpr", "stride_en": "i32", "stride_eg": "constexpr"}
        const = {**common, "stride_xk": 1, "stride_mk": 1, "stride_eg": 1, "W_BF16": True, "DOT_F32": False,
                 "INPUT_PRECISION": "tf32", "EVEN_K": True, "X_ROWS": min(bm, max(2, triton.next_power_of_2(M))),
                 "E_AHEAD": bool(cfg.get("E_AHEAD", False)), "BF16_SCALE": bool(cfg.get("BF16_SCALE", False))}
    elif kind == "gemv_split":  # one row: M is the constexpr 1 Triton specializes it to
        sig = {"x_ptr": "*bf16", "m_ptr": "*i8", **tail, "M": "constexpr", "stride_xm": "i32",
               "stride_xk": "constexpr", "stride_mn": "i32", "stride_mk": "constexpr", "stride_en": "i32",
               "stride_eg": "constexpr"}
        const = {**{k: v for k, v in common.items() if k != "BLOCK_M"}, "M": 1, "stride_xk": 1, "stride_mk": 1,
                 "stride_eg": 1, "EVEN_K": True, "AHEAD": bool(cfg.get("AHEAD", False)),
                 "X_PER_ROW": bool(cfg.get("X_PER_ROW", False)), "E_ASM": bool(cfg.get("E_ASM", False))}
    else:
        raise ValueError(f"--offline config kind={kind!r}: allowed values are 'dq', 'tma', 'gemv_split'")
    names = list(sig)
    divisible = [n for n in names if sig[n] != "constexpr" and not sig[n].startswith("tensordesc")
                 and (n != "M" or M % 16 == 0)]
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    src = ASTSource(fused_triton.kernels()[kind], sig, const, attrs=attrs)
    kern = triton.compile(src, target=GPUTarget("cuda", capability, 32),
                          options={"num_warps": cfg.get("num_warps", 4), "num_stages": cfg.get("num_stages", 3)})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:  # the cubin Triton's own ptxas made
        f.write(kern.asm["cubin"])
        f.flush()
        usage = subprocess.run([_tool("cuobjdump"), "-res-usage", f.name], capture_output=True, text=True,
                               check=True).stdout
    regs, local = re.search(r"REG:(\d+).*?LOCAL:(\d+)", usage).groups()
    return kern, int(regs), int(local)


def _offline(args) -> int:
    from labkit import results

    rows = []
    for cfg in json.loads(args.configs):
        kern, regs, spills = offline_compile(cfg, args.batch, args.group)
        ops, _ = opcodes(kern.asm["cubin"])
        rows.append({"config": cfg, "registers": regs, "local_bytes": spills, "shared_bytes": kern.metadata.shared,
                     "total": sum(ops.values()), "opcodes": dict(ops.most_common())})
        print(cfg, "regs", regs, "local", spills, "smem", kern.metadata.shared, "total", sum(ops.values()),
              dict(ops.most_common(10)), flush=True)
    results.write_json(args.out, {"rows": rows, "batch": args.batch, "offline": "sm_90, no GPU"})
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", required=True, help="JSON list of launch configs")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--group", type=int, default=32)
    p.add_argument("--out", required=True)
    p.add_argument("--offline", action="store_true", help="compile for sm_90 without a GPU (registers, SASS)")
    args = p.parse_args(argv)
    if args.offline:
        return _offline(args)

    import torch

    from labkit import results
    from labkit.kernels import fused_triton

    N, K, g = 1024, 4096, args.group
    m = torch.randint(-127, 128, (N, K), dtype=torch.int8, device="cuda")
    e = torch.randint(120, 130, (N, K // g), dtype=torch.uint8, device="cuda")
    x = torch.randn(args.batch, K, device="cuda").bfloat16()
    rows = []
    for cfg in json.loads(args.configs):
        kern = fused_triton.kernels()[cfg["kind"]]
        before = {id(c) for cache in kern.device_caches.values() for c in cache[0].values()}
        fused_triton.launch(x, m, e, None, g, cfg)
        new = [c for cache in kern.device_caches.values() for c in cache[0].values() if id(c) not in before]
        ck = new[-1] if new else list(list(kern.device_caches.values())[0][0].values())[-1]
        ops, sass = opcodes(ck.asm["cubin"])
        tag = "_".join(f"{k}{v}" for k, v in cfg.items() if k != "kind")
        Path(args.out).with_suffix(f".{cfg['kind']}_{tag}.sass").write_text(sass)
        rows.append({"config": cfg, "registers": ck.n_regs, "spills": ck.n_spills, "total": sum(ops.values()),
                     "opcodes": dict(ops.most_common())})
        print(cfg, "regs", ck.n_regs, "total", sum(ops.values()), dict(ops.most_common(14)), flush=True)
    results.write_json(args.out, {"rows": rows, "batch": args.batch})
    return 0


if __name__ == "__main__":
    sys.exit(main())
