"""The inference path of ``QuantLinear`` (no gradient: evaluation, PTQ) against the reference.

- ``fast.quantize_values`` compiled must give the formats' eager ``quantize_values`` bit for bit, for
  every Lab 3 format family at its extreme parameters (three shapes: dynamic rows, ragged blocks), where
  compiling works; where it fails (on CPU inductor's C++ code for some block formats, on an H100 Triton
  code for float64 minifloats) the format falls back to eager, loudly, and the values are still checked;
- a layer's quantized weight is computed once per weight version in eval mode and again after any
  in-place update, move, or training-mode forward; the layer's eval output equals the STE path's.
"""
import copy
import warnings

import pytest
import torch

from labkit.quant import QuantLinear, make_format
from labkit.quant import fast, kernel_check
from labkit.quant.config import LinearQuantConfig
from labkit.labs.lab3_precision import FIXED, FORMAT_SPACE, layer_config


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def family_cases():
    """Each family at its smallest and largest searched parameters (fixed ones at their setting)."""
    for name, space in FORMAT_SPACE.items():
        for pick in (0, -1):
            params = {**FIXED.get(name, {}), **{k: v[pick] for k, v in space.items()}}
            if "exponent_width" in space:  # the search's cut: the widest exponent the width allows
                from labkit.labs.lab3_precision import _effective
                params = _effective(name, params)
            yield pytest.param(name, params, id=f"{name}-{'lo' if pick == 0 else 'hi'}")
            if not space:
                break


