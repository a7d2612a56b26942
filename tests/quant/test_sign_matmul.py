"""The binary formats' sign-GEMM Linear (labkit.quant.sign_matmul) against a float64 oracle built from the
reference quantizers' values, and the dispatch that picks it (only evaluation on the fast path)."""
import pytest
import torch

from labkit.quant import sign_matmul
from labkit.quant.config import LinearQuantConfig
from labkit.quant.formats import make_format
from labkit.quant.formats.binary import ResidualSignFormat
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
        _layer("scaling", "scaling")(x)  # no autocast: the plain reference
    assert len(on_cpu) == 1
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert _layer("binary", "binary")(x).dtype == torch.bfloat16  # +-1 are bf16 values: the bf16 path first
    assert len(on_cpu) == 1


def test_why_not_names_the_role_that_is_not_binary():
    cfg = LinearQuantConfig(data_in=make_format("integer", width=8, frac_width=4), weight=FORMATS["binary"])
    layer = QuantLinear(8, 4, True, cfg, qat_matmul="bf16")
    assert sign_matmul.why_not(layer) == "data_in: not a binary format"
    stochastic = LinearQuantConfig(data_in=FORMATS["binary"], weight=make_format("binary", stochastic=True))
    assert sign_matmul.why_not(QuantLinear(8, 4, True, stochastic)) == "weight: not a binary format"
    assert sign_matmul.why_not(_layer("scaling", "residual2")) is None


SIGN_PAIRS = PAIRS[1:]  # binary x binary: its values are bf16 values, so the bf16 path takes it first


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("pair", SIGN_PAIRS, ids=["-".join(p) for p in SIGN_PAIRS])
def test_cuda_evaluation_takes_the_sign_gemm_and_matches_float64(pair):
    layer = _layer(*pair, k=1536, out=384, device="cuda")
    x = _input(1536, device="cuda", rows=(8, 128))
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        assert layer.qat_path("cuda")[0] == "fp32" and layer._sign_path(x)
        got = layer(x)
    assert got.dtype == torch.float32
    with torch.no_grad():
        ref = layer._forward(x)
    want, bound = _oracle(layer, x)
    assert ((got.double() - want).abs() <= 1e-6 * bound + 1e-30).all()
    assert ((ref.double() - want).abs() <= 1e-5 * bound + 1e-30).all()


# --- the one-pass planes kernel (Triton's interpreter here; CUDA on the device) ---------------------------

from labkit.quant import sign_matmul_triton  # noqa: E402


def _planes_cases(device):
    torch.manual_seed(3)
    x = torch.randn(37, 129, device=device) * 3
    x[0, :6] = torch.tensor([0.0, -0.0, float("nan"), float("inf"), -float("inf"), 1e-40])
    g = torch.tensor([1.3, 0.45, 0.2], device=device)
    out = []
    for L in (1, 2, 3):
        bits = torch.arange(L, device=device)
        table = ((torch.arange(2 ** L, device=device)[:, None] >> bits) & 1) * 2 - 1
        levels, order = torch.sort((table.float() * g[:L]).sum(-1))
        mids = (levels[1:] + levels[:-1]) / 2
        xl = x.clone()
        xl[1, : mids.numel()] = mids  # ties: a midpoint itself goes up
        out.append((xl, mids, table[order].half()))
    out.append((x, torch.zeros(1, device=device), torch.tensor([[-1.0], [1.0]], device=device).half()))  # sign
    return out


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert type(sign_matmul_triton._kernel(sign_matmul_triton.interpreting())).__name__ == "InterpretedFunction"
    return "cpu"


