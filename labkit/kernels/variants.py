"""Compare builds of the fast MXINT8 kernel that differ by compile-time switches, on a GPU: the regeneration
step behind ``figures/lab4/mxint8_variants.json`` (and the measured choice of csrc's defaults).

    python -m labkit.kernels.variants [--variants base unroll4:LABKIT_MXINT8_VEC_UNROLL_OVERRIDE=4 ...]
        [--sizes ...] [--group 32] [--out JSON]

A variant is ``name[:DEFINE[=V][,DEFINE...]]``: csrc/ JIT-built with those -D switches (the ones
csrc/mxint8_dequant.cuh reads: LABKIT_MXINT8_VEC_UNROLL_OVERRIDE=U, LABKIT_MXINT8_VEC_GRID_STRIDE,
LABKIT_MXINT8_VEC_DIVIDE). All variants are built in parallel processes, then
each is timed in its own process, one after another (each build registers the same op namespace, so one
per process), with the method of labkit/kernels/bench.py; outputs are checked bit for bit against the
reference. Prints one line per (variant, size): GB/s and % of a copy moving the same bytes.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from .. import settings

ROOT = settings.REPO_ROOT
COMMAND = "python -m labkit.kernels.variants"

CHILD = r'''
import json, sys, torch
sys.path.insert(0, {root!r})
from torch.utils.cpp_extension import load
from labkit import settings
from labkit.kernels import bench, build_config
from labkit.quant.formats.mxint import dequantize_mxint8
from labkit.perf.timing import MedianTimer
name, defines, sizes, g, time_it = {name!r}, {defines!r}, {sizes}, {g}, {time_it}
build_dir = settings.cache_dir() / "torch_extensions" / f"variant_{{name}}"
build_dir.mkdir(parents=True, exist_ok=True)
load(name=f"labkit_mxint8_{{name}}", sources=[str(p) for p in build_config.source_paths()],
     extra_include_paths=[str(build_config.cutlass_include_dir()), str(build_config.CSRC)],
     extra_cflags=list(build_config.CXX_FLAGS),
     extra_cuda_cflags=list(build_config.NVCC_FLAGS) + [f"-D{{d}}" for d in defines],
     build_directory=str(build_dir), is_python_module=False)
if not time_it:
    sys.exit(0)
op = torch.ops.labkit_mxint8.dequantize
timer = MedianTimer(torch.device("cuda"), reps=30)
gen = torch.Generator(device="cuda").manual_seed(0)
for n in sizes:
    src = torch.empty(3 * n // 2, dtype=torch.uint8, device="cuda"); dst = torch.empty_like(src)
    copy = 2 * src.numel() / timer(lambda: dst.copy_(src)) / 1e6
    m = torch.randint(-127, 128, (n,), dtype=torch.int8, device="cuda", generator=gen)
    e = torch.randint(100, 141, (n // g,), dtype=torch.uint8, device="cuda", generator=gen)
    exact = bench.same_bits(op(m, e, g, 1), dequantize_mxint8(m, e, g))
    gbps = bench.traffic_bytes(n, g) / timer(lambda: op(m, e, g, 1)) / 1e6
    print(json.dumps({{"variant": name, "defines": defines, "n": n, "g": g, "GBps": gbps, "copy_GBps": copy,
                      "fraction_of_copy": gbps / copy, "bit_exact": exact}}), flush=True)
'''


def parse(spec: str) -> tuple[str, list[str]]:
    name, _, defs = spec.partition(":")
    return name, [d for d in defs.split(",") if d]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    p.add_argument("--variants", nargs="+", default=[
        "committed", "grid_stride:LABKIT_MXINT8_VEC_GRID_STRIDE", "divide:LABKIT_MXINT8_VEC_DIVIDE",
        "unroll4:LABKIT_MXINT8_VEC_UNROLL_OVERRIDE=4", "unroll16:LABKIT_MXINT8_VEC_UNROLL_OVERRIDE=16"])
    p.add_argument("--sizes", type=int, nargs="+", default=[1 << 24, 1 << 26, 8192 * 28672])
    p.add_argument("--group", type=int, default=32)
    p.add_argument("--repeat", type=int, default=1, help="time each variant this many times (interleaved)")
    p.add_argument("--out", default=None, help="also write the rows as JSON here")
    args = p.parse_args(argv)
    variants = [parse(v) for v in args.variants]
    code = lambda name, defs, time_it: CHILD.format(root=str(ROOT), name=name, defines=defs,  # noqa: E731
                                                    sizes=args.sizes, g=args.group, time_it=time_it)
    builds = {name: subprocess.Popen([sys.executable, "-c", code(name, defs, False)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True) for name, defs in variants}
    failed = set()
    for name, proc in builds.items():
        _, err = proc.communicate()
        if proc.returncode:
            print(f"{name}: build failed\n{err[-1500:]}")
            failed.add(name)
    rows = []
    for _ in range(args.repeat):
        for name, defs in variants:
            if name in failed:
                continue
            out = subprocess.run([sys.executable, "-c", code(name, defs, True)], capture_output=True, text=True)
            if out.returncode:
                print(f"{name}: failed\n{out.stderr[-1500:]}")
                continue
            for line in out.stdout.splitlines():
                if line.startswith("{"):
                    r = json.loads(line)
                    rows.append(r)
                    print(f"{name:>14} n={r['n']:>10} g={r['g']}: {r['GBps']:7.0f} GB/s "
                          f"{100 * r['fraction_of_copy']:5.1f}% of copy ({r['copy_GBps']:.0f})  exact={r['bit_exact']}",
                          flush=True)
    if args.out:  # the shape of the committed figures/lab4/mxint8_variants.json, provenance included
        from .. import results

        what = ("builds of the fast MXINT8 kernel differing only in compile-time switches, each JIT-built by "
                f"{COMMAND} and timed in its own process with labkit/kernels/bench.py's method; "
                "outputs checked bit for bit against the reference")
        prov = results.provenance()
        Path(args.out).write_text(json.dumps({"what": what, "device": prov["device"], "rows": rows, "provenance": prov,
                                              "command": " ".join([COMMAND, *argv])}, indent=1) + "\n")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
