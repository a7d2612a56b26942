"""fp32 vs MXINT8 memory on a CUDA GPU for labkit's default classifier and a DeBERTa-xlarge-sized BERT.

    python benchmarks/mxint8/mxint8_memory.py [--profile full]

Measures parameter bytes, resident bytes and the peak of one fp32 inference forward
(torch.cuda.max_memory_allocated) with labkit.kernels.memory.compare, using the Lab 4 MXINT8 settings
of the profile, and saves them as figures/lab4/mxint8_memory.json (the notebook's format) with
provenance; the Lab 4 notebook shows these numbers on machines without a GPU.
"""
import argparse
import sys

import torch

from labkit.kernels import exclude, extension, memory
from labkit.labs import lab4_memory
from labkit.run.profiles import lab_settings
from labkit.results import save_results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="full", choices=["smoke", "quick", "full"])
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("mxint8_memory: needs a CUDA GPU", file=sys.stderr)
        return 2
    S = lab_settings("lab4_mxint8", args.profile)
    extension.load()
    print(extension.describe())
    builders = {name: (lambda build=build: build("cuda")) for name, build in lab4_memory.builders(S).items()}
    measured = {}
    for name, build in builders.items():
        c = memory.compare(build, S["group_size"], S["memory_batch"], S["memory_seq"], exclude("classifier"))
        measured[name] = c
        for fmt in ("fp32", "mxint8"):
            r = c[fmt]
            print(f"{name:45s} {r['format']:10s} params {r['bytes']['total'] / 1e6:9.1f} MB  resident "
                  f"{r['resident'] / 1e6:9.1f} MB  peak {r['peak'] / 1e6:9.1f} MB")
        print(f"  saving: parameters {c['saving_parameter_bytes']:.1%}, peak {c['saving_peak']:.1%}; theory "
              f"{c['theory_quantized_tensors']:.1%} per tensor, {c['theory_whole_model']:.1%} whole model")
    path = save_results("lab4", "mxint8_memory", {"measured": measured, "kernel_path": extension.describe()}, S)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
