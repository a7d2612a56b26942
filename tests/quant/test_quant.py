"""Integer fixed point vs an independent numpy formula; STE; config parsing; QuantLinear; bit counting."""
import copy

import numpy as np
import pytest
import torch

from labkit import quant
from labkit.quant.compress import compress
from labkit.quant import fixed_point
from labkit.quant import IntegerFormat, LinearQuantConfig, QuantLinear


def ref_integer(x: np.ndarray, width: int, frac: int) -> np.ndarray:
    """k / 2^f with k = round-half-even(x * 2^f) clipped to the two's-complement range, in float64."""
    scaled = x.astype(np.float64) * 2.0 ** frac
    k = np.rint(scaled)  # IEEE round-half-to-even
    k = np.clip(k, -(2 ** (width - 1)), 2 ** (width - 1) - 1)
    return k / 2.0 ** frac


@pytest.mark.parametrize("width,frac", [(4, 2), (8, 4), (8, 0), (6, 7), (16, 8), (12, -2)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_integer_matches_reference_on_random_tensors(width, frac, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 33, generator=gen) * 2.0 ** (width - 1 - frac) * 1.5  # in range and saturating
    got = IntegerFormat(width, frac).quantize_values(x)
    np.testing.assert_array_equal(got.numpy(), ref_integer(x.numpy(), width, frac).astype(np.float32))


def test_integer_ties_round_to_even_and_saturate():
    fmt = IntegerFormat(4, 1)  # grid 0.5, range [-4, 3.5]
    x = torch.tensor([0.25, 0.75, 1.25, -0.25, -0.75, 3.75, 100.0, -4.25, -100.0, 3.5, -4.0])
    expect = [0.0, 1.0, 1.0, -0.0, -1.0, 3.5, 3.5, -4.0, -4.0, 3.5, -4.0]
    assert fmt.quantize_values(x).tolist() == expect


def test_negative_zero_and_tiny_values():
    fmt = IntegerFormat(8, 4)
    x = torch.tensor([-0.0, 0.0, -1e-30, 1e-30, -0.03125, 0.03125])  # +-2^-5: ties to 0
    q = fmt.quantize_values(x)
    assert (q == 0).all()
    assert not torch.isnan(q).any()


def test_wide_integer_is_exact_beyond_float32_mantissa():
    fmt = IntegerFormat(32, 16)
    x = torch.tensor([12345.678901, -0.5 / 2 ** 16, 3 * 0.5 / 2 ** 16], dtype=torch.float32)
    np.testing.assert_array_equal(fmt.quantize_values(x).numpy(),
                                  ref_integer(x.numpy(), 32, 16).astype(np.float32))


def test_clipped_straight_through_gradient():
    fmt = IntegerFormat(4, 1)  # range [-4, 3.5]
    x = torch.tensor([-5.0, -4.0, -1.3, 0.2, 3.5, 3.6, 9.0], requires_grad=True)
    fmt.fake_quantize(x).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("bad,match", [
    ({"name": "integer", "weight_width": 0, "weight_frac_width": 0}, r"width=0 is out of range; allowed: \[1, 64\]"),
    ({"name": "integer", "weight_width": -3}, r"width=-3 is out of range"),
    ({"name": "intgr", "weight_width": 8}, "unknown number format 'intgr'; allowed: .*integer"),
    ({"name": "integer", "weight_widht": 8}, r"no parameter\(s\) \['widht'\]; allowed"),
    ({"name": "integer", "wieght_width": 8}, "does not start with one of"),
    ({"name": "integer", "weight_width": 8.5}, "must be an int"),
    ({"weight_width": 8}, "no 'name'"),
])
def test_bad_configs_are_clear_errors(bad, match):
    with pytest.raises((KeyError, ValueError, TypeError), match=match):
        LinearQuantConfig.from_dict(bad)


def test_quantize_does_not_mutate_config_and_copies_weights(tiny_bert):
    cfg = {"by": "type", "default": {"config": {"name": None}}, "linear": {"config": fixed_point(8)}}
    frozen = copy.deepcopy(cfg)
    res = quant.quantize(tiny_bert, cfg)
    assert cfg == frozen
    linears = [n for n, m in tiny_bert.named_modules() if isinstance(m, torch.nn.Linear)]
    assert sorted(res.changed) == sorted(linears)
    q = res.model.get_submodule(linears[0])
    assert isinstance(q, QuantLinear) and isinstance(q, torch.nn.Linear)
    orig = tiny_bert.get_submodule(linears[0])
    assert torch.equal(q.weight, orig.weight) and q.weight.data_ptr() != orig.weight.data_ptr()
    assert not any(isinstance(m, QuantLinear) for m in tiny_bert.modules())  # original untouched


def test_quantlinear_forward_equals_manual_fake_quant():
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 8)
    cfg = LinearQuantConfig(data_in=IntegerFormat(8, 3), weight=IntegerFormat(6, 5), bias=IntegerFormat(8, 4))
    q = QuantLinear.from_linear(lin, cfg)
    x = torch.randn(4, 16) * 3
    ref = torch.from_numpy(ref_integer(x.numpy(), 8, 3)).float() @ torch.from_numpy(
        ref_integer(lin.weight.detach().numpy(), 6, 5)).float().T + torch.from_numpy(
        ref_integer(lin.bias.detach().numpy(), 8, 4)).float()
    torch.testing.assert_close(q(x), ref, rtol=1e-6, atol=1e-6)


def test_selection_by_name_and_regex(tiny_bert):
    by_name = quant.quantize(tiny_bert, {"by": "name", "classifier": fixed_point(8)})
    assert list(by_name.changed) == ["classifier"]
    by_regex = quant.quantize(tiny_bert, {"by": "regex", r".*attention\.self\.(query|key)": fixed_point(4)})
    assert len(by_regex.changed) == 4
    with pytest.raises(KeyError, match="not found"):
        quant.quantize(tiny_bert, {"by": "name", "clasifier": fixed_point(8)})
    with pytest.raises(ValueError, match="'by'"):
        quant.quantize(tiny_bert, {"by": "shape", "linear": fixed_point(8)})
    with pytest.raises(KeyError, match="allowed"):
        quant.quantize(tiny_bert, {"by": "type", "lstm": fixed_point(8)})


def test_filter_fn_and_typed_config(tiny_bert):
    cfg = LinearQuantConfig(weight=IntegerFormat(8, 6))
    res = quant.quantize(tiny_bert, cfg, filter_fn=lambda name, m: name != "classifier")
    assert "classifier" not in res.changed and len(res.changed) == 13


def test_average_bits_counts_stored_bits(tiny_bert):
    res = quant.quantize(tiny_bert, fixed_point(8))
    bits = quant.average_bits(res.model)
    assert bits["weight_bits"] == 8.0 and bits["data_in_bits"] == 8.0  # not 8 + 4
    half = quant.quantize(tiny_bert, {"by": "regex", r".*intermediate\.dense": fixed_point(4)})
    b = quant.average_bits(half.model)
    lin = [m for m in tiny_bert.modules() if isinstance(m, torch.nn.Linear)]
    n_int = sum(m.weight.numel() + m.bias.numel() for n, m in tiny_bert.named_modules()
                if isinstance(m, torch.nn.Linear) and n.endswith("intermediate.dense"))
    n_all = sum(m.weight.numel() + m.bias.numel() for m in lin)
    assert b["weight_bits"] == pytest.approx((4 * n_int + 32 * (n_all - n_int)) / n_all)


def test_qat_trains_saves_and_loads(tiny_bert, tmp_path):
    model = compress(tiny_bert, quant=fixed_point(8)).model.train()
    x = {"input_ids": torch.randint(1000, 30000, (8, 12)), "labels": torch.randint(0, 2, (8,))}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(15):
        loss = model(**x).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    path = tmp_path / "q.pt"
    torch.save(model.state_dict(), path)
    fresh = compress(tiny_bert, quant=fixed_point(8)).model
    fresh.load_state_dict(torch.load(path, weights_only=True))
    model.eval(); fresh.eval()
    torch.testing.assert_close(fresh(**x).logits, model(**x).logits)


def test_quantlinear_ignores_autocast_so_wide_formats_stay_exact():
    torch.manual_seed(0)
    lin = torch.nn.Linear(32, 4)
    q = QuantLinear.from_linear(lin, LinearQuantConfig(weight=IntegerFormat(16, 12), data_in=IntegerFormat(16, 12)))
    x = torch.randn(3, 32)
    exact = q(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under = q(x)
    assert under.dtype == torch.float32
    torch.testing.assert_close(under, exact, rtol=0, atol=0)
