"""MXINT8 -> bf16 dequantization bandwidth on a CUDA GPU, against a device-to-device copy: the regeneration
step behind ``figures/lab4/mxint8_bandwidth.json``, which the Lab 4 notebook draws and its answers quote.

    python -m labkit.kernels.bandwidth [--out figures/lab4/mxint8_bandwidth.json] [--sizes ...]
        [--groups 16 32 128] [--no-compile] [--reps 50]

Times the CuTe kernels (vectorised fast path and the lab-structure tile kernel), the eager PyTorch
reference and torch.compile of the same formula, for every size and group size, checks each output
bit for bit against the reference, prints GB/s and % of copy, and writes the JSON (with the device
and versions). Method and byte counts: ``labkit.kernels.bench``.
"""
from __future__ import annotations

import argparse
import sys

from .. import results, settings
from ..report import table
from . import bench, build_config

COMMAND = "python -m labkit.kernels.bandwidth"
DEFAULT_OUT = settings.REPO_ROOT / "figures" / "lab4" / "mxint8_bandwidth.json"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--sizes", type=int, nargs="+", default=list(bench.DEFAULT_SIZES))
    p.add_argument("--groups", type=int, nargs="+", default=list(bench.DEFAULT_GROUPS))
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile (saves its compile time)")
    p.add_argument("--reps", type=int, default=50)
    args = p.parse_args(argv)
    for n in args.sizes:
        for g in args.groups:
            if n % g:
                p.error(f"--groups {g} does not divide --sizes {n}")

    import torch

    out = bench.sweep(args.sizes, args.groups, compile=not args.no_compile, reps=args.reps)
    versions = results.versions()
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        versions["triton"] = None
    from importlib import metadata

    try:
        versions["nvidia-cutlass"] = metadata.version(build_config.CUTLASS_PACKAGE)
    except metadata.PackageNotFoundError:
        versions["nvidia-cutlass"] = None
    out.update(device=torch.cuda.get_device_name(0), versions=versions,
               sm_count=torch.cuda.get_device_properties(0).multi_processor_count,
               provenance=results.provenance(), command=" ".join([COMMAND, *argv]))
    path = results.write_json(args.out, out, indent=2)
    rows = bench.summary_table(out)
    cols = ["n", "g", "copy GB/s"] + [f"{i} {k}" for i in ("cute_vec", "cute_tile", "eager", "compile")
                                      for k in ("GB/s", "%copy") if f"{i} {k}" in rows[0]]
    print(f"\n{out['device']}, torch {versions['torch']}, CUDA {versions['cuda']}\n")
    print(table(rows, cols, floatfmt=".0f"))
    inexact = [r for r in out["rows"] if not r["bit_exact"]]
    print(f"\nwrote {path}; outputs not bit-exact vs the reference: "
          f"{[(r['n'], r['group_size'], r['impl']) for r in inexact] or 'none'}")
    return 1 if any(r["impl"].startswith("cute") for r in inexact) else 0


if __name__ == "__main__":
    sys.exit(main())
