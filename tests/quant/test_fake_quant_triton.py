"""The one-pass Triton fake quantization (labkit.quant.fake_quant_triton) against the formats' own formulas.

Oracle: ``fmt.quantize_values(x.float()).to(out_dtype)``, compared bit for bit (``fast.same_bits``: values,
zero signs, NaN positions) on inputs built to hit every branch: zeros of both signs, NaN, +-inf, float32
subnormals and its largest values, exact ties of each format's grid, saturation, blocks of mixed scales, a
ragged last block. Runs in Triton's CPU interpreter (TRITON_INTERPRET=1 per test) and, where CUDA exists,
compiled on the GPU (the device's Triton; marked ``cuda``).
"""
import warnings

import pytest
import torch

from labkit.quant import QuantLinear, fast, kernel_check, make_format
from labkit.quant import fake_quant_triton as fq
from labkit.quant.config import LinearQuantConfig
from labkit.labs.lab3_precision import FIXED, FORMAT_SPACE, _effective

HAS_TRITON = fq.triton is not None
needs_triton = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

# every Lab 3 search setting of the supported families, plus wider and odd ones
CASES = [("integer", dict(width=8, frac_width=4)), ("integer", dict(width=16, frac_width=8)),
         ("integer", dict(width=32, frac_width=2)), ("integer", dict(width=4, frac_width=-3)),
         ("minifloat_denorm", dict(width=8, exponent_width=4)), ("minifloat_denorm", dict(width=4, exponent_width=2)),
         ("minifloat_denorm", dict(width=12, exponent_width=5, exponent_bias=3)),
         ("minifloat_ieee", dict(width=8, exponent_width=4)), ("minifloat_ieee", dict(width=5, exponent_width=4)),
         ("minifloat_ieee", dict(width=4, exponent_width=3)), ("minifloat_ieee", dict(width=16, exponent_width=8)),
         ("minifloat_ieee", dict(width=12, exponent_width=10)),  # float64 working dtype
         ("log", dict(width=8)), ("log", dict(width=3)), ("log", dict(width=10)), ("log", dict(width=5, exponent_bias=2)),
         ("binary", {}),
         ("block_fp", dict(width=8, block_size=16)), ("block_fp", dict(width=3, block_size=32)),
         ("block_fp", dict(width=6, exponent_width=4, block_size=8)), ("block_fp", dict(width=8, block_size=7)),
         ("block_minifloat", dict(width=8, exponent_width=3, block_size=16)),
         ("block_minifloat", dict(width=4, exponent_width=2, block_size=32)),
         ("block_minifloat", dict(width=6, exponent_width=2, exponent_bias_width=4, block_size=12)),
         ("block_log", dict(width=8, block_size=16)), ("block_log", dict(width=3, block_size=32)),
         ("block_log", dict(width=5, exponent_bias_width=5, block_size=5)),
         ("mxint8", dict(group_size=32)), ("mxint8", dict(group_size=16))]
SPECIALS = [0.0, -0.0, float("nan"), float("inf"), -float("inf"), 2.0 ** -149, -(2.0 ** -140), 2.0 ** -126,
            1.5 * 2.0 ** -127, 3.0e38, -3.3e38, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 3.0, 0.75, 1.4142135, 1.4142137]


def fmt_id(case):
    return case[0] + "-" + "-".join(f"{v}" for v in case[1].values())