def awkward(shape, seed=0):
    """Magnitudes over 2^-20 .. 2^12, exact zeros, -0.0, ties for the rounding."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * 2.0 ** torch.randint(-20, 12, shape, generator=g).float()
    x.view(-1)[::17] = 0.0
    x.view(-1)[5::23] = -0.0
    x.view(-1)[3::29] = 2.5  # a tie at integer steps
    return x


@pytest.mark.parametrize("name,params", list(family_cases()))
def test_compiled_values_equal_eager(name, params):
    fmt = make_format(name, **params)
    if name == "binary_residual_sign":  # learned scales: runs its own module, never this path
        pytest.skip("not a plain format")
    for device in DEVICES:
        for shape in ((6, 64), (3, 5, 40), (9, 40)):  # a ragged last block (40 = 32 + 8), a third dim, more rows
            x = awkward(shape).to(device)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a fallback is reported below
                got = fast.quantize_values(fmt, x, compile=True)
            want = fmt.quantize_values(x)
            assert fast.same_bits(got, want), f"{fmt.describe()}: {int((got != want).sum())} values differ"
            assert fast.same_bits(fast.values_fn(fmt)(x.reshape(-1, x.shape[-1])).reshape(x.shape), want) \
                if fast._VALUES.get(fmt) is not None else True


def test_a_compiled_result_that_differs_falls_back_loudly(monkeypatch):
    fmt = make_format("integer", width=7, frac_width=3)  # a format no other test compiles
    monkeypatch.setattr(fast, "values_fn", lambda f: (lambda x: f.quantize_values(x) + 1))
    x = torch.randn(4, 16)
    with pytest.warns(RuntimeWarning, match=r"integer\(width=7, frac_width=3\).*differs .* runs eagerly"):
        got = fast.quantize_values(fmt, x)
    assert torch.equal(got, fmt.quantize_values(x))
    assert torch.equal(fast.quantize_values(fmt, x * 2), fmt.quantize_values(x * 2))  # eager from now on
    assert "differs" in kernel_check.FALLBACKS[fmt.describe()]


def layer(name="integer", params=None):
    params = params or {"width": 8, "frac_width": 4}
    torch.manual_seed(0)
    lin = torch.nn.Linear(40, 24)
    return QuantLinear.from_linear(lin, LinearQuantConfig.from_dict(layer_config(name, params)))


@pytest.mark.parametrize("name,params", [("integer", {"width": 8, "frac_width": 4}),
                                         ("block_fp", {"width": 4, "block_size": 16, "exponent_width": 8}),
                                         ("binary_residual_sign", {"levels": 2})])
def test_eval_output_equals_ste_path(name, params):
    q = layer(name, params).eval()
    x = awkward((7, 40), seed=1) * 2.0 ** -10
    with torch.no_grad():
        fast_out = q(x)
    ref = q(x.clone().requires_grad_())  # grad enabled: the STE path, every pass eager
    assert torch.equal(fast_out, ref.detach())


def test_weight_quantized_once_per_version():
    q = layer().eval()
    calls = []
    inner = q.q_weight.inference

    def counting(t, compile=False):
        calls.append(t.data_ptr())
        return inner(t, compile)

    q.q_weight.inference = counting
    x = torch.randn(3, 40)
    with torch.no_grad():
        first = q(x)
        assert torch.equal(q(x), first) and len(calls) == 1  # cached
        q.weight.mul_(0.5)  # an in-place update (an optimizer step) bumps the version
        second = q(x)
        assert len(calls) == 2 and not torch.equal(second, first)
        q.train()
        q(x)
        q(x)
        assert len(calls) == 4  # training mode: never cached
    q.eval()
    q(x.requires_grad_())  # gradient wanted: the STE path, not the cache
    assert len(calls) == 4


def test_cache_is_not_copied_or_saved():
    q = layer().eval()
    with torch.no_grad():
        q(torch.randn(2, 40))
    assert "_frozen_cache" in q.__dict__
    assert "_frozen_cache" not in copy.deepcopy(q).__dict__
    assert set(q.state_dict()) == {"weight", "bias"}


def test_learned_scales_are_part_of_the_cache_key():
    """Residual sign's quantizers own learnable scales: the weight is quantized once per version of the
    weight *and* of those scales (set on first use, then changed by an optimizer step or a load)."""
    fmt = make_format("binary_residual_sign", levels=2)
    q = QuantLinear(40, 24, True, LinearQuantConfig(data_in=fmt, weight=fmt)).eval()
    calls = []
    inner = q.q_weight.forward
    q.q_weight.forward = lambda t: calls.append(1) or inner(t)
    x = torch.randn(3, 40)
    with torch.no_grad():
        first = q(x)
        assert torch.equal(q(x), first) and len(calls) == 1  # scales set on first use, then cached
        q.q_weight.scales.mul_(2.0)  # as an optimizer step or a load would change them
        second = q(x)
        assert len(calls) == 2 and not torch.equal(second, first)
        want = torch.nn.functional.linear(q.q_data_in(x), fmt.apply_scales(q.weight, q.q_weight.scales), q.bias)
        assert torch.equal(second, want)


@pytest.mark.parametrize("name,params", [("block_minifloat", dict(width=8, exponent_width=3, block_size=16)),
                                         ("block_log", dict(width=8, block_size=16))])
def test_inference_bf16_rule_admits_formats_exact_above_2_to_minus_126(name, params):
    """Lab 3's block formats with 8-bit shared fields hold float32 subnormals in their value sets, so QAT keeps
    them on the fp32 path; evaluation may multiply them in bf16: every value >= 2^-126 is a bf16 value, and
    a smaller one moves by less than 2^-134 when bf16 rounds it."""
    fmt = make_format(name, **params)
    assert fmt.why_not_bf16() is not None and fmt.why_not_bf16(normal_only=True) is None
    layer = QuantLinear(64, 8, True, LinearQuantConfig(data_in=fmt, weight=fmt, bias=fmt), qat_matmul="bf16")
    assert fast.why_not(layer) is not None and fast.why_not(layer, inference=True) is None
    x = awkward((6, 64), seed=3)
    x[0] = torch.randn(64) * 2.0 ** -128  # blocks whose values reach deep into float32's subnormals
    x[0, ::2] *= 2.0 ** -12
    q = fmt.quantize_values(x)
    q16 = q.to(torch.bfloat16).float()
    big = q.abs() >= 2.0 ** -126
    assert torch.equal(q16[big], q[big])
    assert (q16 - q)[~big].abs().max() <= 2.0 ** -134
    assert (q16 != q).any()  # the case is real: some subnormal values do move


def test_eval_after_training_with_a_fused_optimizer_sees_the_new_weights():
    """AdamW(fused=True) (labkit's optimizer on CUDA) updates weights without bumping their version: the
    frozen quantized weight must still be recomputed, or a QAT evaluation would read the PTQ weights."""
    q = layer().eval()
    x = torch.randn(3, 40)
    with torch.no_grad():
        before = q(x)
    q.train()
    opt = torch.optim.AdamW(q.parameters(), lr=0.5, fused=True)
    q(x).square().sum().backward()
    version = q.weight._version
    opt.step()
    assert q.weight._version == version  # the premise: no version bump
    q.eval()
    with torch.no_grad():
        after = q(x)
        want = torch.nn.functional.linear(q.q_data_in(x), q.q_weight(q.weight), q.q_bias(q.bias))
    assert not torch.equal(after, before) and torch.equal(after, want)


def test_a_parameter_is_never_served_from_the_activation_memo(monkeypatch):
    monkeypatch.setattr(fast, "_LAST", [None])
    w = torch.nn.Parameter(torch.randn(4, 32))
    from labkit.quant import fake_quant_triton as fq
    if fq.triton is None:
        pytest.skip("triton is not installed")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    fmt = make_format("integer", width=8, frac_width=4)
    with torch.no_grad():
        fast.fake_quantize_bf16(fmt, w, compile=False)
        assert fast._LAST[0] is None
        w.data.mul_(2)  # an in-place change without a version bump, as a fused optimizer's
        assert torch.equal(fast.fake_quantize_bf16(fmt, w, compile=False).float(), fmt.quantize_values(w.detach()))
