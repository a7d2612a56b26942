"""A small MXINT8 kernel workload for compute-sanitizer (memcheck): both kernels, ragged tiles, tails,
a misaligned input, group sizes that are and are not multiples of 16; each output checked bit for bit.

    compute-sanitizer --tool memcheck --error-exitcode 9 python benchmarks/mxint8/mxint8_sanitize.py
"""
import sys

import torch

from labkit.kernels import dequantize_mxint8, extension

CASES = [((1, 15), 5), ((3, 48), 3), ((7, 1000), 40), ((5, 4112), 16), ((2, 8192), 128), ((1, 40000), 8)]


def main() -> int:
    if not extension.load():
        print(extension.describe())
        return 2
    op = torch.ops.labkit_mxint8.dequantize
    gen = torch.Generator(device="cuda").manual_seed(0)
    bad = 0
    for shape, g in CASES:
        m = torch.randint(-128, 128, shape, dtype=torch.int8, device="cuda", generator=gen)
        e = torch.randint(0, 256, (*shape[:-1], shape[-1] // g), dtype=torch.uint8, device="cuda", generator=gen)
        want = dequantize_mxint8(m.cpu(), e.cpu(), g)
        for impl in (1, 2):
            out = op(m, e, g, impl).cpu()
            same = torch.equal(torch.isnan(out), torch.isnan(want)) and \
                bool(((out.view(torch.int16) == want.view(torch.int16)) | torch.isnan(out)).all())
            bad += not same
            print(f"shape={shape} g={g} impl={impl}: {'bit-exact' if same else 'MISMATCH'}")
    mis = torch.randint(-128, 128, (4097,), dtype=torch.int8, device="cuda", generator=gen)[1:]
    e = torch.randint(0, 256, (4096,), dtype=torch.uint8, device="cuda", generator=gen)
    out = op(mis, e, 1, 0).cpu()  # auto -> tile kernel on a misaligned pointer
    same = bool(((out.view(torch.int16) == dequantize_mxint8(mis.cpu(), e.cpu(), 1).view(torch.int16))
                 | torch.isnan(out)).all())
    bad += not same
    print(f"misaligned input (auto -> tile): {'bit-exact' if same else 'MISMATCH'}")
    torch.cuda.synchronize()
    print(f"{bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
