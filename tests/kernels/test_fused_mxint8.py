"""Fused MXINT8 weight-only linear (labkit.kernels.fused_linear / fused_triton).

Three tiers, each honest about what it ran:
- always (CPU): the op's dequantize-then-matmul path, validation, describe(), autograd, MXINT8Linear wiring;
- Triton's interpreter on CPU (TRITON_INTERPRET=1 set per test): the kernel itself, when triton imports;
  skipped with the reason otherwise (a skip is not a pass);
- a CUDA GPU: the compiled kernels, with pick_config's choice and with fixed configs.

Oracle: ``y_ref = x @ W^T + b`` in float64 from the operands the kernel multiplies (W dequantized exactly,
cast to x's dtype; b cast to x's dtype). Tolerance, element by element (``assert_bounded``):

    |y - y_ref| <= u_out * |y_ref| + (1 + u_out) * (K + 2) * 2^-23 * S + tiny,   S = |x| @ |W|^T + |b|

- ``(K + 2) * 2^-23 * S`` bounds fp32 accumulation in any order (split-K included): K - 1 additions, one
  rounding per product (fp32 inputs; bf16/fp16 products are exact in fp32) and the bias add, with unit
  roundoff 2^-23 rather than 2^-24 so that a tensor core whose fp32 adds truncate is still covered;
- ``u_out``: the one rounding of the fp32 sum to x's dtype, half an ulp (eps/2: bf16 2^-8, fp16 2^-11,
  fp32 2^-24) where it rounds to nearest, a whole ulp (bf16 2^-7) in the Triton 3.9 interpreter, whose
  fp32 -> bf16 cast truncates;
- ``tiny``: the dtype's smallest subnormal (fp16 results near 0).
NaN must appear exactly where the oracle has it (exponent 255 groups).
"""
import importlib.util
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from labkit.kernels import MXINT8FusedFallbackWarning, MXINT8Linear, fused_linear, mxint8_linear, quantize_mxint8
from labkit.quant.formats.mxint import dequantize_mxint8

HAS_TRITON = importlib.util.find_spec("triton") is not None
CUDA = torch.cuda.is_available()
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed, so the kernel's interpreter "
                                  "tests cannot run (pip install triton); the kernel is NOT tested here")
needs_gpu = pytest.mark.skipif(not (CUDA and HAS_TRITON), reason="needs a CUDA GPU and triton")
U_ACC = 2.0 ** -23
TINY = {torch.bfloat16: 2.0 ** -133, torch.float16: 2.0 ** -24, torch.float32: 2.0 ** -149}


def u_round(dtype, truncates=False) -> float:
    return torch.finfo(dtype).eps * (1.0 if truncates else 0.5)


