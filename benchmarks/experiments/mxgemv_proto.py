"""An experiment kept for its measurement (benchmarks/experiments/mxgemv_proto.json, H100, session 16): a CUDA GEMV
for 1-4 rows of x (mxgemv_proto.cu: 16-byte W loads per lane, x in shared memory as fp32, per-group scale on the
partial sum) against cuBLAS bf16 and the Triton pick; correctness against float64 first. Not part of labkit.

    nvcc -O3 -arch=sm_90a -shared -Xcompiler -fPIC -o mxgemv_proto.so benchmarks/experiments/mxgemv_proto.cu
    python benchmarks/experiments/mxgemv_proto.py      # on a CUDA machine, mxgemv_proto.so in the cwd

Result: 1 row ties the Triton gemv (9.5 vs 9.5 us at 4096x4096); 4 rows lose to the Triton dq kernel
(14.8 vs 10.8 us): four FMAs and a shared-memory read per weight element per row make it compute-bound.
"""
import ctypes, json, os, sys, time
import torch, torch.nn.functional as F
from labkit import results
from labkit.kernels import fused_triton
from labkit.kernels.timing import graph_ms, rel_error, rotation, weight_copies
lib = ctypes.CDLL(os.path.abspath("mxgemv_proto.so"))
lib.mx_gemv.restype = ctypes.c_int
lib.mx_gemv.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 5 + [ctypes.c_void_p]
def gemv(x, m, e, rows, unroll):
    y = torch.empty(x.shape[0], m.shape[0], dtype=torch.bfloat16, device="cuda")
    rc = lib.mx_gemv(x.data_ptr(), m.data_ptr(), e.data_ptr(), y.data_ptr(), x.shape[0], m.shape[0], x.shape[1], rows,
                     unroll, torch.cuda.current_stream().cuda_stream)
    if rc:
        raise RuntimeError(f"mx_gemv rc={rc}")
    return y
dev = torch.device("cuda"); props = torch.cuda.get_device_properties(dev)
gen = torch.Generator(device=dev).manual_seed(0)
# correctness: every exponent byte incl. subnormal scales, ragged N
m, e = torch.randint(-127, 128, (77, 1024), dtype=torch.int8, device=dev, generator=gen), torch.randint(0, 255, (77, 32), dtype=torch.uint8, device=dev, generator=gen)
e[0, :7] = torch.arange(7, dtype=torch.uint8, device=dev)
wref = m.double() * torch.pow(2.0, e.double() - 133).repeat_interleave(32, 1)
bad = 0
for M in (1, 2, 4):
    x = torch.randn(M, 1024, device=dev, generator=gen).bfloat16() * 2.0 ** -100
    ref = x.double() @ wref.T
    for rows, un in ((2, 4), (4, 2)):
        y = gemv(x, m, e, rows, un)
        err = float((y.double() - ref).norm() / ref.norm())
        again = torch.equal(y, gemv(x, m, e, rows, un))
        print("check", M, rows, un, f"{err:.2e}", again); bad += (err > 2 ** -7) or not again
print("correctness failures:", bad, flush=True)
out = {"rows": [], "provenance": results.provenance(), "what": "CUDA GEMV prototype (1-4 rows) vs cuBLAS bf16 and the Triton pick, graph replay, rotating weights"}
cfgs = {1: [(2, 4), (4, 2), (4, 4), (2, 8)], 4: [(2, 4), (4, 2), (2, 2), (1, 4), (2, 8)]}
for shape in ("4096x4096", "14336x4096", "28672x8192"):
    N, K = map(int, shape.split("x"))
    packed = N * K + N * K // 32
    ws = weight_copies(N, K, 32, rotation(packed, props.L2_cache_size), gen)
    for M in (1, 4):
        x = torch.randn(M, K, device=dev, generator=gen).bfloat16()
        m0, e0, w0 = ws[0]
        row = {"N": N, "K": K, "batch": M, "bf16_ms": graph_ms([lambda w=w: F.linear(x, w) for _, _, w in ws]),
               "triton_ms": graph_ms([lambda m=m, e=e: fused_triton.launch(x, m, e, None, 32) for m, e, _ in ws]), "cuda": []}
        for rows, un in cfgs[M]:
            err = rel_error(gemv(x, m0, e0, rows, un), x, w0)
            ms = graph_ms([lambda m=m, e=e: gemv(x, m, e, rows, un) for m, e, _ in ws])
            row["cuda"].append({"rows": rows, "unroll": un, "ms": ms, "rel_err": err})
        best = min(row["cuda"], key=lambda r: r["ms"])
        print(f"{shape} M={M}: bf16 {row['bf16_ms']*1e3:.1f} us, triton {row['triton_ms']*1e3:.1f} us ({row['bf16_ms']/row['triton_ms']:.2f}x), "
              f"cuda best {best['ms']*1e3:.1f} us ({row['bf16_ms']/best['ms']:.2f}x) rows {best['rows']} unroll {best['unroll']} err {best['rel_err']:.1e} | "
              + " ".join(f"{r['rows']}/{r['unroll']}:{r['ms']*1e3:.1f}" for r in row["cuda"]), flush=True)
        out["rows"].append(row)
    del ws
json.dump(results._jsonable(out), open(os.environ.get("OUT", "/tmp") + "/mxgemv_proto.json", "w"), indent=1)
