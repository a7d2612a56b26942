"""bf16 QAT path (labkit.quant.fast, QuantLinear(qat_matmul="bf16")) against the fp32 reference, on CPU.

The fused fake quantization must equal the formats' reference bit for bit (values, STE masks, gradients),
eager and compiled. The layer's outputs and gradients under bf16 autocast are compared with a float64
oracle built from the reference's quantized operands, element by element:

    |got - ref| <= u_out * |ref| + (1 + u_out) * (u_in + (n + 2) * 2^-23) * S + 2^-133

- ``S``: the sum of the magnitudes of the terms (|a| @ |b|, times the STE mask for gradients);
- ``(n + 2) * 2^-23 * S``: fp32 accumulation of n terms in any order (2^-23 covers truncating adds);
- ``u_out = 2^-8``: the one rounding of a bf16 result (round to nearest; 0 for the fp32 reference);
- ``u_in = 2^-8``: a bf16-rounded input where there is one: the upstream gradient of the bf16 output, an
  unquantized bias (as autocast casts any Linear's); 0 where the operands are exact (the quantized ones).
"""
import warnings

import pytest
import torch

from labkit.quant import LinearQuantConfig, QuantLinear, make_format, quantize, set_qat_matmul
from labkit.quant import fast

U8 = 2.0 ** -8
ELIGIBLE = [("integer", dict(width=8, frac_width=4)), ("integer", dict(width=9, frac_width=2)),
            ("minifloat_ieee", dict(width=8, exponent_width=4)), ("minifloat_ieee", dict(width=9, exponent_width=1)),
            ("minifloat_denorm", dict(width=8, exponent_width=3)),
            ("minifloat_denorm", dict(width=10, exponent_width=1)),
            ("mxint8", dict(group_size=32)), ("mxint8", dict(group_size=16)),
            ("log", dict(width=8)), ("log", dict(width=3)), ("binary", {}),
            ("block_fp", dict(width=8, block_size=16)), ("block_fp", dict(width=3, block_size=32)),
            ("block_minifloat", dict(width=4, exponent_width=2, block_size=16)),
            ("block_log", dict(width=3, block_size=16))]


def fmt_id(case):
    return case[0] + "-" + "-".join(f"{v}" for v in case[1].values())


@pytest.mark.parametrize("name,params,why", [
    ("integer", dict(width=10, frac_width=4), "9 significant bits, bf16 has 8"),
    ("minifloat_ieee", dict(width=10, exponent_width=1), "9 significant bits"),
    ("minifloat_ieee", dict(width=16, exponent_width=8), "exceeds bf16's"),
    ("minifloat_denorm", dict(width=11, exponent_width=1), "9 significant bits"),
    ("log", dict(width=11), "steps of 2^-511"),
    ("block_fp", dict(width=10), "9 significant bits"),
    ("block_fp", dict(width=8, exponent_width=8, exponent_bias=130), "finer than bf16's smallest 2^-133"),
    ("block_minifloat", dict(width=8, exponent_width=3), "steps of 2^-134"),
    ("block_log", dict(width=8), "steps of 2^-254"),
    ("binary", dict(stochastic=True), "draws in training"),
    ("binary_scaling", {}, "not analysed for bf16 exactness"),
])
def test_formats_wider_than_bf16_say_why(name, params, why):
    assert why in make_format(name, **params).why_not_bf16()


@pytest.mark.parametrize("case", ELIGIBLE, ids=fmt_id)
def test_eligible_formats_are_bf16_exact(case):
    fmt = make_format(case[0], **case[1])
    assert fmt.why_not_bf16() is None
    x = torch.randn(64, 96) * 2.0 ** torch.randint(-8, 8, (64, 1))
    # rows at the ends of float32: its largest and subnormal magnitudes (block formats' extreme exponents)
    x[0] = torch.linspace(-1, 1, 96) * 3.0e38
    x[1] = torch.randn(96) * 2.0 ** -140
    x[2, :48] = 2.0 ** -149
    q = fmt.quantize_values(x)
    assert torch.equal(q.to(torch.bfloat16).float(), q)  # every produced value survives the cast


