import copy

import pytest
import torch

from _llm_tiny import tiny_llama
from labkit.llm import group_quant as G
from labkit.quant import make_format


def ref_symmetric(w, bits, g, scale_dtype=torch.float16):
    """Per-group symmetric RTN written out (AWQ's pseudo-quantizer, zero_point=False), with the scale stored in
    ``scale_dtype``; an all-zero group stays zero."""
    out, n = w.shape
    x = w.reshape(out, n // g, g)
    qmax = 2 ** (bits - 1) - 1
    s = (x.abs().amax(dim=-1, keepdim=True) / qmax).to(scale_dtype).float()
    s_div = torch.where(s == 0, torch.ones_like(s), s)
    q = torch.clamp(torch.round(x / s_div), -qmax - 1, qmax)
    return (q * s).reshape(out, n)


def ref_asymmetric(w, bits, g, scale_dtype=torch.float16):
    """Per-group asymmetric RTN written out (AWQ's, zero_point=True) over the group's range widened to hold 0."""
    out, n = w.shape
    x = w.reshape(out, n // g, g)
    qmax = 2 ** bits - 1
    mx = x.amax(dim=-1, keepdim=True).clamp(min=0)
    mn = x.amin(dim=-1, keepdim=True).clamp(max=0)
    s = ((mx - mn) / qmax).to(scale_dtype).float()
    s_div = torch.where(s == 0, torch.ones_like(s), s)
    z = torch.clamp(torch.round(-mn / s_div), 0, qmax)
    q = torch.clamp(torch.round(x / s_div) + z, 0, qmax)
    return ((q - z) * s).reshape(out, n)


CASES = [(bits, g, shape, seed) for seed, (bits, g, shape) in enumerate(
    [(4, 32, (48, 128)), (3, 128, (16, 256)), (2, 16, (8, 64)), (8, 64, (32, 192)), (4, 192, (6, 576)), (5, 8, (3, 40))])]


@pytest.mark.parametrize("bits, g, shape, seed", CASES)
def test_integer_rtn_equals_a_hand_written_reference(bits, g, shape, seed):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(shape, generator=gen) * torch.rand(shape[0], 1, generator=gen)  # rows of different ranges
    w[0, :g] = 0  # an all-zero group
    sym = G.group_spec("integer", bits, g).quantize(w)
    assert torch.equal(sym, ref_symmetric(w, bits, g))
    assert torch.equal(G.group_spec("integer", bits, g, symmetric=False).quantize(w), ref_asymmetric(w, bits, g))
    assert torch.equal(G.group_spec("integer", bits, g, scale_dtype=torch.float32).quantize(w),
                       ref_symmetric(w, bits, g, torch.float32))
    levels = [torch.unique(row).numel() for row in sym.reshape(-1, g)]
    assert max(levels) <= 2 ** bits and not sym[0, :g].any()


def test_rtn_keeps_the_dtype_and_is_idempotent_with_fp32_scales():
    w = torch.randn(16, 64, generator=torch.Generator().manual_seed(3))
    spec = G.group_spec("integer", 4, 32, scale_dtype=torch.float32)
    once = spec.quantize(w)
    assert torch.allclose(spec.quantize(once), once, rtol=0, atol=1e-6)
    assert G.group_spec("integer", 4, 32).quantize(w.bfloat16()).dtype == torch.bfloat16


@pytest.mark.parametrize("name, width, g, kwargs, bits", [
    ("integer", 4, 32, {}, 4 + 16 / 32),
    ("integer", 4, 32, {"symmetric": False}, 4 + (16 + 4) / 32),  # scale and a 4-bit zero point per group
    ("integer", 3, 64, {"scale_dtype": torch.float32}, 3 + 32 / 64),
    ("minifloat_ieee", 4, 32, {}, 4.5),
    ("log", 4, 16, {"scale_dtype": torch.bfloat16}, 4 + 16 / 16),
    ("block_fp", 4, 32, {}, 4 + 8 / 32),  # the format's own 8-bit shared exponent
    ("block_minifloat", 6, 16, {}, 6 + 8 / 16),
    ("mxint8", 8, 32, {}, 8.25),
    ("binary_scaling", 1, 64, {}, 1 + 32 / 64),  # an fp32 mean-|w| scale per group
])
def test_stored_bits_per_weight_count_each_groups_shared_fields(name, width, g, kwargs, bits):
    assert G.group_spec(name, width, g, **kwargs).bits_per_weight((96, 192)) == pytest.approx(bits)


def test_block_formats_take_the_group_as_their_block():
    w = torch.randn(8, 96, generator=torch.Generator().manual_seed(4))
    assert torch.equal(G.group_spec("block_fp", 4, 32).quantize(w),
                       make_format("block_fp", width=4, exponent_width=8, block_size=32).quantize_values(w))
    assert torch.equal(G.group_spec("mxint8", 8, 16).quantize(w), make_format("mxint8", group_size=16).quantize_values(w))
    assert torch.equal(G.group_spec("block_log", 5, 32).quantize(w),
                       make_format("block_log", width=5, block_size=32).quantize_values(w))


@pytest.mark.parametrize("name, width", [("minifloat_ieee", 4), ("minifloat_denorm", 5), ("log", 4), ("integer", 3)])
def test_scaled_formats_put_each_group_on_the_formats_grid(name, width):
    """Each group / its scale is a value of the format (quantizing it again changes nothing), and the group's
    largest magnitude sits at (about) the format's largest value."""
    w = torch.randn(12, 64, generator=torch.Generator().manual_seed(5))
    spec = G.group_spec(name, width, 16, scale_dtype=torch.float32)
    q = spec.quantize(w).reshape(12, 4, 16)
    s = (w.reshape(12, 4, 16).abs().amax(-1, keepdim=True) / spec.max_value)
    grid = q / s
    assert torch.allclose(spec.fmt.quantize_values(grid), grid, rtol=1e-6, atol=1e-6)
    assert torch.allclose(grid.abs().amax(-1), torch.full((12, 4), spec.max_value), rtol=1e-6)


def test_binary_scaling_gives_each_group_its_mean_magnitude():
    w = torch.randn(4, 32, generator=torch.Generator().manual_seed(6))
    q = G.group_spec("binary_scaling", 1, 8).quantize(w).reshape(4, 4, 8)
    groups = w.reshape(4, 4, 8)
    assert torch.allclose(q.abs(), groups.abs().mean(-1, keepdim=True).expand_as(q))
    assert torch.equal(torch.sign(q), torch.where(groups >= 0, 1.0, -1.0))


def test_quantize_llm_weights_changes_every_linear_but_the_head():
    model = tiny_llama()
    before = copy.deepcopy(model)
    report = G.quantize_llm_weights(model, "integer", 4, 32)
    spec = G.group_spec("integer", 4, 32)
    linears = [n for n, m in before.named_modules() if isinstance(m, torch.nn.Linear)]
    assert sorted(report.layers) == sorted(n for n in linears if n != "lm_head") and report.skipped == ["lm_head"]
    for name in report.layers:
        assert torch.equal(model.get_submodule(name).weight, spec.quantize(before.get_submodule(name).weight))
        assert 0 < report.layers[name].weight_rel_error < 0.2
    assert torch.equal(model.model.embed_tokens.weight, before.model.embed_tokens.weight)  # and the tied head
    assert report.weight_bits == 4.5
    n_q = sum(before.get_submodule(n).weight.numel() for n in report.layers)
    n_head = before.lm_head.weight.numel()
    assert report.linear_bits == pytest.approx((4.5 * n_q + 32 * n_head) / (n_q + n_head))
    with pytest.raises(ValueError, match="already quantized"):
        G.quantize_llm_weights(model, "integer", 8, 32)


def test_filter_fn_picks_layers_and_a_tied_head_gets_its_own_copy():
    model = tiny_llama()
    embed = model.model.embed_tokens.weight.detach().clone()
    report = G.quantize_llm_weights(model, "integer", 4, 16, filter_fn=lambda name, m: name.endswith(("down_proj",
                                                                                                      "lm_head")))
    assert sorted(report.layers) == ["lm_head", "model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj"]
    assert report.untied_output and model.lm_head.weight is not model.model.embed_tokens.weight
    assert torch.equal(model.model.embed_tokens.weight, embed)
    assert torch.equal(model.lm_head.weight, G.group_spec("integer", 4, 16).quantize(embed))


@pytest.mark.parametrize("args, kwargs, exc, match", [
    (("int4", 4, 32), {}, KeyError, "allowed: integer, minifloat_ieee, minifloat_denorm, log, block_fp"),
    (("binary", 1, 32), {}, KeyError, r"without a group-wise weight mapping\); allowed: integer"),
    (("integer", 0, 32), {}, ValueError, r"width=0: must be an int >= 1"),
    (("integer", -3, 32), {}, ValueError, r"width=-3: must be an int >= 1"),
    (("integer", 1, 32), {}, ValueError, "allowed: width >= 2, or symmetric=False"),
    (("log", 12, 32), {}, ValueError, r"log: width=12 is out of range; allowed: \[2, 11\]"),
    (("mxint8", 4, 32), {}, ValueError, "its width is fixed: allowed 8"),
    (("integer", 4, 0), {}, ValueError, "group_size=0: must be an int >= 1"),
    (("integer", 4, 32), {"scale_dtype": torch.int8}, ValueError, "allowed torch.float16"),
    (("block_fp", 4, 32), {"symmetric": False}, ValueError, "integer format only"),
    (("integer", 4, 32), {"exponent_width": 2}, KeyError, "has no parameter"),
    (("block_fp", 4, 32), {"block_size": 16}, KeyError, "set by width and group_size"),
])
def test_bad_specs_say_what_is_allowed(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        G.group_spec(*args, **kwargs)


def test_a_group_size_that_does_not_divide_lists_the_allowed_ones_and_changes_nothing():
    model = tiny_llama()  # input dimensions 64 (hidden) and 128 (intermediate)
    before = copy.deepcopy(model)
    with pytest.raises(ValueError, match=r"group_size=48 does not divide the input dimension of 14 selected layer\(s\) "
                                         r"\(in_features 64, 128; .*allowed here: 1, 2, 4, 8, 16, 32, 64 \(the divisors of 64"):
        G.quantize_llm_weights(model, "integer", 4, 48)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), before.parameters()))
    with pytest.raises(ValueError, match="filter_fn accepted none"):
        G.quantize_llm_weights(model, "integer", 4, 32, filter_fn=lambda name, m: False)
    with pytest.raises(ValueError, match=r"allowed: divisors of 40: 1, 2, 4, 5, 8, 10, 20, 40"):
        G.group_spec("integer", 4, 16).quantize(torch.zeros(3, 40))