def inputs(K: int = 96, rows: int = 48, seed: int = 0) -> torch.Tensor:
    """Rows of mixed scales (blocks see different shared exponents), grid ties, specials spread over blocks."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, K, generator=g) * 2.0 ** torch.randint(-30, 30, (rows, 1), generator=g)
    x[0] = torch.randint(-64, 64, (K,), generator=g) / 8.0  # exact ties at many grids
    x[1] = torch.randint(-64, 64, (K,), generator=g) / 16.0 + 1 / 32  # midpoints
    x[2] = torch.randn(K, generator=g) * 2.0 ** -135  # float32 subnormals
    x[3] = torch.linspace(-1, 1, K) * 3.3e38
    flat = x[4:].reshape(-1)
    pos = torch.randperm(flat.numel(), generator=g)[: 3 * len(SPECIALS)]
    flat[pos] = torch.tensor(SPECIALS * 3)
    x[5, : K // 2] = 0.0  # an all-zero block
    x[6, 3] = float("nan")  # a NaN beside finite values of one block
    return x


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    kernel = fq._kernel(fq.interpreting())
    assert type(kernel).__name__ == "InterpretedFunction"
    return "cpu"


def check(fmt, x, out_dtype):
    got = fq.quantize(fmt, x, out_dtype)
    want = fmt.quantize_values(x.float()).to(out_dtype)
    bad = ~((got == want) | (got.isnan() & want.isnan()))
    assert fast.same_bits(got, want), (
        f"{fmt.describe()}: {int(bad.sum())} of {x.numel()} differ, e.g. x={x[bad][:4].tolist()} "
        f"got {got[bad][:4].tolist()} want {want[bad][:4].tolist()}")


def test_sqrt2_constants_are_the_reference_thresholds():
    from labkit.quant.formats._util import SQRT2_ABOVE
    assert fq.SQRT2_FRAC_F32 == fq._frac_bits(SQRT2_ABOVE[torch.float32], False)
    assert fq.SQRT2_FRAC_F64 == fq._frac_bits(SQRT2_ABOVE[torch.float64], True)


def test_every_search_setting_is_covered():
    """Every supported family's Lab 3 search values appear in CASES (so the search never meets an untested one)."""
    names = {name for name, _ in CASES}
    for name in FORMAT_SPACE:
        fmt = make_format(name, **FIXED.get(name, {}))
        assert (name in names) == (fq.why_unsupported(fmt) is None), name


@needs_triton
@pytest.mark.parametrize("case", CASES, ids=fmt_id)
def test_interpreted_kernel_is_the_formula(interpreter, case):
    fmt = make_format(*case[:1], **case[1])
    check(fmt, inputs(), torch.float32)


@needs_triton
@pytest.mark.parametrize("case", [c for c in CASES if make_format(c[0], **c[1]).why_not_bf16() is None], ids=fmt_id)
@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16])
def test_interpreted_kernel_bf16_in_and_out(interpreter, case, in_dtype):
    """The bf16 path: bf16 or float32 inputs, exact bf16 outputs (the interpreter's bf16 cast truncates,
    which is exact on these values). The interpreter's bf16 conversions flush bf16 subnormals (|x| < 2^-126,
    sign included), so they are left out here; the CUDA test keeps them."""
    fmt = make_format(case[0], **case[1])
    x = inputs(K=64, rows=24, seed=1)
    x = torch.where(x.abs() < 2.0 ** -126, 0.0, x).to(in_dtype)
    check(fmt, x, torch.bfloat16)


@needs_triton
@pytest.mark.parametrize("shape", [(), (7,), (3, 5, 40), (2, 0, 16), (1, 1)])
def test_interpreted_kernel_shapes(interpreter, shape):
    """0-d, 1-D (a bias), 3-D activations with a ragged last block, empty."""
    for name, params in (("block_fp", dict(width=8, block_size=16)), ("integer", dict(width=8, frac_width=4)),
                         ("mxint8", dict(group_size=16))):
        fmt = make_format(name, **params)
        x = torch.randn(shape) * 5
        got = fq.quantize(fmt, x)
        assert got.shape == x.shape
        assert fast.same_bits(got, fmt.quantize_values(x))


