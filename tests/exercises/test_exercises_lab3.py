"""Lab 3's exercises beyond the generic self-test: the formats' module-level hooks really carry the formats (so
``installed()`` routes the library through a student's function), and ``bit_cost`` over ``config_tensors`` is
labkit's ``average_bits`` for every format of the Lab 3 search."""
import random

import pytest
import torch

from labkit.exercises import evaluate, get
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


def _notebook_cell(stem: str, marker: str) -> str:
    """The code of the one cell of ``notebooks/src/<stem>.py`` that holds ``marker`` (as both editions run it)."""
    from pathlib import Path

    from labkit.exercises import editions

    src = Path(__file__).resolve().parents[2] / "notebooks" / "src" / f"{stem}.py"
    cells = [c.source for c in editions.parse(src.read_text(), stem).cells if c.cell_type == "code" and marker in c.source]
    assert len(cells) == 1, (stem, marker, len(cells))
    return cells[0]


def test_the_ptq_qat_cell_runs_the_installed_functions_from_a_cold_and_a_warm_cache(monkeypatch, tmp_path):
    """The notebook's PTQ/QAT cell itself, on a CPU, on a tiny model: ``lab3_formats.run`` (per-seed cache,
    ``formats_seed``, ``ptq_qat``) with the three checks' results as the notebook holds them. Every installed function
    computes its format in the PTQ evaluation (every Linear's input, weight and bias) and in every QAT step (the
    same, through the straight-through estimator), from a cold cache; numbers labkit's functions measured first for
    the same seed are not reused for them; a warm cache of the student's own numbers is."""
    from types import SimpleNamespace

    from labkit import models
    from labkit.labs import lab3_formats, per_seed
    from labkit.training import train

    monkeypatch.setenv("LABKIT_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(per_seed, "_clean_commit", lambda: "c0ffee")  # a clean commit keeps each seed's numbers
    torch.manual_seed(0)
    base = models.from_config(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                              vocab_size=40, max_position_embeddings=16)
    monkeypatch.setattr(lab3_formats, "finetuned_model", lambda s, dl, seed: (base, {"accuracy": 0.5}))
    gen = torch.Generator().manual_seed(0)
    batches = [{"input_ids": torch.randint(8, 40, (16, 12), generator=gen),
                "attention_mask": torch.ones(16, 12, dtype=torch.long),
                "labels": torch.randint(0, 2, (16,), generator=gen)}]
    dl = SimpleNamespace(train=batches, test=batches, sizes={"train": 16, "test": 16})
    s = {"qat_epochs": 1.0, "qat_lr": 1e-3, "device": "cpu", "seed": 0, "format_width": 8}
    configs, plan = lab3_formats.study_plan(base, s["format_width"])
    hooked = {"lab3.minifloat_denorm": "minifloat_denorm", "lab3.log": "log", "lab3.block_fp": "block_fp"}
    configs = {name: configs[name] for name in hooked.values()}
    linears = [n for n, m in base.named_modules() if isinstance(m, torch.nn.Linear)]

    phase, steps = ["build"], []  # what ptq_qat is doing: evaluating (PTQ and after QAT) or training (QAT)

    def during(name, fn):
        def wrapped(*args, **kwargs):
            phase.append(name)
            try:
                out = fn(*args, **kwargs)
            finally:
                phase.pop()
            if name == "qat":
                steps.append(out["steps"])
            return out
        return wrapped

    monkeypatch.setattr(train, "train", during("qat", train.train))
    monkeypatch.setattr(train, "evaluate", during("eval", train.evaluate))
    calls = {i: [] for i in hooked}
    results = {}
    for exercise_id in hooked:
        def student(*args, _id=exercise_id, _ref=get(exercise_id).reference, **kwargs):
            calls[_id].append(phase[-1])
            return _ref(*args, **kwargs)

        results[exercise_id] = evaluate(exercise_id, student)
        assert results[exercise_id].ok
    for c in calls.values():
        c.clear()

    cell = _notebook_cell("lab3_formats", "lab3_formats.run(")

    def run_cell():
        ns = {"lab3_formats": lab3_formats, "S": s, "dl": dl, "SEEDS": [0], "configs": configs, "plan": plan,
              "linears": linears, "denorm": results["lab3.minifloat_denorm"], "logq": results["lab3.log"],
              "bfp": results["lab3.block_fp"], "say": lambda text: None,
              "words": SimpleNamespace(qat_text=lambda *a: "")}
        exec(compile(cell, "lab3_formats PTQ/QAT cell", "exec"), ns)
        return ns["numbers"]

    labkit_numbers = lab3_formats.run(s, dl, [0], configs, plan, linears)  # labkit's functions; cached for seed 0
    assert not any(calls.values())
    steps.clear()
    numbers = run_cell()  # cold for the student's functions
    assert len(steps) == len(hooked) and all(n >= 1 for n in steps)
    tensors = 3 * len(linears)  # every Linear's input, weight and bias
    for (exercise_id, c), n in zip(calls.items(), steps):
        # two evaluations (PTQ, then after QAT) of one batch each: every tensor once per evaluation at least
        assert c.count("eval") >= 2 * tensors, (exercise_id, c.count("eval"))
        # each QAT step quantizes every tensor again (no cached weight, no compiled or replayed step)
        assert c.count("qat") >= n * tensors, (exercise_id, c.count("qat"), n)
    # the same values as labkit's (the references pass bit for bit), computed by the student's functions
    for name in configs:
        assert numbers["formats"][name]["ptq"]["accuracy"] == labkit_numbers["formats"][name]["ptq"]["accuracy"]
    n = {i: len(c) for i, c in calls.items()}
    run_cell()  # warm: the student's own numbers, read back
    assert {i: len(c) for i, c in calls.items()} == n


def test_the_grid_rows_are_numbers_and_narrate_draws_them_with_their_own_digits():
    from labkit.exercises import lab3 as ex
    from labkit.labs import lab3_formats
    from labkit.narrate import lab3_formats as words

    rows = lab3_formats.grid_rows(ex.minifloat_denorm.reference, ex.log_quantize.reference, ex.block_fp.reference)
    assert [r["x"] for r in rows] == pytest.approx(lab3_formats.GRID) and all(
        isinstance(v, float) for r in rows for v in r.values())
    assert words.grid_table(rows).splitlines()[2].startswith("| -300 ")
