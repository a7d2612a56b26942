"""Opcode histogram of the fused MXINT8 linear's compiled kernels (SASS via cuobjdump): what each W element
costs in instructions, per configuration.

    python benchmarks/fused_linear_sass.py --configs '[{"kind": "dq", ...}, ...]' --batch 16 --out sass.json
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def opcodes(cubin: bytes) -> tuple[collections.Counter, str]:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run(["cuobjdump", "-sass", f.name], capture_output=True, text=True, check=True).stdout
    ops = collections.Counter()
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            ops[m.group(1).split(".")[0]] += 1
    return ops, sass


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", required=True, help="JSON list of launch configs")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--group", type=int, default=32)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)

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
    Path(args.out).write_text(json.dumps({"rows": rows, "batch": args.batch, "provenance": results.provenance()},
                                         indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