def _same(a, b):
    from labkit.quant import fast
    return fast.same_bits(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_interpreted_planes_kernel_is_the_reference(interpreter, dtype):
    for x, mids, lut in _planes_cases(interpreter):
        x = x.to(dtype)
        assert _same(sign_matmul_triton.planes(x, mids, lut), sign_matmul.planes_reference(x, mids, lut))


def test_planes_kernel_that_differs_is_turned_off_with_a_warning(interpreter, monkeypatch):
    monkeypatch.setattr(sign_matmul, "_CHECKED", set())
    monkeypatch.setattr(sign_matmul, "_KERNEL_OFF", {})
    monkeypatch.setattr(sign_matmul_triton, "planes", lambda x, mids, lut: -sign_matmul.planes_reference(x, mids, lut))
    x, mids, lut = _planes_cases("cpu")[1]
    with pytest.warns(RuntimeWarning, match="planes differ from the reference"):
        got = sign_matmul.planes(x, mids, lut)
    assert _same(got, sign_matmul.planes_reference(x, mids, lut)) and list(sign_matmul._KERNEL_OFF) == ["planes"]


def test_planes_reference_keeps_float64_signs():
    x = torch.tensor([1e-50, -1e-50, 0.0, -0.0], dtype=torch.float64)
    assert sign_matmul.signs(x)[0].tolist() == [1.0, -1.0, 1.0, 1.0]  # compared in float64, not rounded to fp32


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_planes_kernel_is_the_reference(dtype):
    for x, mids, lut in _planes_cases("cuda"):
        x = x.to(dtype)
        assert _same(sign_matmul_triton.planes(x, mids, lut), sign_matmul.planes_reference(x, mids, lut))


@pytest.mark.parametrize("lx,lw,x_rows,w_rows", [(1, 1, True, True), (2, 2, False, False), (3, 1, False, True),
                                                 (1, 2, True, False)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("pdtype", [torch.float16, torch.float32])
def test_interpreted_combine_kernel_is_the_reference(interpreter, lx, lw, x_rows, w_rows, bias, pdtype):
    torch.manual_seed(4)
    rows, out = 45, 140  # not multiples of the 32 x 128 tiles
    prod = torch.randint(-300, 301, (lx * rows, lw * out)).to(pdtype)
    xs = torch.rand(lx, rows if x_rows else 1) + 0.1
    ws = torch.rand(lw, out if w_rows else 1) + 0.1
    b = torch.randn(out) if bias else None
    got = sign_matmul_triton.combine(prod, xs, ws, b, rows, out)
    want = sign_matmul.combine_reference(prod, xs, ws, b, rows, out)
    assert got.shape == (rows, out) and torch.allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_sign_gemm_replays_in_a_cuda_graph():
    """The search's evaluation replays CUDA graphs: nothing in the path may copy from the host."""
    for pair in SIGN_PAIRS:
        layer = _layer(*pair, k=384, out=256, device="cuda")
        x = _input(384, device="cuda", rows=(4, 64))
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            eager = layer(x)  # first use: kernels checked, scales set
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = layer(x)
            graph.replay()
        assert torch.equal(captured, eager)


def test_combine_check_accepts_a_fused_rounding_near_cancellation(interpreter, monkeypatch):
    """Found on the H100: outputs near 0 by cancellation differed by 7e-7 from torch's (an FMA), and a relative
    check turned the kernel off. Cancelling terms here; the first-use check must keep the kernel on."""
    monkeypatch.setattr(sign_matmul, "_CHECKED", set())
    monkeypatch.setattr(sign_matmul, "_KERNEL_OFF", {})
    rows, out = 33, 130
    prod = torch.randint(-60, 61, (2 * rows, 2 * out)).half()
    xs, ws = torch.tensor([[0.7], [0.3000001]]), torch.tensor([[1.1], [0.9]])
    sign_matmul.combine(prod, xs, ws, torch.randn(out), rows, out)
    assert sign_matmul._KERNEL_OFF == {} and "combine" in sign_matmul._CHECKED
    real = sign_matmul_triton.combine
    monkeypatch.setattr(sign_matmul_triton, "combine", lambda *a: real(*a) * 1.001)
    monkeypatch.setattr(sign_matmul, "_CHECKED", set())
    with pytest.warns(RuntimeWarning, match="combine differs"):
        sign_matmul.combine(prod, xs, ws, None, rows, out)
    assert list(sign_matmul._KERNEL_OFF) == ["combine"]


def _row_signs_cases(device):
    torch.manual_seed(5)
    out = []
    for k in (7, 384, 1300):  # one partial tile, a whole one, several tiles and a tail (BK <= 512)
        x = torch.randn(19, k, device=device) * torch.logspace(-3, 2, k, device=device)
        x[0] = 0.0  # a row of zeros: alpha 0
        x[1, ::2] = -0.0
        x[2, 3] = float("nan")  # a NaN row: alpha NaN, that element's sign NaN
        x[3, 1] = float("inf")
        out.append(x)
    out.append(torch.randn(2, 3, 5, 64, device=device))  # N-D: one alpha per last-dim row
    return out


def _row_signs_reference(x):
    a = x.abs().mean(dim=-1, keepdim=True, dtype=torch.float64).to(torch.promote_types(x.dtype, torch.float32))
    return a, sign_matmul.signs(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_interpreted_row_signs_kernel_is_the_reference(interpreter, dtype):
    for x in _row_signs_cases(interpreter):
        x = x.to(dtype)
        alpha, planes = sign_matmul_triton.row_signs(x)
        want_alpha, want_planes = _row_signs_reference(x)
        assert alpha.shape == (*x.shape[:-1], 1) and _same(alpha, want_alpha)
        assert _same(planes, want_planes)


def test_binary_scaling_terms_take_the_row_signs_kernel(interpreter, monkeypatch):
    """binary_scaling (per channel) asks sign_matmul.row_signs for its terms; per tensor keeps the mean."""
    calls = []
    real = sign_matmul_triton.row_signs
    monkeypatch.setattr(sign_matmul_triton, "row_signs", lambda x: calls.append(x.shape) or real(x))
    monkeypatch.setattr(sign_matmul, "_CHECKED", set())
    x = _row_signs_cases("cpu")[1]
    (alpha,), planes = FORMATS["scaling"].sign_terms(x)
    assert calls == [x.shape] and _same(alpha, FORMATS["scaling"].scale(x)) and _same(planes, sign_matmul.signs(x))
    (alpha,), _ = FORMATS["scaling_tensor"].sign_terms(x)
    assert calls == [x.shape] and alpha.numel() == 1


def test_row_signs_kernel_that_differs_is_turned_off_with_a_warning(interpreter, monkeypatch):
    monkeypatch.setattr(sign_matmul, "_CHECKED", set())
    monkeypatch.setattr(sign_matmul, "_KERNEL_OFF", {})
    real = sign_matmul_triton.row_signs
    monkeypatch.setattr(sign_matmul_triton, "row_signs", lambda x: (real(x)[0] * 1.0000001, real(x)[1]))
    x = _row_signs_cases("cpu")[1]
    with pytest.warns(RuntimeWarning, match="row signs: scales differ"):
        alpha, _ = sign_matmul.row_signs(x, FORMATS["scaling"].scale)
    assert _same(alpha, _row_signs_reference(x)[0]) and list(sign_matmul._KERNEL_OFF) == ["row signs"]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_row_signs_kernel_is_the_reference(dtype):
    for x in _row_signs_cases("cuda"):
        x = x.to(dtype)
        alpha, planes = sign_matmul_triton.row_signs(x)
        want_alpha, want_planes = _row_signs_reference(x)
        assert _same(alpha, want_alpha) and _same(planes, want_planes)


def test_residual_sign_table_is_kept_for_fixed_scales_and_remade_when_they_change():
    q = FORMATS["residual2"].quantizer().eval()
    x = torch.randn(6, 50)
    with torch.no_grad():
        g, planes = q.sign_terms(x)
        table = q._sign_table
        assert q.sign_terms(x)[0] is g and q._sign_table is table  # fixed scales: the same table, not remade
        q.scales.mul_(2)  # a new version: a new table, and the planes of the new levels
        g2, planes2 = q.sign_terms(x)
        assert q._sign_table is not table and torch.equal(torch.stack(g2), 2 * torch.stack(g))
        q.train()
        assert "_sign_table" not in q.__dict__  # train()/eval() drop it (fused optimizers keep the version)
    want = ResidualSignFormat.apply_scales(x, q.scales.detach())
    got = sum(gi * p.float() for gi, p in zip(g2, planes2))
    assert torch.allclose(got, want, rtol=1e-6, atol=1e-7)
