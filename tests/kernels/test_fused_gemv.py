"""The one-row kernel ``gemv_split`` of the fused MXINT8 linear (labkit/kernels/fused_gemv.py).

Triton's interpreter on CPU (TRITON_INTERPRET=1 per test) runs the kernel on small shapes; a CUDA GPU runs the
compiled kernel on the three benchmark shapes (``@pytest.mark.cuda``). Oracle and tolerance are
test_fused_mxint8.py's (``assert_bounded``): the float64 product of the operands the kernel multiplies, within
fp32 accumulation in any order plus one rounding to x's dtype (a whole bf16 ulp in the interpreter, whose
fp32 -> bf16 cast truncates)."""
import pytest
import torch
from test_fused_mxint8 import (
    HAS_TRITON,
    TINY,
    U_ACC,
    assert_bounded,
    assert_replays,
    make_weight,
    needs_gpu,
    needs_triton,
    oracle,
    rand_x,
    u_interp,
    u_round,
)


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from labkit.kernels import fused_triton

    assert type(fused_triton.kernels()["gemv_split"]).__name__ == "InterpretedFunction"
    return fused_triton


def cfg(bn, bk, split=1, **kw):
    return {"kind": "gemv_split", "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split, **kw}


# (N, K, group, BLOCK_N, BLOCK_K, SPLIT_K): ragged N; K no multiple of BLOCK_K * SPLIT_K (ragged last tile, a
# split with no tile); K a multiple (unmasked loads); one tile wider than K; group 16 and 64
CASES = [(40, 96, 32, 8, 64, 1), (33, 160, 32, 4, 32, 3), (17, 224, 32, 16, 64, 2), (24, 256, 32, 8, 64, 2),
         (9, 32, 32, 4, 128, 1), (50, 80, 16, 32, 16, 4), (12, 192, 64, 2, 64, 2)]


@needs_triton
@pytest.mark.parametrize("case", CASES, ids=lambda c: "N{}-K{}-g{}-bn{}-bk{}-sk{}".format(*c))
@pytest.mark.parametrize("bias", [False, True])
def test_interpreted_gemv_split_bf16(interpreter, case, bias):
    N, K, g, bn, bk, sk = case
    m, e = make_weight(N, K, g)
    x = rand_x((1, K), torch.bfloat16)
    b = torch.randn(N).bfloat16() if bias else None
    y = interpreter.launch(x, m, e, b, g, cfg(bn, bk, sk))
    assert_bounded(y, x, m, e, g, b, u_interp(torch.bfloat16))


@needs_triton
@pytest.mark.parametrize("case", CASES[:4], ids=lambda c: "N{}-K{}-g{}-bn{}-bk{}-sk{}".format(*c))
@pytest.mark.parametrize("ahead", [False, True])
def test_interpreted_gemv_split_x_per_row(interpreter, case, ahead):
    """X_PER_ROW: x loaded per W row through W-shaped pointers (E_ASM, the PTX exponent load, is GPU-only: the
    interpreter takes tl.load for it)."""
    N, K, g, bn, bk, sk = case
    m, e = make_weight(N, K, g)
    x, b = rand_x((1, K), torch.bfloat16), torch.randn(N).bfloat16()
    y = interpreter.launch(x, m, e, b, g, cfg(bn, bk, sk, AHEAD=ahead, X_PER_ROW=True, E_ASM=True))
    assert_bounded(y, x, m, e, g, b, u_interp(torch.bfloat16))


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("split,ahead", [(1, False), (3, True)])
def test_interpreted_gemv_split_fp16_fp32(interpreter, dtype, split, ahead):
    N, K, g = 20, 160, 32
    m, e = make_weight(N, K, g, spread=3)
    x, b = rand_x((1, K), dtype), torch.randn(N).to(dtype)
    y = interpreter.launch(x, m, e, b, g, cfg(4, 32, split, AHEAD=ahead))
    assert_bounded(y, x, m, e, g, b, u_interp(dtype))


@needs_triton
@pytest.mark.parametrize("split", [1, 2])
def test_interpreted_gemv_split_ahead_and_rows(interpreter, split):
    """AHEAD (the next tile's loads before this one's arithmetic) on ragged K; 3 rows (a program per row)."""
    N, K, g = 21, 224, 32
    m, e = make_weight(N, K, g)
    x = rand_x((3, K), torch.bfloat16)
    y = interpreter.launch(x, m, e, None, g, cfg(8, 64, split, AHEAD=True))
    assert_bounded(y, x, m, e, g, None, u_interp(torch.bfloat16))


@needs_triton
def test_interpreted_gemv_split_edge_exponents_and_strides(interpreter):
    """Exponents 0..6 (fp32-subnormal scales), 254 with |m| = 127, 255 (NaN groups); strided x and mantissa."""
    g, N, K = 16, 24, 64
    m_big, _ = make_weight(N, 2 * K, g)
    m = m_big[:, :K]
    e = torch.randint(100, 140, (N, K // g), dtype=torch.uint8, generator=torch.Generator().manual_seed(5))
    e[0] = torch.tensor([0, 3, 6, 7], dtype=torch.uint8)
    e[1, 1] = 255
    e[2, 2] = 254
    m[2, 2 * g:3 * g] = 127
    x = rand_x((K, 1), torch.float32).T * 2.0 ** -8  # stride (1, 1): a column of a (K, 1) tensor
    y = interpreter.launch(x, m, e, None, g, cfg(8, 32, 2))
    assert_bounded(y, x, m, e, g, None, u_interp(torch.float32))
    assert torch.isnan(y[:, 1]).all() and torch.isfinite(y[:, 2]).all() and y[:, 2].abs().min() > 1e30


@needs_triton
@pytest.mark.parametrize("split", [1, 3])
def test_interpreted_gemv_split_same_bits_and_counters_back_to_zero(interpreter, split):
    """Two runs give the same bits; the split-K arrival counters are left at 0 for the next call."""
    from labkit.kernels import fused_gemv

    N, K, g = 36, 192, 32
    m, e = make_weight(N, K, g)
    x = rand_x((1, K), torch.bfloat16)
    b = torch.randn(N).bfloat16()
    first = interpreter.launch(x, m, e, b, g, cfg(4, 32, split))
    assert torch.equal(interpreter.launch(x, m, e, b, g, cfg(4, 32, split)), first)
    if split > 1:
        counts = fused_gemv._counters(torch.device("cpu"), 1)
        assert counts.numel() >= 9 and not counts.any()


@needs_triton
def test_gemv_split_bad_configs_say_what_is_allowed(interpreter):
    check = interpreter.check_config
    assert check(cfg(8, 64), 32) == {**cfg(8, 64), "AHEAD": False, "X_PER_ROW": False, "E_ASM": False,
                                     "num_warps": 4, "num_stages": 1}
    bad = [(cfg(6, 64), r"BLOCK_N=6: allowed values are powers of two 1..256"),
           (cfg(512, 64), r"BLOCK_N=512: allowed values"),
           (cfg(8, 16), r"BLOCK_K=16: allowed values are powers of two >= group_size=32"),
           (cfg(8, 96), r"BLOCK_K=96: allowed values"),
           (cfg(8, 64, 0), r"SPLIT_K=0: allowed values are integers 1..64"),
           (cfg(8, 64, 2.0), r"SPLIT_K=2.0: allowed values"),
           (cfg(8, 64, AHEAD=2), r"AHEAD=2: allowed values are True, False"),
           (cfg(8, 64, X_PER_ROW="yes"), r"X_PER_ROW='yes': allowed values are True, False"),
           (cfg(8, 64, E_ASM=None), r"E_ASM=None: allowed values are True, False"),
           (cfg(8, 64, num_warps=3), r"num_warps=3: allowed values are 1, 2, 4, 8, 16"),
           (cfg(8, 64, num_stages=0), r"num_stages=0: allowed values are integers 1..8"),
           (cfg(8, 64, BLOCK_M=16), r"BLOCK_M=16: not a gemv_split key"),
           (cfg(8, 64, PDL=2), r"PDL=2: allowed values are True, False")]
    for c, msg in bad:
        with pytest.raises(ValueError, match=msg):
            check(c, 32)
    m, e = make_weight(8, 64, 32)
    with pytest.raises(ValueError, match=r"gemv_split config BLOCK_N=3"):
        interpreter.launch(rand_x((1, 64), torch.bfloat16), m, e, None, 32, cfg(3, 64))


@needs_triton
def test_flipped_one_row_pick_runs_in_the_interpreter(interpreter, monkeypatch):
    """With ONE_ROW_SPLIT (the one-line switch of pick_config to gemv_split at one row): test_fused_mxint8's rules
    test passes, the op runs the picked launch on ragged shapes, a K narrower than ONE_ROW's K tile narrows the tile and a group wider widens it."""
    import test_fused_mxint8 as base

    from labkit.kernels import fused_gemv, mxint8_linear

    monkeypatch.setattr(interpreter, "ONE_ROW_SPLIT", True)
    base.test_pick_config_follows_the_sweep(interpreter)
    for N, K in ((130, 288), (260, 64)):
        m, e = make_weight(N, K, 32)
        x = rand_x((1, K), torch.bfloat16)
        assert interpreter.picked(x, m, 32)["kind"] == "gemv_split"
        assert_bounded(mxint8_linear(x, m, e, 32), x, m, e, 32, None, u_interp(torch.bfloat16))
    assert interpreter.pick_config(1, 64, 96, 32)["BLOCK_K"] == 128
    wide = 2 * fused_gemv.ONE_ROW["BLOCK_K"]
    assert interpreter.pick_config(1, 64, 2 * wide, wide)["BLOCK_K"] == wide
    m, e = make_weight(9, 2 * wide, wide)
    x = rand_x((1, 2 * wide), torch.bfloat16)
    assert_bounded(mxint8_linear(x, m, e, wide), x, m, e, wide, None, u_interp(torch.bfloat16))


def test_one_row_constant_is_a_valid_config():
    if not HAS_TRITON:
        pytest.skip("triton is not installed: the config check imports it")
    from labkit.kernels import fused_gemv, fused_triton

    assert fused_triton.check_config(fused_gemv.ONE_ROW, 32)["kind"] == "gemv_split"


# ------------------------------------------------------------------------------------------------
# CUDA GPU: the compiled kernel
# ------------------------------------------------------------------------------------------------

GPU_CONFIGS = [cfg(8, 512, 1, num_warps=4), cfg(4, 1024, 2, AHEAD=True, num_warps=4), cfg(2, 256, 4, num_warps=2),
               cfg(16, 256, 1, num_warps=8, num_stages=2), cfg(8, 1024, 1, X_PER_ROW=True, E_ASM=True),
               cfg(4, 512, 3, num_warps=2, AHEAD=True, X_PER_ROW=True, E_ASM=True), cfg(8, 512, 2, E_ASM=True)]


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("shape", [(4096, 4096), (14336, 4096), (28672, 8192)], ids=lambda s: "{}x{}".format(*s))
def test_gpu_gemv_split_one_row_shapes(shape):
    """The benchmark's three shapes at one row, bf16 x with bias; then the same bits again, and from a CUDA
    graph replay (the reused split-K counters)."""
    from labkit.kernels import fused_triton
    from labkit.perf.timing import capture

    N, K = shape
    g = 32
    m, e = make_weight(N, K, g, spread=3)
    x, b = rand_x((1, K), torch.bfloat16), torch.randn(N).bfloat16()
    ref, S = oracle(x, m, e, g, b)  # once a shape: assert_bounded's bound, without recomputing the oracle
    tol = u_round(torch.bfloat16) * ref.abs() + (1 + u_round(torch.bfloat16)) * (K + 2) * U_ACC * S + TINY[x.dtype]
    mc, ec, xc, bc = m.cuda(), e.cuda(), x.cuda(), b.cuda()
    for c in GPU_CONFIGS:
        y = fused_triton.launch(xc, mc, ec, bc, g, c)
        excess = (y.cpu().double() - ref).abs() - tol
        assert excess.max() <= 0, f"{c}: {int((excess > 0).sum())} entries outside the bound"
        assert torch.equal(fused_triton.launch(xc, mc, ec, bc, g, c), y)
        assert_replays(capture(lambda c=c: fused_triton.launch(xc, mc, ec, bc, g, c)), y, times=2)


@pytest.mark.cuda
@needs_gpu
def test_gpu_gemv_split_dtypes_and_edges():
    """fp16/fp32 x, the PTX and Triton decodes, the PTX exponent load (E_ASM) masked and not, ragged N and K,
    every small exponent and NaN groups."""
    from labkit.kernels import fused_triton

    g, N, K = 32, 300, 1056
    m, e = make_weight(N, K, g)
    e[0, :7] = torch.arange(7, dtype=torch.uint8)
    e[1, 3] = 255
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        x = rand_x((1, K), dtype) * (2.0 ** -8 if dtype == torch.float16 else 1.0)
        for c in (cfg(8, 256, 3), cfg(4, 64, 1, ASM=False), cfg(16, 128, 2, AHEAD=True),
                  cfg(8, 128, 3, X_PER_ROW=True, E_ASM=True), cfg(4, 64, 1, AHEAD=True, X_PER_ROW=True, E_ASM=True)):
            y = fused_triton.launch(x.cuda(), m.cuda(), e.cuda(), None, g, c)
            assert_bounded(y.cpu(), x, m, e, g, None, u_round(dtype))


def test_one_row_sweep_dry_run(tmp_path, monkeypatch):
    """benchmarks/mxint8/fused_linear_sweep.py's one-row sweep end to end on CPU (interpreter, a tiny shape): the
    JSON it writes."""
    if not HAS_TRITON:
        pytest.skip("triton is not installed: the dry run launches the kernel in its interpreter")
    import importlib.util
    import json
    from pathlib import Path

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "mxint8" / "fused_linear_sweep.py"
    spec = importlib.util.spec_from_file_location("fused_linear_sweep", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert 30 <= len(bench.one_row_candidates()) <= 80
    assert bench.one_row_candidates() == bench.candidates(1, 4096, False, ("gemv_split",))
    configs = [cfg(8, 64, 2, X_PER_ROW=True), cfg(3, 64)]  # the second is refused: recorded, not fatal
    out = tmp_path / "m1.json"
    assert bench.main(["--dry-run", "--batches", "1", "--configs", json.dumps(configs), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    (row,) = result["rows"]
    picked = next(c for c in row["configs"] if c.get("picked"))
    assert result["dry_run"] and row["batch"] == 1 and picked["ok"] and row["bf16_ok"]
    assert row["configs"][0]["ok"] and "BLOCK_N=3" in row["configs"][1]["error"]
    assert row["best"] in (row["configs"][0], picked)
