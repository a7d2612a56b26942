"""MXINT8: reference quantize/dequantize vs independent float64 formulas, the sheet's bit assembly vs the
arithmetic value, the packed Linear and the convert transform, loud fallbacks, the kernel source
compiling for sm_90, and (on a GPU) the CUDA kernel bit for bit against the reference."""
import copy
import io
import math
import shutil
import struct
import subprocess
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from labkit.kernels import (MXINT8Linear, MXINT8ReferenceWarning, build_config, convert_to_mxint8, dequant,
                            dequantize, dequantize_mxint8, exclude, extension, fake_quantize_mxint8, memory,
                            quantize_mxint8, tiling)
from labkit.kernels import sheet_decode
from labkit.quant.formats import mxint as ref

CUDA = torch.cuda.is_available()
cuda = pytest.mark.cuda
needs_gpu = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


# ------------------------------------------------------------------------------------------------
# Independent references: float64 NumPy and Python integers, no labkit code
# ------------------------------------------------------------------------------------------------

def np_quantize(w: np.ndarray, g: int):
    """Per group: E = floor(log2 amax) + 127 via math.frexp (0 below float32's normal range, 255 for
    inf/NaN); m = sign * clip(round_half_even(|w| / 2^(E-127) * 64), 0, 127)."""
    groups = w.astype(np.float32).astype(np.float64).reshape(-1, g)
    ms, es = np.zeros(groups.shape, dtype=np.int64), np.zeros(len(groups), dtype=np.int64)
    for i, grp in enumerate(groups):
        amax = np.max(np.abs(grp))
        if not np.isfinite(amax):
            es[i] = 255
            continue
        if amax < 2.0 ** -126:  # zero or a float32 subnormal
            E = 0
        else:
            E = math.frexp(amax)[1] - 1 + 127
        es[i] = E
        scale = 2.0 ** (max(E, 1) - 127) if E else 2.0 ** -127
        ms[i] = np.sign(grp) * np.clip(np.round(np.abs(grp) / scale * 64), 0, 127)  # np.round: half to even
    return ms.reshape(w.shape), es.reshape(*w.shape[:-1], w.shape[-1] // g)


def np_value(m: int, E: int) -> float:
    """m * 2^(E-127) / 64 rounded to bf16 (exact unless it overflows; E = 255 is NaN)."""
    if E == 255:
        return float("nan")
    v = m * 2.0 ** (E - 127) / 64
    return math.copysign(math.inf, v) if abs(v) >= 2.0 ** 128 else v


def float_to_bf16_bits(v: float) -> int:
    (word,) = struct.unpack("<I", struct.pack("<f", v))
    assert word & 0xFFFF == 0, f"{v} is not exactly representable in bf16"
    return word >> 16


def bf16_bits_to_float(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b << 16))[0]


def sheet_bits(m: int, E: int) -> int:
    """The sheet's assembly with integer bit operations (the independent copy)."""
    byte = m & 0xFF
    sign = (byte & 0x80) << 8
    a = abs(m)
    out = sign | (E << 7) | ((a & 0x3F) << 1)
    bias = sign | (E << 7)
    if a & 0x40:
        return out
    return float_to_bf16_bits(bf16_bits_to_float(out) - bf16_bits_to_float(bias))