WIDTHS = {"integer": 4, "minifloat_ieee": 4, "minifloat_denorm": 4, "log": 4, "block_fp": 4, "block_minifloat": 4,
          "block_log": 4, "mxint8": 8, "binary_scaling": 1}


@pytest.mark.parametrize("name", list(G.GROUP_FORMATS))
def test_every_group_format_quantizes_a_weight(name):
    """Each supported format at a small width: finite values in the weight's shape and dtype, at most 2^width + 1
    distinct magnitudes per group, an error well below the weight itself, and the model-level report's bits."""
    assert set(WIDTHS) == set(G.GROUP_FORMATS)
    w = torch.randn(16, 64, generator=torch.Generator().manual_seed(7)) * 0.05
    spec = G.group_spec(name, WIDTHS[name], 32)
    q = spec.quantize(w)
    assert q.shape == w.shape and q.dtype == w.dtype and torch.isfinite(q).all()
    assert max(torch.unique(g.abs()).numel() for g in q.reshape(-1, 32)) <= 2 ** WIDTHS[name] + 1
    assert 0 < G.rel_error(w, q) < (0.9 if name == "binary_scaling" else 0.5)
    model = tiny_llama()
    assert G.quantize_llm_weights(model, name, WIDTHS[name], 32).weight_bits == spec.bits_per_weight((64, 64))