@pytest.mark.parametrize("case", ELIGIBLE, ids=fmt_id)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_fake_quant_equals_reference_values_and_gradients(case, dtype):
    fmt = make_format(case[0], **case[1])
    gen = torch.Generator().manual_seed(0)
    base = (torch.randn(8, 64, generator=gen) * 3).to(dtype)  # some saturate (clipped STE zeros)
    x = base.clone().requires_grad_()
    x_ref = base.clone().float().requires_grad_()
    q = fast.fake_quantize_bf16(fmt, x, compile=False)
    q_ref = fmt.fake_quantize(x_ref)
    assert q.dtype == torch.bfloat16 and torch.equal(q.float(), q_ref)
    g = torch.randn(8, 64, generator=gen).to(torch.bfloat16)
    q.backward(g)
    q_ref.backward(g.float())
    assert x.grad.dtype == dtype and torch.equal(x.grad.float(), x_ref.grad.to(dtype).float())


def test_compiled_fake_quant_equals_eager():
    """torch.compile of the reference formulas (one pass): same bits, two shapes (dynamic)."""
    for name, params in (("integer", dict(width=8, frac_width=4)), ("mxint8", dict(group_size=32))):
        fmt = make_format(name, **params)
        for shape in ((16, 64), (5, 96)):
            x = torch.randn(*shape) * 4
            q, mask = fast.fused_fn(fmt, compile=True)(x)
            q_eager, mask_eager = fast.fused_fn(fmt, compile=False)(x)
            assert torch.equal(q, q_eager)
            assert (mask is None and mask_eager is None) or torch.equal(mask, mask_eager)
        xg = torch.randn(4, 64, requires_grad=True)
        fast.fake_quantize_bf16(fmt, xg, compile=True).float().sum().backward()
        expect = fmt.pass_mask(xg.detach())
        assert torch.equal(xg.grad, torch.ones_like(xg) if expect is None else expect.float())


def bounded(got, ref, S, u_out, u_in, n, what):
    got, ref, S = got.double(), ref.double(), S.double()
    tol = u_out * ref.abs() + (1 + u_out) * (u_in + (n + 2) * 2.0 ** -23) * S + 2.0 ** -133
    err = (got - ref).abs()
    assert (err <= tol).all(), f"{what}: {int((err > tol).sum())} entries outside the bound, worst excess " \
                               f"{float((err - tol).max()):.3g}"


def oracle(layer, x, G):
    """float64 forward/gradients from the reference's quantized operands and STE masks."""
    c = layer.config

    def q(fmt, t):
        if fmt is None:
            return t.detach().double(), torch.ones_like(t, dtype=torch.float64)
        mask = fmt.pass_mask(t.detach().float())
        return fmt.quantize_values(t.detach().float()).double(), (torch.ones_like(t, dtype=torch.float64)
                                                                 if mask is None else mask.double())

    xq, mx = q(c.data_in, x)
    wq, mw = q(c.weight, layer.weight)
    bq, mb = q(c.bias, layer.bias)
    G = G.double()
    return {"y": (xq @ wq.T + bq, xq.abs() @ wq.abs().T + bq.abs(), x.shape[-1]),
            "x": ((G @ wq) * mx, (G.abs() @ wq.abs()) * mx, wq.shape[0]),
            "w": ((G.T @ xq) * mw, (G.abs().T @ xq.abs()) * mw, x.shape[0]),
            "b": (G.sum(0) * mb, G.abs().sum(0) * mb, x.shape[0])}


CONFIGS = {
    "int8-all-roles": dict(name="integer", data_in_width=8, data_in_frac_width=4, weight_width=8,
                           weight_frac_width=6, bias_width=8, bias_frac_width=5),
    "e4m3-in-weight": dict(name="minifloat_ieee", data_in_width=8, data_in_exponent_width=4, weight_width=8,
                           weight_exponent_width=4),
    "mxint8-in-weight": dict(name="mxint8", data_in_group_size=32, weight_group_size=32),
    "int8-weight-only": dict(name="integer", weight_width=8, weight_frac_width=6),
}