def make_weight(N, K, g, seed=0, spread=6):
    """Packed MXINT8 weight whose rows span 2^-spread .. 2^spread (varied exponents)."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(N, K, generator=gen) * 2.0 ** torch.randint(-spread, spread + 1, (N, 1), generator=gen)
    return quantize_mxint8(w, g)


def oracle(x, m, e, g, bias):
    w = dequantize_mxint8(m, e, g, dtype=torch.float32).to(x.dtype).double()
    xd = x.double().reshape(-1, x.shape[-1])
    b = bias.to(x.dtype).double() if bias is not None else torch.zeros(w.shape[0], dtype=torch.float64)
    ref = xd @ w.T + b
    with torch.no_grad():  # NaN weights (E = 255) make S NaN there; those entries are compared as NaN
        S = xd.abs() @ w.abs().T + b.abs()
    return ref.reshape(*x.shape[:-1], -1), S.reshape(*x.shape[:-1], -1)


def assert_bounded(y, x, m, e, g, bias, u_out):
    assert y.dtype == x.dtype and y.shape == (*x.shape[:-1], m.shape[0])
    ref, S = oracle(x, m, e, g, bias)
    K = x.shape[-1]
    yd = y.detach().double()
    nan = torch.isnan(ref)
    assert torch.equal(torch.isnan(yd), nan), "NaN positions differ from the oracle"
    tol = u_out * ref.abs() + (1 + u_out) * (K + 2) * U_ACC * S + TINY[x.dtype]
    err = (yd - ref).abs()
    bad = (err > tol) & ~nan
    assert not bad.any(), (f"{int(bad.sum())} of {bad.numel()} entries outside the bound; worst excess "
                           f"{float((err - tol)[~nan].max()):.3g}, max |err| {float(err[~nan].max()):.3g}")


def assert_replays(captured, expected: torch.Tensor, times: int) -> None:
    """Each replay of a captured (graph, out) (``timing.capture``), ``out`` zeroed first, rewrites ``expected``'s
    bits."""
    graph, out = captured
    for _ in range(times):
        out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, expected)


def rand_x(shape, dtype, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# ------------------------------------------------------------------------------------------------
# Always: the dequantize-then-matmul path on CPU, checks, describe, autograd, MXINT8Linear
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def no_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


@pytest.mark.parametrize("M", [1, 3, 17, 64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("bias", [False, True])
def test_cpu_dequant_path_matches_oracle(no_interpreter, M, dtype, bias):
    N, K, g = 48, 96, 32
    m, e = make_weight(N, K, g)
    x = rand_x((M, K), dtype)
    b = torch.randn(N) if bias else None
    before = fused_linear.path_counts["dequant"]
    y = mxint8_linear(x, m, e, g, b)
    assert fused_linear.path_counts["dequant"] == before + 1
    assert_bounded(y, x, m, e, g, b, u_round(dtype))


def test_cpu_path_is_named(no_interpreter, monkeypatch):
    text = fused_linear.describe("cpu")
    assert text.startswith("MXINT8 linear on cpu: dequantize-then-matmul (reason: ")
    assert ("CPU tensors" in text) if HAS_TRITON else ("Triton is not importable" in text)
    assert fused_linear.path_for(torch.zeros(2, 32), 32)[0] == "dequant"
    monkeypatch.setenv("LABKIT_MXINT8_TRITON", "0")
    assert "disabled by LABKIT_MXINT8_TRITON=0" in fused_linear.describe("cuda")


def test_bad_inputs_say_what_is_allowed():
    m, e = make_weight(8, 80, 16)
    with pytest.raises(ValueError, match=r"group_size=48 does not divide .*allowed values: divisors of 80: "
                                         r"1, 2, 4, 5, 8, 10, 16, 20, 40, 80"):
        mxint8_linear(torch.randn(2, 80), m, torch.zeros(8, 2, dtype=torch.uint8), 48)
    with pytest.raises(ValueError, match=r"last dimension must be in_features=80"):
        mxint8_linear(torch.randn(2, 64), m, e, 16)
    with pytest.raises(ValueError, match=r"bias must be a floating-point \(8,\) tensor"):
        mxint8_linear(torch.randn(2, 80), m, e, 16, torch.zeros(7))
    with pytest.raises(TypeError, match="mantissa must be a torch.int8 tensor"):
        mxint8_linear(torch.randn(2, 80), m.float(), e, 16)
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        mxint8_linear(torch.ones(2, 80, dtype=torch.int32), m, e, 16)
    with pytest.raises(ValueError, match=r"exponent shape \(8, 4\) does not match"):
        mxint8_linear(torch.randn(2, 80), m, torch.zeros(8, 4, dtype=torch.uint8), 16)


def test_opcheck_and_autograd_on_the_dequant_path(no_interpreter):
    m, e = make_weight(24, 64, 32)
    x = torch.randn(2, 3, 64, requires_grad=True)
    b = torch.randn(24, requires_grad=True)
    torch.library.opcheck(torch.ops.labkit.mxint8_linear.default, (x, m, e, b, 32))
    w = dequantize_mxint8(m, e, 32, dtype=torch.float32)
    x2, b2 = x.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    g = torch.randn(2, 3, 24)
    (mxint8_linear(x, m, e, 32, b) * g).sum().backward()
    (F.linear(x2, w, b2) * g).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(b.grad, b2.grad)


def test_empty_rows_and_float64(no_interpreter):
    m, e = make_weight(8, 32, 32)
    assert mxint8_linear(torch.zeros(0, 32), m, e, 32).shape == (0, 8)
    x = torch.randn(3, 32, dtype=torch.float64)
    torch.testing.assert_close(mxint8_linear(x, m, e, 32), x @ dequantize_mxint8(m, e, 32, torch.float64).T)


def test_mxint8linear_paths_on_cpu(no_interpreter):
    lin = torch.nn.Linear(64, 24)
    q = MXINT8Linear.from_linear(lin, 32)
    x = torch.randn(5, 64)
    assert q.path(x) == ("dequant", fused_linear.path_for(x, 32)[1])
    assert "dequantize-then-matmul" in q.describe("cpu") and "impl='auto'" in repr(q)
    w = dequantize_mxint8(q.mantissa, q.exponent, 32, dtype=torch.float32)
    torch.testing.assert_close(q(x), F.linear(x, w, lin.bias), rtol=0, atol=0)
    assert MXINT8Linear.from_linear(lin, 32, impl="dequant").describe() == \
        "MXINT8Linear on cuda: dequantize-then-matmul (impl='dequant')"
    with pytest.raises(RuntimeError, match="impl='fused' but the fused kernel cannot run here: "):
        MXINT8Linear.from_linear(lin, 32, impl="fused")(x)
    with pytest.raises(ValueError, match="impl='triton': allowed values are 'auto', 'fused', 'dequant'"):
        MXINT8Linear(64, 24, impl="triton")


# ------------------------------------------------------------------------------------------------
# Triton's interpreter on CPU: the kernel's indexing, masks, split-K, decode and epilogue
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from labkit.kernels import fused_triton

    for kernel in fused_triton.kernels().values():  # the interpreter, not a compiled kernel, runs
        assert type(kernel).__name__ == "InterpretedFunction"
    return fused_triton


def u_interp(dtype):
    return u_round(dtype, truncates=dtype == torch.bfloat16)


# dq kernel (N, K, group, BLOCK_N, BLOCK_K, SPLIT_K): ragged N and K tiles, split-K with an empty last split,
# a group wider than BLOCK_K, a tile wider than K, tiles that divide K (the unmasked loads)
CASES = [(40, 96, 32, 32, 64, 1), (33, 80, 16, 16, 32, 2), (64, 192, 64, 32, 32, 2), (24, 160, 32, 16, 64, 3),
         (17, 32, 32, 32, 64, 1), (50, 224, 32, 32, 32, 4), (64, 256, 32, 32, 64, 2)]
# gemv kernel (N, K, group, BLOCK_N, BLOCK_K): ragged N, a K of fewer groups than a tile, several tiles
GEMV_CASES = [(40, 96, 32, 16, 64), (33, 80, 16, 8, 32), (64, 192, 64, 4, 128), (17, 32, 32, 16, 256),
              (50, 224, 32, 32, 64)]


@needs_triton
@pytest.mark.parametrize("case", CASES, ids=lambda c: "N{}-K{}-g{}-bn{}-bk{}-sk{}".format(*c))
@pytest.mark.parametrize("M", [1, 3, 17, 64])
def test_interpreted_dq_kernel_bf16(interpreter, case, M):
    """M = 1 and 3: fewer rows than the MMA's 16, loaded once and repeated; 17: a ragged row block."""
    N, K, g, bn, bk, sk = case
    m, e = make_weight(N, K, g, seed=M)
    x = rand_x((M, K), torch.bfloat16, seed=N)
    b = torch.randn(N) if M % 2 else None  # bias on odd M, none on even
    y = interpreter.launch(x, m, e, b.bfloat16() if b is not None else None, g,
                           {"kind": "dq", "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk})
    assert_bounded(y, x, m, e, g, b, u_interp(torch.bfloat16))


@needs_triton
@pytest.mark.parametrize("case", CASES[:4], ids=lambda c: "N{}-K{}-g{}-bn{}-bk{}-sk{}".format(*c))
@pytest.mark.parametrize("w_left", [False, True])
@pytest.mark.parametrize("M", [3, 64])
def test_interpreted_tma_kernel_bf16(interpreter, case, w_left, M):
    """The tma kernel: tiles past N, M and K arrive zero-filled from the descriptors; W as either MMA side;
    exponents one tile ahead or not."""
    N, K, g, bn, bk, sk = case
    m, e = make_weight(N, K, g, seed=M)
    x = rand_x((M, K), torch.bfloat16, seed=N)
    b = torch.randn(N) if M % 2 else None
    cfg = {"kind": "tma", "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk, "W_LEFT": w_left, "E_AHEAD": M % 2 == 0}
    y = interpreter.launch(x, m, e, b.bfloat16() if b is not None else None, g, cfg)
    assert_bounded(y, x, m, e, g, b, u_interp(torch.bfloat16))


@needs_triton
@pytest.mark.parametrize("case", CASES[4:], ids=lambda c: "N{}-K{}-g{}-bn{}-bk{}-sk{}".format(*c))
def test_interpreted_dq_exponents_ahead(interpreter, case):
    """dq with the exponents loaded one K tile ahead (E_AHEAD): the last tile's look-ahead reads past the split's
    (or K's) end, masked."""
    N, K, g, bn, bk, sk = case
    m, e = make_weight(N, K, g, seed=7)
    x = rand_x((17, K), torch.bfloat16, seed=N)
    y = interpreter.launch(x, m, e, None, g, {"kind": "dq", "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk,
                                              "E_AHEAD": True})
    assert_bounded(y, x, m, e, g, None, u_interp(torch.bfloat16))


@needs_triton
@pytest.mark.parametrize("case", GEMV_CASES, ids=lambda c: "N{}-K{}-g{}-bn{}-bk{}".format(*c))
@pytest.mark.parametrize("M", [1, 3, 8, 11])
def test_interpreted_gemv_kernel_bf16(interpreter, case, M):
    """M = 11 takes two row blocks of 8 (the second ragged)."""
    N, K, g, bn, bk = case
    m, e = make_weight(N, K, g, seed=M)
    x = rand_x((M, K), torch.bfloat16, seed=N)
    b = torch.randn(N) if M % 2 else None
    y = interpreter.launch(x, m, e, b.bfloat16() if b is not None else None, g,
                           {"kind": "gemv", "BLOCK_N": bn, "BLOCK_K": bk})
    assert_bounded(y, x, m, e, g, b, u_interp(torch.bfloat16))


@needs_triton
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("M,split", [(1, 1), (17, 2), (64, 3)])
def test_interpreted_kernel_fp16_fp32(interpreter, dtype, M, split):
    N, K, g = 40, 96, 32
    m, e = make_weight(N, K, g, seed=M, spread=3)  # fp16's range: values within 2^-9 .. 2^8
    x = rand_x((M, K), dtype)
    b = torch.randn(N).to(dtype)
    y = interpreter.launch(x, m, e, b, g, {"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 32, "SPLIT_K": split})
    assert_bounded(y, x, m, e, g, b, u_interp(dtype))
    y = interpreter.launch(x, m, e, b, g, {"kind": "gemv", "BLOCK_N": 8, "BLOCK_K": 64})
    assert_bounded(y, x, m, e, g, b, u_interp(dtype))


@needs_triton
def test_interpreted_kernel_random_shapes(interpreter):
    gen = torch.Generator().manual_seed(123)
    for i in range(6):
        g = [16, 32][i % 2]
        N = int(torch.randint(1, 70, (), generator=gen))
        K = g * int(torch.randint(1, 9, (), generator=gen))  # mostly not a multiple of BLOCK_K
        M = [1, 3, 17, 64][i % 4]
        cfg = {"kind": "dq", "BLOCK_N": 32, "BLOCK_K": 64, "SPLIT_K": 1 + i % 3}
        if M < 8 and i % 2:
            cfg = {"kind": "gemv", "BLOCK_N": 8, "BLOCK_K": 64}
        m, e = make_weight(N, K, g, seed=i)
        x = rand_x((M, K), torch.bfloat16, seed=i)
        b = torch.randn(N).bfloat16() if i % 2 else None
        assert_bounded(interpreter.launch(x, m, e, b, g, cfg), x, m, e, g, b, u_interp(torch.bfloat16))


EDGE_CONFIGS = ({"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 32, "SPLIT_K": 2},
                {"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1},
                {"kind": "gemv", "BLOCK_N": 8, "BLOCK_K": 32})


@needs_triton
@pytest.mark.parametrize("cfg", EDGE_CONFIGS, ids=lambda c: "{kind}-bk{BLOCK_K}".format(**c))
def test_interpreted_edge_exponents_and_strides(interpreter, cfg):
    """Exponents 0..6 (fp32-subnormal scales), 254 with |m| = 127, 255 (NaN groups); a strided x and a
    mantissa view with row stride != K."""
    g, N, K = 16, 24, 64
    m_big, _ = make_weight(N, 2 * K, g)
    m = m_big[:, :K]  # row stride 2K
    e = torch.randint(100, 140, (N, K // g), dtype=torch.uint8, generator=torch.Generator().manual_seed(5))
    e[0] = torch.tensor([0, 3, 6, 7], dtype=torch.uint8)
    e[1, 1] = 255
    e[2, 2] = 254
    m[2, 2 * g:3 * g] = 127
    # (5, K), column-major; scaled by 2^-8 so that row 2's sums (weights near 2^128) stay finite in fp32
    x = rand_x((K, 5), torch.float32).T * 2.0 ** -8
    assert not x.is_contiguous() and not m.is_contiguous()
    y = interpreter.launch(x, m, e, None, g, cfg)
    assert_bounded(y, x, m, e, g, None, u_interp(torch.float32))
    assert torch.isnan(y[:, 1]).all() and torch.isfinite(y[:, 2]).all() and y[:, 2].abs().min() > 1e30


@needs_triton
def test_picked_configs_run_in_the_interpreter(interpreter):
    """pick_config's choice at every row count it serves, on shapes it tiles raggedly."""
    g = 32
    for N, K in ((130, 288), (4100, 64)):
        m, e = make_weight(N, K, g)
        for M in (1, 2, 5, 9, 33):
            x = rand_x((M, K), torch.bfloat16, seed=M)
            cfg = interpreter.pick_config(M, N, K, g)
            assert cfg["kind"] == (("gemv_split" if interpreter.ONE_ROW_SPLIT else "gemv") if M == 1 else "dq")
            assert_bounded(interpreter.launch(x, m, e, None, g, cfg), x, m, e, g, None, u_interp(torch.bfloat16))


@needs_triton
def test_pick_config_follows_the_sweep(interpreter):
    """The rules of the f0d7fc4..d8b6e9c sweeps: gemv for one row; dq tiles of 16 features and K tiles of 512 up to
    16 rows (32 and 256 where N gives 2+ programs per SM at 32 and K <= 4096); 17-32 rows dq 64 features
    split-K 2; 33-64 rows 128 features where N is large, else the tma kernel when it can run (dq 64 features
    split-K 2 when not); tiles hold whole groups; fp16/fp32 x get K tiles of at most 128 and never tma."""
    pick = interpreter.pick_config
    for g in (16, 32, 128):
        for N, K in ((4096, 4096), (14336, 4096), (28672, 8192), (384, 1536)):
            one = pick(1, N, K, g, sms=132)
            assert one["kind"] == ("gemv_split" if interpreter.ONE_ROW_SPLIT else "gemv")
            assert one["BLOCK_K"] % g == 0 and one["BLOCK_K"] <= max(g, 2048)
            assert interpreter.pdl_choice(one, 1, K) == (interpreter.EARLY_PREFETCH if interpreter.ONE_ROW_SPLIT
                                                          else {"PREFETCH": 0, "TRIGGER": "end"})
            for M in (2, 4, 8, 16, 32, 64):
                for tma in (False, True):
                    c = pick(M, N, K, g, sms=132, tma=tma)
                    assert c["BLOCK_K"] % g == 0 and c["BLOCK_K"] >= g
                    if M <= 16:
                        wide = N >= 2 * 132 * 32 and K <= 4096
                        assert (c["kind"], c["BLOCK_N"], c["SPLIT_K"]) == ("dq", 32 if wide else 16, 1)
                        early = not wide and M <= interpreter.EARLY_PREFETCH_ROWS and K > 4096
                        assert interpreter.pdl_choice(c, M, K)["PREFETCH"] == (1024 if early else 0)
                    elif M <= 32 or (not tma and N < 66 * 128):
                        assert (c["kind"], c["BLOCK_N"], c["SPLIT_K"]) == ("dq", 64, 2)
                    elif N >= 66 * 128:
                        assert (c["kind"], c["BLOCK_N"], c["SPLIT_K"]) == ("dq", 128, 1)
                    else:
                        assert (c["kind"], c["BLOCK_N"], c["SPLIT_K"]) == ("tma", 32, 1)
                    f32 = pick(M, N, K, g, sms=132, dtype=torch.float32, tma=tma)
                    assert f32["BLOCK_K"] <= max(g, 128) and f32["kind"] != "tma"
    # PDL only for compiled launches on sm_90+: the interpreter's picked launch has none, nor its PDL choices
    m, _ = make_weight(64, 96, 32)
    assert "PDL" not in interpreter.picked(rand_x((4, 96), torch.bfloat16), m, 32)
    assert not {"PDL", "TRIGGER", "PREFETCH"} & set(interpreter.picked(rand_x((1, 96), torch.bfloat16), m, 32))
    # every picked launch, PDL choices included, passes the check given configs pass
    for M, K in ((1, 96), (3, 8192), (3, 96), (16, 8192)):
        c = interpreter.pick_config(M, 64, K, 32)
        assert interpreter.check_config({**c, "PDL": True, **interpreter.pdl_choice(c, M, K)}, 32)
    with pytest.raises(ValueError, match="kind='wide'.*allowed values are 'gemv', 'dq', 'tma'"):
        interpreter.check_config({"kind": "wide", "BLOCK_N": 16, "BLOCK_K": 32}, 32)
    with pytest.raises(ValueError, match="BLOCK_K=48: allowed values are powers of two >= 16"):
        interpreter.check_config({"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 48}, 32)
    with pytest.raises(ValueError, match="BLOCK_K=16 must be a multiple of group_size=32"):
        interpreter.check_config({"kind": "gemv", "BLOCK_N": 16, "BLOCK_K": 16}, 32)
    with pytest.raises(ValueError, match="BLOCK_M=48.*allowed values are 16, 32, 64"):
        interpreter.check_config({"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 32, "BLOCK_M": 48}, 32)
    with pytest.raises(ValueError, match="BLOCK_M=16 \\(kind 'gemv'\\)"):
        interpreter.check_config({"kind": "gemv", "BLOCK_N": 16, "BLOCK_K": 32, "BLOCK_M": 16}, 32)


@needs_triton
def test_tma_kernel_refuses_operands_it_cannot_take(interpreter):
    """A tma config with fp32 x, or a mantissa whose rows are not 16-byte aligned, is an error naming why;
    pick_config never picks tma for them."""
    g, N, K = 32, 64, 96
    m, e = make_weight(N, K, g)
    cfg = {"kind": "tma", "BLOCK_N": 32, "BLOCK_K": 64}
    with pytest.raises(ValueError, match="kind='tma': x is torch.float32: the tma kernel takes bfloat16"):
        interpreter.launch(rand_x((40, K), torch.float32), m, e, None, g, cfg)
    m_wide = torch.zeros(N, K + 8, dtype=torch.int8)
    m_wide[:, 8:] = m  # rows start 8 bytes into each 104-byte row: not 16-byte aligned
    with pytest.raises(ValueError, match="kind='tma': mantissa is not 16-byte aligned"):
        interpreter.launch(rand_x((40, K), torch.bfloat16), m_wide[:, 8:], e, None, g, cfg)
    x = rand_x((40, K), torch.bfloat16)
    assert interpreter.tma_ok(x, m) is None
    assert_bounded(interpreter.launch(x, m, e, None, g, dict(cfg, BLOCK_M=16)), x, m, e, g, None,
                   u_interp(torch.bfloat16))


@needs_triton
def test_rows_and_dtypes_outside_the_kernel_take_the_dequant_path(interpreter):
    m, e = make_weight(8, 32, 32)
    for x, g, why in ((torch.zeros(0, 32), 32, "0 rows"), (torch.zeros(65, 32), 32, "65 rows"),
                      (torch.zeros(2, 32, dtype=torch.float64), 32, "x is torch.float64"),
                      (torch.zeros(2, 48), 48, "group_size=48: the kernel takes powers of two >= 16"),
                      (torch.zeros(2, 32), 8, "group_size=8")):
        path, reason = fused_linear.path_for(x, g)
        assert path == "dequant" and reason.startswith(why)
    before = dict(fused_linear.path_counts)
    x = rand_x((65, 32), torch.bfloat16)
    assert_bounded(mxint8_linear(x, m, e, 32), x, m, e, 32, None, u_round(torch.bfloat16))
    assert fused_linear.path_counts["dequant"] == before.get("dequant", 0) + 1
    assert fused_linear.path_counts["triton"] == before.get("triton", 0)


@needs_triton
def test_op_and_layer_take_the_kernel_in_the_interpreter(interpreter):
    N, K, g = 40, 64, 32
    lin = torch.nn.Linear(K, N)
    q = MXINT8Linear.from_linear(lin, g)
    assert "fused Triton kernel (triton" in q.describe("cpu") and "Triton interpreter" in q.describe("cpu")
    x = rand_x((2, 3, K), torch.bfloat16)
    assert q.path(x) == ("fused", None)
    before = fused_linear.path_counts["triton"]
    y = q(x)
    assert fused_linear.path_counts["triton"] == before + 1
    assert_bounded(y, x, q.mantissa, q.exponent, g, lin.bias.detach(), u_interp(torch.bfloat16))
    # gradients through the op on the Triton path (backward uses the dense weight)
    xg = x.float().requires_grad_()
    out = mxint8_linear(xg, q.mantissa, q.exponent, g, lin.bias)
    out.square().sum().backward()
    w = dequantize_mxint8(q.mantissa, q.exponent, g, dtype=torch.float32)
    torch.testing.assert_close(xg.grad, (2 * out.detach()) @ w)
    torch.testing.assert_close(lin.bias.grad, (2 * out.detach()).sum((0, 1)))
    torch.library.opcheck(torch.ops.labkit.mxint8_linear.default, (xg.detach(), q.mantissa, q.exponent, None, g),
                          test_utils=("test_schema", "test_faketensor"))


# ------------------------------------------------------------------------------------------------
# CUDA GPU: the compiled kernel
# ------------------------------------------------------------------------------------------------

@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("M", [1, 3, 17, 64])
def test_gpu_kernel_picked_config(no_interpreter, set_flag, dtype, M):
    set_flag(torch.backends.cuda.matmul, "allow_tf32", False)  # fp32: IEEE products, as the bound
    # ragged N and K for every tile; fp16/fp32 (decoded to fp32 tiles) on the larger one only, bf16 also on a
    # 16-group shape and on 4096x4096 (the tma kernel's pick at 64 rows): fewer cold compilations
    shapes = ((1000, 4160, 32),) + (((77, 96, 16), (4096, 4096, 32)) if dtype == torch.bfloat16 else ())
    for N, K, g in shapes:
        m, e = make_weight(N, K, g, spread=3)
        x = rand_x((M, K), dtype).cuda()
        b = torch.randn(N, device="cuda").to(dtype)
        y = mxint8_linear(x, m.cuda(), e.cuda(), g, b)
        assert fused_linear.path_for(x, g)[0] == "triton"
        if torch.cuda.get_device_capability()[0] >= 9:  # the picked launch is a PDL one, and describe() says so
            from labkit.kernels import fused_triton

            assert fused_triton.picked(x, m.cuda(), g)["PDL"] is True
            assert "programmatic dependent launch" in fused_linear.describe("cuda")
        assert_bounded(y.cpu(), x.cpu(), m, e, g, b.cpu(), u_round(dtype))


GPU_CONFIGS = [{"kind": "gemv", "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": s}
               for bn, bk, w, s in ((4, 256, 4, 3), (32, 1024, 8, 4))] + \
              [{"kind": "dq", "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk, "num_warps": w, "num_stages": s, "ASM": a,
                "BF16_SCALE": bs}
               for bn, bk, sk, w, s, a, bs in ((64, 256, 2, 8, 4, True, False), (32, 128, 3, 4, 5, False, True),
                                               (16, 64, 1, 2, 3, True, True))] + \
              [{"kind": "tma", "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": sk, "W_LEFT": wl, "num_warps": 4,
                "num_stages": s, "E_AHEAD": ea, "BF16_SCALE": bs}
               for bn, bk, sk, wl, s, ea, bs in ((64, 128, 2, True, 3, True, True), (32, 64, 3, False, 3, False, False))]


@pytest.mark.cuda
@needs_gpu
def test_gpu_configs_and_edge_exponents(no_interpreter):
    """Every exponent byte (0..6: fp32-subnormal scales, which need the GPU to keep denormals; 255: NaN) in
    both decodes (PTX and Triton), the scale applied in fp32 and in bf16 (BF16_SCALE: bf16 subnormals), with and
    without split-K, ragged K (1056 is no multiple of 64+)."""
    from labkit.kernels import fused_triton

    g, N, K = 32, 300, 1056
    m, e = make_weight(N, K, g)
    e[0, :7] = torch.arange(7, dtype=torch.uint8)
    e[1, 3] = 255
    e[2, :] = torch.arange(200, 233, dtype=torch.uint8)
    m[2, 32 * 30:32 * 31] = 127
    for M in (1, 3):  # 17+ rows take the same decode (test_gpu_kernel_picked_config runs them); fewer compilations
        x = rand_x((M, K), torch.bfloat16).cuda()  # row 2's weights reach 127 * 2^99: sums stay finite
        for c in GPU_CONFIGS:
            if c["kind"] == "tma" and M != 3:
                continue  # tma: 3 rows, its zero-filled row tiles (fewer compilations keep the file under a minute)
            y = fused_triton.launch(x, m.cuda(), e.cuda(), None, g, c)
            assert_bounded(y.cpu(), x.cpu(), m, e, g, None, u_round(torch.bfloat16))


@pytest.mark.cuda
@needs_gpu
def test_gpu_split_k_is_deterministic_and_graph_safe(no_interpreter):
    """The split-K's last-arriving split sums the partials in a fixed order: the same bits on every call,
    eager or replayed from a CUDA graph (its zeroed counters captured with it)."""
    from labkit.kernels import fused_triton
    from labkit.perf.timing import capture

    g, N, K = 32, 4096, 2048
    m, e = make_weight(N, K, g, spread=2)
    m, e = m.cuda(), e.cuda()
    x = rand_x((5, K), torch.bfloat16).cuda()
    cfg = {"kind": "dq", "BLOCK_N": 32, "BLOCK_K": 128, "SPLIT_K": 4, "num_warps": 4, "num_stages": 3}
    first = fused_triton.launch(x, m, e, None, g, cfg)
    assert_bounded(first.cpu(), x.cpu(), m.cpu(), e.cpu(), g, None, u_round(torch.bfloat16))
    for _ in range(5):
        assert torch.equal(fused_triton.launch(x, m, e, None, g, cfg), first)
    assert_replays(capture(lambda: fused_triton.launch(x, m, e, None, g, cfg)), first, times=3)


@pytest.mark.cuda
@needs_gpu
@pytest.mark.skipif(CUDA and torch.cuda.get_device_capability()[0] < 9,
                    reason="programmatic dependent launch needs sm_90+; PDL is NOT tested on this GPU")
def test_gpu_pdl_chains_give_the_plain_launches_bits(no_interpreter):
    """Programmatic dependent launch: in a chain where each call's x is the previous call's output (a PDL program
    must wait for it) and another kernel sits between some calls, eager and replayed from a CUDA graph (output
    poisoned before the replay), the picked PDL launch of each kernel kind (and, for dq, the early trigger with
    the L2 prefetch) gives the bits of the same configuration launched without PDL. (The shapes, rows and bias
    match test_gpu_kernel_picked_config's 4096x4096 launches, so a cold run compiles only the PDL-off kernels.)"""
    from labkit.kernels import fused_triton
    from labkit.perf.timing import capture

    g, D, layers = 32, 2048, 6
    ws = [tuple(t.cuda() for t in make_weight(D, D, g, seed=s, spread=0)) for s in range(layers)]
    b = torch.randn(D, device="cuda").to(torch.bfloat16)
    for M in (1, 3, 64):  # gemv, dq, tma (pick_config's kinds for these rows at this shape)
        x0 = rand_x((M, D), torch.bfloat16).cuda()
        picked = fused_triton.picked(x0, ws[0][0], g)
        assert picked["PDL"] is True

        def chain(cfg):
            h = x0
            for i, (m, e) in enumerate(ws):
                h = fused_triton.launch(h, m, e, b, g, cfg)
                h = h * 0.03 if i % 2 else h / h.abs().amax()  # another kernel between two launches, bounded values
            return h

        plain = chain({**picked, "PDL": False, "PREFETCH": 0})
        assert torch.isfinite(plain).all() and plain.abs().amax() > 0
        variants = [picked] + ([{**picked, "PREFETCH": 1024, "TRIGGER": "start"}] if M == 3 else [])
        for cfg in variants:
            tag = (M, cfg["kind"], cfg["PREFETCH"], cfg["TRIGGER"])
            assert torch.equal(chain(cfg), plain), tag
            graph, out = capture(lambda: chain(cfg))
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(out, plain), (*tag, "graph")


@pytest.mark.cuda
@needs_gpu
def test_gpu_layer_uses_fused_without_warning_and_compiles(no_interpreter):
    lin = torch.nn.Linear(512, 256).cuda()
    q = MXINT8Linear.from_linear(lin, 32)
    x = torch.randn(4, 512, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error", MXINT8FusedFallbackWarning)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = q(x)
    assert y.dtype == torch.bfloat16 and q.path(x, torch.bfloat16) == ("fused", None)
    fn = torch.compile(lambda a: mxint8_linear(a, q.mantissa, q.exponent, 32, q.bias), fullgraph=True)
    xb = x.bfloat16()
    assert_bounded(fn(xb).cpu(), xb.cpu(), q.mantissa.cpu(), q.exponent.cpu(), 32, q.bias.detach().cpu(),
                   u_round(torch.bfloat16))


@needs_triton
def test_offline_compile_reports_resources_without_a_gpu(no_interpreter):
    """benchmarks/mxint8/fused_linear_sweep.py --offline: a tma and a dq configuration compile for sm_90 on a machine
    without a GPU; the tma kernel's W tiles arrive by TMA (UTMALDG) and its scale is the bf16 multiply
    (HMUL2), the dq kernel's W tiles by async copies (LDGSTS); an unknown kind names the allowed ones."""
    import importlib.util as iu
    from pathlib import Path

    spec = iu.spec_from_file_location("fused_linear_sweep", Path(__file__).resolve().parents[2] / "benchmarks"
                                      / "mxint8" / "fused_linear_sweep.py")
    sass = iu.module_from_spec(spec)
    spec.loader.exec_module(sass)
    tma = {"kind": "tma", "BLOCK_N": 32, "BLOCK_K": 128, "SPLIT_K": 1, "W_LEFT": False, "num_warps": 4,
           "num_stages": 3}
    kern, regs, local = sass.offline_compile(tma, 64)
    ops, text = sass.opcodes(kern.asm["cubin"])
    assert 0 < regs <= 255 and local == 0 and kern.metadata.shared > 3 * (32 * 128 + 64 * 128 * 2) // 2
    assert ops["UTMALDG"] > 0 and ops["HMUL2"] > 0 and ops["HGMMA"] > 0
    kern, regs, _ = sass.offline_compile({"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 512, "num_warps": 2}, 4)
    ops, _ = sass.opcodes(kern.asm["cubin"])
    assert ops["LDGSTS"] > 0 and ops["FMUL"] > 0 and ops["HMUL2"] == 0
    pdl = {"kind": "dq", "BLOCK_N": 16, "BLOCK_K": 512, "num_warps": 2, "PDL": True, "PREFETCH": 4096}
    ptx = sass.offline_compile(pdl, 4)[0].asm["ptx"]
    # the W prefetch (16 rows x 4096 bytes = 512 lines) comes first, then the wait, then the first x/W loads
    assert ptx.count("prefetch.global.L2") == 512 // 64 and ptx.count("griddepcontrol.wait") == 1
    assert ptx.rindex("prefetch.global.L2") < ptx.index("griddepcontrol.wait") < ptx.index("cp.async")
    assert ptx.index("griddepcontrol.launch_dependents") > ptx.rindex("mma.sync")  # TRIGGER "end": after the loop
    early = sass.offline_compile(dict(pdl, TRIGGER="start"), 4)[0].asm["ptx"]
    assert (early.index("griddepcontrol.wait") < early.index("griddepcontrol.launch_dependents")
            < early.index("cp.async"))
    assert "griddepcontrol" not in sass.offline_compile(dict(pdl, PDL=False, PREFETCH=0), 4)[0].asm["ptx"]
    with pytest.raises(ValueError, match="kind='gemv': allowed values are 'dq', 'tma'"):
        sass.offline_compile({"kind": "gemv", "BLOCK_N": 4, "BLOCK_K": 512}, 1)
