"""The binary formats' sign-GEMM Linear (labkit.quant.sign_matmul) against a float64 oracle built from the
reference quantizers' values, and the dispatch that picks it (only evaluation on the fast path)."""
import pytest
import torch

from labkit.quant import sign_matmul
from labkit.quant.config import LinearQuantConfig
from labkit.quant.formats import make_format
from labkit.quant.linear import QuantLinear

FORMATS = {
    "binary": make_format("binary"),
    "scaling": make_format("binary_scaling", per_channel=True),
    "scaling_tensor": make_format("binary_scaling", per_channel=False),
    "residual2": make_format("binary_residual_sign", levels=2),
    "residual3": make_format("binary_residual_sign", levels=3),
}
PAIRS = [("binary", "binary"), ("scaling", "scaling"), ("scaling_tensor", "scaling"),
         ("residual2", "residual2"), ("residual3", "scaling"), ("scaling", "residual2")]


def _layer(data_in, weight, k=96, out=40, bias=True, device="cpu", seed=0):
    torch.manual_seed(seed)
    lin = torch.nn.Linear(k, out, bias=bias, device=device)
    cfg = LinearQuantConfig(data_in=FORMATS[data_in], weight=FORMATS[weight])
    return QuantLinear.from_linear(lin, cfg, qat_matmul="bf16").eval()


def _input(k, device="cpu", rows=(3, 17)):
    x = torch.randn(*rows, k, device=device) * torch.logspace(-2, 1, k, device=device)
    x[0, 0] = 0.0  # a whole row of zeros: scale 0 for binary_scaling
    x[0, 1, : k // 2] = -0.0  # -0.0 counts as 0 (sign +1)
    return x


def _oracle(layer, x):
    """float64 product of the reference quantizers' values (the quantizers already initialised)."""
    with torch.no_grad():
        xq = layer.q_data_in(x.float()).double()
        wq = layer.q_weight(layer.weight).double()
        y = xq @ wq.T
        bound = xq.abs() @ wq.abs().T  # what fp32 rounding scales with
        if layer.bias is not None:
            y, bound = y + layer.bias.double(), bound + layer.bias.double().abs()
    return y, bound


@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(p) for p in PAIRS])
@pytest.mark.parametrize("k", [96, 2048 + 300])  # past 2048 the fp16 GEMM is cut into exact slices
def test_sign_gemm_matches_float64_and_the_reference(pair, k):
    layer = _layer(*pair, k=k)
    x = _input(k)
    with torch.no_grad():
        got = sign_matmul.linear(layer, x)  # first: residual sign sets its scales from this batch
        ref = layer._forward(x)
    want, bound = _oracle(layer, x)
    assert got.dtype == torch.float32 and got.shape == ref.shape
    # fp32 rounding: the sign path rounds two multiplications per output, the reference each of K products
    assert ((got.double() - want).abs() <= 1e-6 * bound + 1e-30).all()
    assert ((ref.double() - want).abs() <= 1e-5 * bound + 1e-30).all()


def test_exact_mm_is_exact_past_fp16s_integer_range():
    torch.manual_seed(1)
    for k in (2048, 5000):
        a = torch.ones(4, k, dtype=torch.float16)
        a[1] = torch.where(torch.rand(k) < 0.5, 1.0, -1.0)
        b = torch.where(torch.rand(3, k) < 0.7, 1.0, -1.0).half()
        want = a.long() @ b.long().T
        assert torch.equal(sign_matmul._exact_mm(a, b), want.float())
        assert sign_matmul._exact_mm(a, b)[0, 0] == (b[0].long().sum())  # all +1 times b: |sum| up to k


@pytest.mark.parametrize("data_in", ["binary", "scaling", "residual2"])
def test_nan_input_gives_nan_rows_as_the_reference(data_in):
    layer = _layer(data_in, "residual2")
    x = _input(96)
    with torch.no_grad():
        sign_matmul.linear(layer, x)  # residual sign's per-tensor scales set from a batch without NaN
        x[1, 2, 5] = float("nan")
        got, ref = sign_matmul.linear(layer, x), layer._forward(x)
    assert torch.isnan(got[1, 2]).all() and torch.isnan(ref[1, 2]).all()
    assert torch.equal(torch.isnan(got), torch.isnan(ref)) and not torch.isnan(got[0]).any()


@pytest.fixture
def on_cpu(monkeypatch):
    monkeypatch.setattr(sign_matmul, "DEVICES", ("cpu",))
    calls = []
    real = sign_matmul.linear
    monkeypatch.setattr(sign_matmul, "linear", lambda layer, x: calls.append(layer) or real(layer, x))
    return calls


def test_dispatch_only_for_evaluation_on_the_fast_path(on_cpu):
    layer = _layer("residual2", "scaling")
    x = _input(96)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.no_grad():
            y = layer(x)
        assert len(on_cpu) == 1 and y.dtype == torch.float32
        want, bound = _oracle(layer, x)
        assert ((y.double() - want).abs() <= 1e-6 * bound).all()
        layer(x.requires_grad_())  # QAT: the reference path (its STE)
        assert len(on_cpu) == 1
        layer.qat_matmul = "fp32"
        with torch.no_grad():
            layer(x)
        assert len(on_cpu) == 1
    with torch.no_grad():
        _layer("binary", "binary")(x)  # no autocast: the plain reference
    assert len(on_cpu) == 1


def test_why_not_names_the_role_that_is_not_binary():
    cfg = LinearQuantConfig(data_in=make_format("integer", width=8, frac_width=4), weight=FORMATS["binary"])
    layer = QuantLinear(8, 4, True, cfg, qat_matmul="bf16")
    assert sign_matmul.why_not(layer) == "data_in: not a binary format"
    stochastic = LinearQuantConfig(data_in=FORMATS["binary"], weight=make_format("binary", stochastic=True))
    assert sign_matmul.why_not(QuantLinear(8, 4, True, stochastic)) == "weight: not a binary format"
    assert sign_matmul.why_not(_layer("scaling", "residual2")) is None


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(p) for p in PAIRS])
def test_cuda_evaluation_takes_the_sign_gemm_and_matches_float64(pair):
    layer = _layer(*pair, k=1536, out=384, device="cuda")
    x = _input(1536, device="cuda", rows=(8, 128))
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        assert layer._sign_path(x)
        got = layer(x)
    with torch.no_grad():
        ref = layer._forward(x)
    want, bound = _oracle(layer, x)
    assert ((got.double() - want).abs() <= 1e-6 * bound + 1e-30).all()
    assert ((ref.double() - want).abs() <= 1e-5 * bound + 1e-30).all()