@pytest.mark.parametrize("cfg", list(CONFIGS), ids=list(CONFIGS))
def test_bf16_layer_matches_fp32_reference_within_bounds(cfg):
    torch.manual_seed(0)
    lin = torch.nn.Linear(96, 40)
    ref_layer = QuantLinear.from_linear(lin, LinearQuantConfig.from_dict(CONFIGS[cfg]))
    fast_layer = QuantLinear.from_linear(lin, LinearQuantConfig.from_dict(CONFIGS[cfg]), qat_matmul="bf16",
                                         compile=False)
    x = torch.randn(24, 96) * 2
    G = torch.randn(24, 40)
    o = oracle(ref_layer, x, G)
    unquantized_bias = U8 if ref_layer.q_bias is None else 0.0
    unquantized_x = U8 if ref_layer.q_data_in is None else 0.0
    for layer, bf16 in ((ref_layer, False), (fast_layer, True)):
        xi = x.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert layer.qat_path("cpu")[0] == ("bf16" if bf16 else "fp32")
            y = layer(xi)
        assert y.dtype == (torch.bfloat16 if bf16 else torch.float32)
        (y.float() * G).sum().backward()
        u = U8 if bf16 else 0.0
        ref, S, n = o["y"]
        bounded(y, ref, S, u, (unquantized_bias + unquantized_x) if bf16 else 0.0, n, f"{cfg} y (bf16={bf16})")
        for key, got in (("x", xi.grad), ("w", layer.weight.grad), ("b", layer.bias.grad)):
            ref, S, n = o[key]
            # the upstream gradient of a bf16 output is rounded to bf16 (u_in); an unquantized x was too
            u_in = (U8 + (unquantized_x if key == "w" else 0.0)) if bf16 else 0.0
            bounded(got, ref, S, u, u_in, n, f"{cfg} grad {key} (bf16={bf16})")


def test_paths_are_named_and_wide_formats_stay_fp32():
    lin = torch.nn.Linear(32, 8)
    wide = QuantLinear.from_linear(lin, LinearQuantConfig(weight=make_format("integer", width=16, frac_width=8)),
                                   qat_matmul="bf16")
    assert wide.qat_path("cpu") == ("fp32", "autocast is off")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        path, why = wide.qat_path("cpu")
        assert path == "fp32" and why.startswith("weight: integer(width=16, frac_width=8): 15 significant bits")
        assert wide(torch.randn(2, 32)).dtype == torch.float32  # the reference path, unchanged
    narrow = QuantLinear.from_linear(lin, LinearQuantConfig(weight=make_format("integer", width=8, frac_width=4)))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert narrow.qat_path("cpu") == ("fp32", "qat_matmul='fp32'")
    assert "qat_matmul='bf16'" in repr(wide) and "qat_matmul" not in repr(narrow)
    with pytest.raises(ValueError, match="qat_matmul='fp16': allowed values are 'fp32', 'bf16'"):
        QuantLinear.from_linear(lin, LinearQuantConfig(weight=make_format("integer")), qat_matmul="fp16")


def test_set_qat_matmul_reports_every_layer_and_warns_about_the_rest():
    model = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    spec = {"by": "name", "default": {"name": "integer", "weight_width": 8, "weight_frac_width": 4},
            "2": {"name": "integer", "weight_width": 12, "weight_frac_width": 4}}
    with pytest.warns(UserWarning, match=r"1 of 2 QuantLinear layers keep the fp32 path: 2 \(weight: integer"):
        q = quantize(model, spec, qat_matmul="bf16", compile=False).model
    assert q[0].qat_matmul == "bf16" and q[2].qat_matmul == "bf16"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = set_qat_matmul(q, "fp32")
    assert report == {"0": "fp32: qat_matmul='fp32'", "2": "fp32: qat_matmul='fp32'"}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        set_qat_matmul(q[:1], "bf16", compile=False)
        assert q[0](torch.randn(3, 32)).dtype == torch.bfloat16