@pytest.mark.parametrize("name,params,why", [
    ("binary_scaling", {}, "no one-pass kernel"),
    ("binary_residual_sign", {}, "no one-pass kernel"),
    ("binary", dict(stochastic=True), "draws random numbers"),
    ("block_fp", dict(block_size=8192), "more than 4096"),
])
def test_unsupported_formats_say_why(name, params, why):
    if not HAS_TRITON:
        pytest.skip("triton is not installed")
    assert why in fq.why_unsupported(make_format(name, **params))


@needs_triton
def test_bad_dtypes_say_why(interpreter):
    fmt = make_format("integer")
    assert "input dtype torch.float64" in fq.why_unsupported(fmt, torch.zeros(2, dtype=torch.float64))
    assert "output dtype torch.float16" in fq.why_unsupported(fmt, torch.zeros(2), torch.float16)
    with pytest.raises(ValueError, match="input dtype torch.float64"):
        fq.quantize(fmt, torch.zeros(2, dtype=torch.float64))


@needs_triton
def test_fast_path_uses_the_kernel_and_falls_back_when_it_differs(interpreter, monkeypatch):
    """``fast.triton_values``: the kernel's result where it matches the reference; a kernel that returns
    wrong values is caught on first use, warned about, and the reference is used from then on."""
    monkeypatch.setattr(fast, "_TRITON_CHECKED", set())
    monkeypatch.setattr(fast, "_TRITON_OFF", {})
    monkeypatch.setattr(kernel_check, "FALLBACKS", {})
    fmt = make_format("minifloat_ieee", width=8, exponent_width=4)
    x = inputs(K=32, rows=8)
    calls = []
    real = fq.quantize
    monkeypatch.setattr(fq, "quantize", lambda *a, **k: calls.append(1) or real(*a, **k))
    q = fast.quantize_values(fmt, x, compile=False)
    assert calls and fast.same_bits(q, fmt.quantize_values(x)) and (fmt, torch.float32) in fast._TRITON_CHECKED
    q16 = fast.fake_quantize_bf16(fmt, x, compile=False)  # no grad wanted: values only, bf16 from the kernel
    assert q16.dtype == torch.bfloat16 and len(calls) == 2 and fast.same_bits(q16.float(), fmt.quantize_values(x))

    wrong = make_format("log", width=6)
    monkeypatch.setattr(fq, "quantize", lambda f, t, out_dtype=None: real(f, t, out_dtype) * 2)
    with pytest.warns(RuntimeWarning, match="differs from the reference"):
        q = fast.quantize_values(wrong, x, compile=False)
    assert fast.same_bits(q, wrong.quantize_values(x)) and wrong in fast._TRITON_OFF
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fast.same_bits(fast.quantize_values(wrong, x, compile=False), wrong.quantize_values(x))


@needs_triton
def test_one_input_quantized_once_for_query_key_and_value(interpreter, monkeypatch):
    """Three Linears quantizing the same tensor in the same format (attention's query, key and value) run
    the kernel once; another format, another dtype or an in-place change of the input runs it again."""
    monkeypatch.setattr(fast, "_LAST", [None])
    calls = []
    real = fq.quantize
    monkeypatch.setattr(fq, "quantize", lambda *a, **k: calls.append(1) or real(*a, **k))
    fmt = make_format("block_fp", width=6, block_size=16)
    x = torch.randn(4, 32)
    with torch.no_grad():
        q = [fast.fake_quantize_bf16(fmt, x, compile=False) for _ in range(3)]
        assert len(calls) == 1 and q[0] is q[1] is q[2]
        fast.fake_quantize_bf16(make_format("block_fp", width=5, block_size=16), x, compile=False)
        fast.quantize_values(fmt, x, compile=False)
        assert len(calls) == 3
        x.mul_(2)
        again = fast.fake_quantize_bf16(fmt, x, compile=False)
        assert len(calls) == 4 and torch.equal(again.float(), fmt.quantize_values(x))


