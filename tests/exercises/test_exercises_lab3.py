"""Lab 3's exercises beyond the generic self-test: the formats' module-level hooks really carry the formats (so
``installed()`` routes the library through a student's function), and ``bit_cost`` over ``config_tensors`` is
labkit's ``average_bits`` for every format of the Lab 3 search."""
import random

import pytest
import torch

from labkit.exercises import evaluate
from labkit.exercises import lab3
from labkit.labs.lab3_precision import config_tensors
from labkit.labs.lab3_precision import FORMAT_SPACE, FP32, sample_config, selection
from labkit.quant import average_bits, make_format, quantize, study


def _spy(fn, calls):
    def wrapped(*args):
        calls.append(args[1:])
        return fn(*args)
    return wrapped


@pytest.mark.parametrize("exercise_id, reference, fmt", [
    ("lab3.minifloat_denorm", lab3.minifloat_denorm.reference, make_format("minifloat_denorm", width=6, exponent_width=3)),
    ("lab3.log", lab3.log_quantize.reference, make_format("log", width=5, exponent_bias=9)),
    ("lab3.block_fp", lab3.block_fp.reference, make_format("block_fp", width=5, block_size=4)),
])
def test_installed_routes_the_format_through_the_students_function(exercise_id, reference, fmt):
    calls = []
    result = evaluate(exercise_id, _spy(reference, calls))
    assert result.ok
    calls.clear()
    w = torch.randn(8, 10, generator=torch.Generator().manual_seed(0)) * 0.3
    want = fmt.quantize_values(w)
    assert not calls  # outside the block: labkit's own
    with result.installed():
        got = study.weight_snr({"w": w}, lambda n, t: fmt)
        assert calls, "the format did not call the module-level function"
        assert torch.equal(fmt.quantize_values(w), want)
    calls.clear()
    fmt.quantize_values(w)
    assert not calls  # restored
    assert got["snr_db"] == study.weight_snr({"w": w}, lambda n, t: fmt)["snr_db"]


def test_a_non_default_bias_keeps_labkits_formula():
    calls = []
    denorm = evaluate("lab3.minifloat_denorm", _spy(lab3.minifloat_denorm.reference, calls))
    bfp = evaluate("lab3.block_fp", _spy(lab3.block_fp.reference, calls))
    calls.clear()
    with denorm.installed(), bfp.installed():
        make_format("minifloat_denorm", width=8, exponent_width=4, exponent_bias=5).quantize_values(torch.ones(3))
        make_format("block_fp", width=8, exponent_width=4, exponent_bias=2).quantize_values(torch.ones(3))
        assert not calls
        make_format("block_fp", width=8, exponent_width=4).quantize_values(torch.ones(3))
        assert calls


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.Linear(40, 24, bias=False), torch.nn.Linear(24, 2))


def test_bit_cost_of_config_tensors_is_average_bits_for_every_search_format():
    model = _model()
    layers = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    rng = random.Random(0)
    formats = [*FORMAT_SPACE, FP32]
    for name in formats:
        for _ in range(3):  # every layer in this format, random parameters; then a random mix
            for mixed in (False, True):
                params = {}
                for layer in layers:
                    fmt = rng.choice(formats) if mixed else name
                    if len(formats) > 1:
                        params[f"{layer}:format"] = fmt
                    for k, v in (FORMAT_SPACE.get(fmt) or {}).items():
                        params[f"{layer}:{fmt}.{k}"] = rng.choice(v)
                config = sample_config(torch_fixed(params), layers, formats)
                q = quantize(model, selection(config)).model
                want = average_bits(q)["weight_bits"]
                got = lab3.bit_cost.reference(0.5, config_tensors(model, config), 0.01)
                assert got["weight_bits"] == want, (config, got, want)
                assert got["cost"] == 0.5 - 0.01 * want


def torch_fixed(params):
    import optuna

    return optuna.trial.FixedTrial(params)