def bits(t: torch.Tensor) -> np.ndarray:
    return (t.to(torch.bfloat16).contiguous().view(torch.int16).cpu().numpy().astype(np.int64)) & 0xFFFF


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bf16 bit for bit, except that a NaN matches any NaN (computed on ``a``'s device)."""
    a, b = a.to(torch.bfloat16), b.to(device=a.device, dtype=torch.bfloat16)
    na, nb = torch.isnan(a), torch.isnan(b)
    return a.shape == b.shape and bool(torch.equal(na, nb)) and \
        bool(((a.view(torch.int16) == b.view(torch.int16)) | na).all())


def awkward_tensor(rows: int, cols: int, seed: int) -> torch.Tensor:
    """Random magnitudes across float32's range, with zeros, exact ties, saturating maxima and subnormals."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, cols)) * np.exp2(rng.integers(-140, 120, (rows, 1)))
    w[0] = 0.0                                                       # an all-zero row of groups
    w[1, ::3] = (rng.integers(0, 127, w[1, ::3].shape) + 0.5) / 64   # exact .5 ties (E = 127 groups)
    w[1, 0::w.shape[1] // 4 or 1] = 1.0                              # ... with amax 1.0 in every group
    w[2, :] = rng.uniform(1.99, 1.999999, cols) * 2.0 ** 100         # rounds to 128: saturates at 127
    w[3, :] = rng.standard_normal(cols) * 2e-39                      # float32 subnormals (E = 0 mostly)
    w[4, :] = rng.standard_normal(cols) * 3e37                       # near float32's top
    return torch.from_numpy(w.astype(np.float32))


# ------------------------------------------------------------------------------------------------
# Reference quantize / dequantize
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("g", [1, 3, 16, 32, 48, 128])
def test_quantize_matches_independent_formula(g):
    w = awkward_tensor(8, 384, seed=g)
    m, e = quantize_mxint8(w, g)
    m_ref, e_ref = np_quantize(w.numpy(), g)
    assert m.dtype == torch.int8 and e.dtype == torch.uint8
    assert m.shape == w.shape and e.shape == (8, 384 // g)
    np.testing.assert_array_equal(e.numpy().astype(np.int64), e_ref)
    np.testing.assert_array_equal(m.numpy().astype(np.int64), m_ref)
    assert int(m.abs().max()) <= 127


def test_quantize_rules_on_hand_made_groups():
    w = torch.tensor([[1.0, 2.5 / 64, 3.5 / 64, -2.5 / 64],      # ties to even: 2, 4, -2
                      [1.999, 0.5, -0.25, 0.0],                  # 1.999 * 64 = 127.9 -> 128 -> 127
                      [0.0, -0.0, 0.0, 0.0],                     # zero group: E = 0, m = 0
                      [float("nan"), 1.0, 2.0, 3.0]])            # non-finite: E = 255, m = 0
    m, e = quantize_mxint8(w, 4)
    assert e.reshape(-1).tolist() == [127, 127, 0, 255]
    assert m.tolist() == [[64, 2, 4, -2], [127, 32, -16, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    back = dequantize_mxint8(m, e, 4, dtype=torch.float32)
    assert torch.isnan(back[3]).all() and back[2].eq(0).all()


@pytest.mark.parametrize("g", [1, 5, 32])
def test_dequantize_exact_for_every_byte_pair(g):
    rng = np.random.default_rng(g)
    m = rng.integers(-128, 128, (64, 40 * g))
    e = rng.integers(0, 256, (64, 40))
    e[0, :] = [0, 1, 254, 255] * 10                                  # the edges, for sure
    out = dequantize_mxint8(torch.from_numpy(m).to(torch.int8), torch.from_numpy(e).to(torch.uint8), g)
    assert out.dtype == torch.bfloat16 and out.shape == m.shape
    want = np.array([[np_value(int(mi), int(e[r, c // g])) for c, mi in enumerate(row)] for r, row in enumerate(m)])
    got = out.double().numpy()
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan], want[~nan])            # exact, no tolerance
    assert (bits(out)[nan] == 0x7FC0).all()                          # one NaN pattern


def test_dequantize_float32_and_flat_exponents():
    w = torch.randn(6, 64)
    m, e = quantize_mxint8(w, 16)
    a = dequantize_mxint8(m, e, 16, dtype=torch.float32)
    b = dequantize_mxint8(m, e.reshape(-1), 16, dtype=torch.float32)
    assert torch.equal(a, b)
    assert torch.equal(a.to(torch.bfloat16), dequantize_mxint8(m, e, 16))   # exact in both dtypes


@pytest.mark.parametrize("g", [8, 32])
def test_roundtrip_error_is_at_most_half_a_step_below_saturation(g):
    w = torch.randn(32, 256, dtype=torch.float32) * 3
    m, e = quantize_mxint8(w, g)
    back = dequantize_mxint8(m, e, g, dtype=torch.float32)
    step = torch.exp2(e.to(torch.float32) - 127 - 6).repeat_interleave(g, dim=-1)   # one mantissa unit
    free = m.abs() < 127
    assert ((back - w).abs()[free] <= step[free] / 2).all()
    assert ((back - w).abs() <= step).all()                          # saturation costs less than a step


def test_fake_quantize_values_dtype_and_straight_through_gradient():
    for dtype in (torch.float32, torch.bfloat16):
        x = (torch.randn(4, 64) * 5).to(dtype).requires_grad_()
        y = fake_quantize_mxint8(x, 32)
        m, e = quantize_mxint8(x.detach(), 32)
        assert y.dtype == dtype and torch.equal(y.detach(), dequantize_mxint8(m, e, 32, dtype=dtype))
        upstream = torch.randn(4, 64).to(dtype)
        y.backward(upstream)
        assert torch.equal(x.grad, upstream)


def test_validation_errors_name_the_key():
    w = torch.randn(4, 30)
    with pytest.raises(ValueError, match=r"group_size=32 does not divide.*allowed values: divisors of 30: 1, 2, 3"):
        quantize_mxint8(w, 32)
    for bad in (0, -4, 2.0, True):
        with pytest.raises(ValueError, match="group_size"):
            quantize_mxint8(w, bad)
    with pytest.raises(TypeError, match="floating-point"):
        quantize_mxint8(torch.ones(4, 32, dtype=torch.int32), 32)
    m, e = quantize_mxint8(torch.randn(4, 32), 16)
    with pytest.raises(TypeError, match="mantissa must be a torch.int8"):
        dequantize_mxint8(m.to(torch.int16), e, 16)
    with pytest.raises(TypeError, match="exponent must be a torch.uint8"):
        dequantize_mxint8(m, e.to(torch.int32), 16)
    with pytest.raises(ValueError, match="exponent shape"):
        dequantize_mxint8(m, e[:, :1], 16)
    with pytest.raises(ValueError, match="mantissa is on cpu but exponent on meta"):
        dequantize_mxint8(m, e.to("meta"), 16)
    with pytest.raises(ValueError, match="backend='gpu': allowed values are 'auto', 'cuda', 'reference'"):
        dequantize(m, e, 16, backend="gpu")
    with pytest.raises(ValueError, match="impl='fast'"):
        dequantize(m, e, 16, impl="fast")
    with pytest.raises(ValueError, match="exponent=300"):
        sheet_decode.decode_bits_table([1], 300)


# ------------------------------------------------------------------------------------------------
# The sheet's bit assembly
# ------------------------------------------------------------------------------------------------

def test_bit_assembly_equals_formula_for_all_mantissas_and_exponents():
    """All 255 mantissas x all normal exponents: the independent integer assembly, labkit's vectorised one
    and the arithmetic value agree bit for bit."""
    ms = list(range(-127, 128))
    es = list(range(1, 255))
    want = np.array([[float_to_bf16_bits(np_value(m, E)) for E in es] for m in ms])
    sheet = np.array([[sheet_bits(m, E) for E in es] for m in ms])
    np.testing.assert_array_equal(sheet, want)
    mt = torch.tensor(ms, dtype=torch.int8).reshape(-1, 1)
    et = torch.tensor(es, dtype=torch.uint8).reshape(1, -1)
    np.testing.assert_array_equal(bits(sheet_decode.sheet_decode(mt, et)["y"]), want)


def test_patched_decode_equals_reference_on_all_65536_pairs_and_sheet_fails_where_documented():
    mm = torch.arange(-128, 128).to(torch.int8).reshape(-1, 1).expand(256, 256).contiguous()
    ee = torch.arange(256).to(torch.uint8).reshape(1, -1).expand(256, 256).contiguous()
    exact = dequantize_mxint8(mm.reshape(-1, 1), ee.reshape(-1, 1), 1).reshape(256, 256)
    assert same_bits(sheet_decode.sheet_decode(mm, ee, patched=True)["y"], exact)
    y = sheet_decode.sheet_decode(mm, ee)["y"]
    wrong = torch.from_numpy(bits(y) != bits(exact)) & ~(torch.isnan(y.float()) & torch.isnan(exact.float()))
    e0, m_min = ee == 0, mm == -128
    assert wrong[e0 & (mm != 0)].all() and not wrong[e0 & (mm == 0)].any()     # E = 0: every m != 0
    assert wrong[m_min & (ee > 0) & (ee < 255)].all()                        # m = -128 decodes to 0
    assert not wrong[(ee > 0) & (ee < 255) & ~m_min].any()                     # exact everywhere else
    assert torch.isinf(y[(ee == 255) & ((mm == 64) | (mm == -64))].float()).all()


def test_decode_table_shows_what_dont_need_abs_and_bias_do():
    rows = {r["m"]: r for r in sheet_decode.decode_bits_table([1, 63, 64, 100, -5], 127)}
    assert all(r["y == exact"] for r in rows.values())
    assert rows[1]["without bias"] == 1 + 1 / 64 and rows[1]["exact"] == 1 / 64
    assert rows[100]["always subtract"] == 36 / 64 and rows[100]["exact"] == 100 / 64
    assert rows[64]["dont_need_abs"] and not rows[63]["dont_need_abs"]
    assert rows[-5]["sign"] == "0x8000" and rows[-5]["exact"] == -5 / 64


# ------------------------------------------------------------------------------------------------
# Packed Linear, convert transform, state_dict
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("g,bias", [(16, True), (32, False), (48, True)])
def test_mxint8_linear_equals_linear_with_dequantized_weights(g, bias):
    torch.manual_seed(g)
    lin = torch.nn.Linear(96, 40, bias=bias)
    q = MXINT8Linear.from_linear(lin, g, backend="reference")
    assert q.mantissa.dtype == torch.int8 and q.exponent.shape == (40, 96 // g)
    assert dict(q.named_parameters()).keys() == ({"bias"} if bias else set())
    x = torch.randn(5, 7, 96)
    m, e = quantize_mxint8(lin.weight.detach(), g)
    want = F.linear(x, dequantize_mxint8(m, e, g, dtype=torch.float32), lin.bias)
    assert torch.equal(q(x), want)
    rel = (q(x) - lin(x)).norm() / lin(x).norm()
    assert rel < 2e-2, rel                                      # 8-bit mantissas: well under 1e-2 typically
    if bias:
        assert q.bias.dtype == lin.bias.dtype and torch.equal(q.bias, lin.bias)


def test_mxint8_linear_rejects_bad_shapes():
    with pytest.raises(ValueError, match="group_size=32 does not divide"):
        MXINT8Linear.from_linear(torch.nn.Linear(30, 4), 32)
    with pytest.raises(TypeError, match="nn.Linear"):
        MXINT8Linear.from_linear(torch.nn.Conv1d(4, 4, 1), 4)


def test_convert_respects_filter_fn_and_reports(tiny_bert):
    model = copy.deepcopy(tiny_bert).eval()
    linears = {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    ids = torch.randint(0, 1000, (2, 12))
    with torch.no_grad():
        before = model(input_ids=ids).logits
    report = convert_to_mxint8(model, 32, filter_fn=exclude("classifier"), backend="reference")
    assert set(report["converted"]) == linears - {"classifier"}
    assert report["skipped"] == {"classifier": "excluded by filter_fn"}
    assert isinstance(model.classifier, torch.nn.Linear) and not isinstance(model.classifier, MXINT8Linear)
    for name in report["converted"]:
        assert isinstance(model.get_submodule(name), MXINT8Linear)
    g = report["group_size"]
    assert report["weight_bytes_after"] / report["weight_bytes_before"] == pytest.approx((1 + 1 / g) / 4)
    with torch.no_grad():
        after = model(input_ids=ids).logits
    assert (after - before).abs().max() < 0.05 * before.abs().max()


def test_convert_skips_layers_whose_width_the_group_does_not_divide(tiny_bert):
    model = copy.deepcopy(tiny_bert)                       # hidden 64, FFN 128: 48 divides neither
    report = convert_to_mxint8(model, 48, backend="reference")
    assert report["converted"] == []
    assert all("not divisible by group_size=48" in why for why in report["skipped"].values())


def test_state_dict_round_trip(tiny_bert):
    a = copy.deepcopy(tiny_bert).eval()
    convert_to_mxint8(a, 16, exclude("classifier"), backend="reference")
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    torch.manual_seed(123)
    from labkit import models

    b = models.from_config(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                           vocab_size=30522).eval()
    convert_to_mxint8(b, 16, exclude("classifier"), backend="reference")
    buf.seek(0)
    b.load_state_dict(torch.load(buf, weights_only=True))
    ids = torch.randint(0, 1000, (2, 9))
    with torch.no_grad():
        assert torch.equal(a(input_ids=ids).logits, b(input_ids=ids).logits)
    c = copy.deepcopy(tiny_bert)
    convert_to_mxint8(c, 32, exclude("classifier"), backend="reference")
    with pytest.raises((RuntimeError, ValueError), match="size mismatch|group_size"):
        c.load_state_dict(a.state_dict())


def test_memory_accounting_matches_formula(tiny_bert):
    model = copy.deepcopy(tiny_bert)
    before = memory.tensor_bytes(model)
    report = convert_to_mxint8(model, 32, exclude("classifier"), backend="reference")
    after = memory.tensor_bytes(model)
    converted = sum(model.get_submodule(n).mantissa.numel() for n in report["converted"])
    assert after["mxint8 weights"] == converted * (1 + 1 / 32)
    assert before["total"] - after["total"] == converted * 4 - converted * (1 + 1 / 32)
    assert after["embeddings"] == before["embeddings"] and after["total"] == sum(after[k] for k in memory.KINDS)
    assert memory.theoretical_saving(32) == (32 - 8.25) / 32
    with torch.device("meta"):                              # sizes without allocating
        from labkit import models

        big = models.from_config(num_hidden_layers=2, hidden_size=256, num_attention_heads=4, intermediate_size=1024)
    assert memory.tensor_bytes(big)["linear weights"] == 4 * (2 * (4 * 256 * 256 + 2 * 256 * 1024) + 256 * 256 + 2 * 256)


# ------------------------------------------------------------------------------------------------
# Fallbacks are loud; the tiling drawing matches the kernel
# ------------------------------------------------------------------------------------------------

def test_reference_fallback_is_reported_once(monkeypatch):
    m, e = quantize_mxint8(torch.randn(2, 32), 32)
    monkeypatch.setattr(dequant, "_warned", set())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # CPU tensors where a GPU could run them
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dequantize(m, e, 32)
        dequantize(m, e, 32)
    msgs = [str(w.message) for w in caught if issubclass(w.category, MXINT8ReferenceWarning)]
    assert len(msgs) == 1 and "pure-PyTorch reference" in msgs[0] and "cpu" in msgs[0]
    with pytest.raises(RuntimeError, match="backend='cuda' needs CUDA tensors"):
        dequantize(m, e, 32, backend="cuda")


def test_cpu_tensors_without_cuda_do_not_warn(monkeypatch):
    """Without CUDA the reference is the only path: nothing to warn about (ext status says which runs)."""
    m, e = quantize_mxint8(torch.randn(2, 32), 32)
    monkeypatch.setattr(dequant, "_warned", set())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MXINT8ReferenceWarning)
        dequantize(m, e, 32)


def test_disabled_extension_is_described_with_its_reason(monkeypatch):
    monkeypatch.setenv("LABKIT_MXINT8_EXT", "0")
    if extension._STATE["ok"]:
        pytest.skip("the extension is already loaded in this process")
    extension._reset_for_tests()
    try:
        assert not extension.load()
        assert "pure-PyTorch reference (reason: disabled by LABKIT_MXINT8_EXT=0)" in extension.describe()
        assert extension.reason() == "disabled by LABKIT_MXINT8_EXT=0"
    finally:
        extension._reset_for_tests()


@pytest.mark.skipif(CUDA, reason="checks the message on a machine without CUDA")
def test_no_cuda_is_reported_clearly():
    extension._reset_for_tests()
    assert not extension.available()
    text = extension.describe()
    assert text.startswith("MXINT8 dequantization: pure-PyTorch reference (reason: no CUDA")
    m, e = quantize_mxint8(torch.randn(2, 32), 32)
    with pytest.raises(RuntimeError, match="CUDA"):
        dequantize(m, e, 32, backend="cuda")


def test_tiling_constants_match_kernel_source_and_cover_each_element_once():
    k = tiling.kernel_constants()
    assert (k["kVecElems"], k["kVecThreads"], k["kVecUnroll"], k["kTileElems"], k["kTileThreads"]) == \
        (tiling.VEC_ELEMS, tiling.VEC_THREADS, tiling.VEC_UNROLL, tiling.TILE_ELEMS, tiling.TILE_THREADS)
    for g, groups in [(8, 300), (32, 80), (48, 50), (128, 17)]:
        t = tiling.lab_tile_map(g, groups)
        keys = set(zip(t["cta"].ravel(), t["thread"].ravel(), t["value"].ravel()))
        assert len(keys) == g * groups                                    # each element exactly once
        assert t["thread"].max() < tiling.TILE_THREADS
        assert t["value"].max() < tiling.TILE_ELEMS // tiling.TILE_THREADS
        full = t["thread"][:t["BLK_M"], :t["BLK_K"]]
        assert np.bincount(full.ravel()).tolist() == [4] * tiling.TILE_THREADS  # 4 elements per thread
        assert (np.diff(t["thread"][:t["BLK_M"], 0]) == 1).all()         # a warp runs down a group
    v = tiling.vec_map(4096)
    assert (np.diff(v["thread"][:256]) == 1).all() and v["slot"][256] == 1 and v["cta_tile"][2048] == 1


# ------------------------------------------------------------------------------------------------
# The CUDA source compiles for sm_90 (CPU machine with nvcc; no GPU needed)
# ------------------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cute_kernels_compile_for_sm90_with_wide_coalesced_accesses(tmp_path):
    """The pure CuTe translation unit (no torch headers: the CPU torch lacks the CUDA ones) builds for sm_90,
    and its fast path really issues one 8-byte load and one 16-byte store per 8 elements."""
    include = build_config.cutlass_include_dir()
    if include is None:
        pytest.skip(build_config.cutlass_missing_reason())
    cmd = ["nvcc", "-c", str(build_config.CSRC / "mxint8_kernels.cu"), "-o", str(tmp_path / "k.o"),
           "-std=c++17", "-I", str(include), "-I", str(build_config.CSRC), "--keep", "--keep-dir", str(tmp_path),
           "-O3", "--expt-relaxed-constexpr", "-gencode=arch=compute_90,code=sm_90"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    ptx = "\n".join(p.read_text() for p in tmp_path.glob("*.ptx"))
    vec = ptx[ptx.index(".entry _ZN13labkit_mxint818dequant_vec_kernelILb1ELb1EjEE"):]  # <aligned, pow2, u32>
    vec = vec[:vec.index("\n}\n")]
    assert vec.count("ld.global.nc.u64") == tiling.VEC_UNROLL             # 8-byte loads
    assert vec.count("st.global.v2.u64") == tiling.VEC_UNROLL             # 16-byte stores


# ------------------------------------------------------------------------------------------------
# CUDA: the kernel against the reference, bit for bit
# ------------------------------------------------------------------------------------------------

def _poisoned_dequant(m, e, g, impl):
    """Run the op right after freeing a NaN-filled block of the output's size: the caching allocator hands
    that block back, so an element the kernel fails to write stays NaN and fails the comparison."""
    poison = torch.full(m.shape, float("nan"), dtype=torch.bfloat16, device=m.device)
    ptr = poison.data_ptr()
    del poison
    out = dequantize(m, e, g, backend="cuda", impl=impl)
    return out, out.data_ptr() == ptr


def _random_pair(shape, g, gen, device="cuda"):
    m = torch.randint(-128, 128, shape, dtype=torch.int8, device=device, generator=gen)
    e = torch.randint(0, 256, (*shape[:-1], shape[-1] // g), dtype=torch.uint8, device=device, generator=gen)
    return m, e


@cuda
@needs_gpu
@pytest.mark.parametrize("shape,g", [((1, 16), 16), ((3, 48), 3), ((5, 1000), 8), ((7, 1000), 40), ((2, 4096), 4096),
                                     ((33, 17), 17), ((1, 15), 5), ((4, 2048), 16), ((9, 4096), 128),
                                     ((1, 1 << 20), 1), ((3, 3 * 16 * 1024 + 48), 48)])
@pytest.mark.parametrize("impl", ["vec", "tile"])
def test_kernel_bit_exact_small_and_ragged(shape, g, impl):
    assert extension.available(), extension.describe()
    gen = torch.Generator(device="cuda").manual_seed(sum(shape) + g)
    m, e = _random_pair(shape, g, gen)
    out, _ = _poisoned_dequant(m, e, g, impl)
    assert out.shape == m.shape and out.dtype == torch.bfloat16
    assert same_bits(out.cpu(), dequantize_mxint8(m.cpu(), e.cpu(), g))


@cuda
@needs_gpu
# 2^26 (where the course's launch broke), 8192 x 28672, and 24 x 2796203 (> 2^26, a group size that is
# not a multiple of 16 and a 8-element tail)
@pytest.mark.parametrize("n,g", [(1 << 26, 32), (8192 * 28672, 16), (8192 * 28672, 128), (24 * 2796203, 24)])
def test_kernel_bit_exact_large(n, g):
    gen = torch.Generator(device="cuda").manual_seed(n % 1000 + g)
    m, e = _random_pair((n,), g, gen)
    want = dequantize_mxint8(m, e, g)                      # the reference on the GPU (same formula as on CPU)
    for impl in ("vec", "tile"):
        out, reused = _poisoned_dequant(m, e, g, impl)
        assert reused, "the allocator did not hand back the poisoned block; the NaN check would be vacuous"
        assert same_bits(out, want), impl
        del out


@cuda
@needs_gpu
def test_reference_on_gpu_equals_reference_on_cpu():
    gen = torch.Generator(device="cuda").manual_seed(1)
    m, e = _random_pair((64, 512), 32, gen)
    assert same_bits(dequantize_mxint8(m, e, 32).cpu(), dequantize_mxint8(m.cpu(), e.cpu(), 32))


@cuda
@needs_gpu
def test_kernel_misaligned_input_uses_tile_kernel_and_vec_refuses():
    gen = torch.Generator(device="cuda").manual_seed(2)
    base, e = _random_pair((1, 4097), 1, gen)
    m = base[:, 1:]                                        # contiguous, 1 byte past an aligned boundary
    e = e[:, 1:].contiguous()
    assert m.is_contiguous() and m.data_ptr() % 16 == 1
    out = dequantize(m, e, 1, backend="cuda")              # auto -> tile kernel
    assert same_bits(out.cpu(), dequantize_mxint8(m.cpu(), e.cpu(), 1))
    with pytest.raises(RuntimeError, match="8-byte aligned"):
        torch.ops.labkit_mxint8.dequantize(m, e, 1, 1)


@cuda
@needs_gpu
def test_op_validates_inputs_with_clear_errors():
    op = torch.ops.labkit_mxint8.dequantize
    m, e = _random_pair((4, 64), 16, torch.Generator(device="cuda").manual_seed(3))
    with pytest.raises(RuntimeError, match="mantissa must be torch.int8"):
        op(m.to(torch.int16), e, 16, 0)
    with pytest.raises(RuntimeError, match="exponent must be torch.uint8"):
        op(m, e.to(torch.int32), 16, 0)
    with pytest.raises(RuntimeError, match="must divide the last dimension"):
        op(m, e, 24, 0)
    with pytest.raises(RuntimeError, match="exponent has 8 elements"):
        op(m, e[:2], 16, 0)
    with pytest.raises(RuntimeError, match="contiguous"):
        op(m.t(), e, 16, 0)
    with pytest.raises(RuntimeError, match="impl=7"):
        op(m, e, 16, 7)
    assert op(m[:0], e[:0], 16, 0).shape == (0, 64)          # empty: no launch, no error


@cuda
@needs_gpu
def test_op_works_under_torch_compile_and_opcheck():
    m, e = _random_pair((128, 256), 32, torch.Generator(device="cuda").manual_seed(4))
    e = e.clamp(max=254)                                   # opcheck compares with NaN != NaN
    torch.library.opcheck(torch.ops.labkit_mxint8.dequantize.default, (m, e, 32, 0))
    fn = torch.compile(lambda a, b: torch.ops.labkit_mxint8.dequantize(a, b, 32, 0).float() * 2, fullgraph=True)
    assert torch.equal(fn(m, e), dequantize_mxint8(m, e, 32).float() * 2)


@cuda
@needs_gpu
def test_packed_linear_on_gpu_runs_the_extension_without_warning():
    lin = torch.nn.Linear(256, 64).cuda()
    # the dequantize path (the extension); impl="auto" would take the fused Triton kernel (test_fused_mxint8.py)
    q = MXINT8Linear.from_linear(lin, 32, impl="dequant")
    x = torch.randn(8, 256, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error", MXINT8ReferenceWarning)
        y = q(x)
    ref_layer = MXINT8Linear.from_linear(lin, 32, backend="reference")
    assert torch.equal(y, ref_layer(x))
    assert extension.describe().startswith("MXINT8 dequantization: CUDA extension")