@needs_triton
def test_kernels_off_switch(interpreter, monkeypatch):
    monkeypatch.setattr(kernel_check, "TRITON_FAKE_QUANT", False)
    monkeypatch.setattr(fq, "quantize", lambda *a, **k: pytest.fail("kernel called with the switch off"))
    fmt = make_format("integer")
    x = torch.randn(4, 16)
    assert fast.same_bits(fast.quantize_values(fmt, x, compile=False), fmt.quantize_values(x))


@needs_triton
@pytest.mark.parametrize("name", ["log", "block_fp", "binary", "block_minifloat"])
def test_quantlinear_eval_with_the_kernel_equals_the_reference(interpreter, monkeypatch, name):
    """A QuantLinear's no-grad forward (PTQ evaluation) through the kernels equals the reference path."""
    params = {k: v[-1] for k, v in FORMAT_SPACE[name].items()}
    params = {**FIXED.get(name, {}), **_effective(name, params)}
    fmt = make_format(name, **params)
    layer = QuantLinear(64, 24, True, LinearQuantConfig(data_in=fmt, weight=fmt, bias=fmt)).eval()
    x = torch.randn(5, 64) * 3
    with torch.no_grad():
        got = layer(x)
        monkeypatch.setattr(kernel_check, "TRITON_FAKE_QUANT", False)
        layer.__dict__.pop("_frozen_cache", None)
        want = layer(x)
    assert torch.equal(got, want)


# ---------------------------------------------------------------------------------------------------------
# compiled on the GPU
# ---------------------------------------------------------------------------------------------------------

@cuda
@needs_triton
@pytest.mark.cuda
@pytest.mark.parametrize("name,params", [("block_fp", dict(width=8, block_size=16)), ("log", dict(width=8)),
                                         ("integer", dict(width=8, frac_width=4))])
def test_cuda_graphed_quantized_evaluation_is_the_eager_one(name, params):
    """A PTQ model's evaluation with the kernels inside a CUDA graph (the search's trial) gives the eager
    evaluation's accuracy and loss, and the fp32 reference's within the bf16 path's rounding."""
    from labkit import models
    from labkit.training import train
    from labkit.quant import quantize
    from labkit.labs.lab3_precision import layer_config

    torch.manual_seed(0)
    model = models.from_config(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).cuda()
    ids = torch.randint(1000, 5000, (160, 48), device="cuda")
    data = [{"input_ids": ids[i:i + 32], "attention_mask": torch.ones_like(ids[i:i + 32]),
             "labels": ids[i:i + 32, 0] % 2} for i in range(0, 160, 32)]
    spec = {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": layer_config(name, params)}}
    q = quantize(model, spec, qat_matmul="bf16", compile=False).model
    eager = train.evaluate(q, data, device="cuda", progress=False, graphs=False)
    graphed = train.evaluate(q, data, device="cuda", progress=False, graphs=True)
    assert graphed["graph_replays"] >= 2 and graphed["graph_failure"] is None
    assert graphed["accuracy"] == eager["accuracy"] and abs(graphed["loss"] - eager["loss"]) < 1e-6
    ref = quantize(model, spec, qat_matmul="fp32", compile=False).model
    kernel_check.TRITON_FAKE_QUANT = False
    try:
        reference = train.evaluate(ref, data, device="cuda", progress=False, graphs=False)
    finally:
        kernel_check.TRITON_FAKE_QUANT = True
    assert abs(reference["loss"] - eager["loss"]) < 2e-2

@cuda
@needs_triton
@pytest.mark.cuda
def test_cuda_kernel_is_the_formula_for_every_case():
    """Every case, float32 and (bf16-exact formats) bf16 outputs, a large ragged tensor too (many programs)."""
    for case in CASES:
        fmt = make_format(case[0], **case[1])
        for x in (inputs().cuda(), (torch.randn(4099, 384, device="cuda") * 4)):
            check(fmt, x, torch.float32)
            if fmt.why_not_bf16() is None:
                check(fmt, x, torch.bfloat16)
                check(fmt, x.bfloat16(), torch.bfloat16)
