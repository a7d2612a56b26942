"""The graded side's own code: it imports no labkit (a graded process has none), its codec carries plain values
exactly and builds nothing else from what a student's process wrote, and its harness reports what a function
did to its inputs and where its tensors ended up."""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
import torch

from labkit.sandbox import codec, guard, harness

SANDBOX = Path(__file__).resolve().parents[2] / "labkit" / "sandbox"
ALLOWED = set(sys.stdlib_module_names) | {"torch", "optuna", "numpy"}


@pytest.mark.parametrize("path", sorted(SANDBOX.glob("*.py")), ids=lambda p: p.name)
def test_the_graded_side_imports_no_labkit(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # a sibling of the package: copied with it
                assert node.level == 1 and (node.module is None or (SANDBOX / f"{node.module}.py").is_file())
                continue
            names = [node.module]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            pytest.fail(f"{path.name}: __import__ with a name the test cannot read")
        else:
            continue
        for name in names:
            assert name.split(".")[0] in ALLOWED, f"{path.name} imports {name}"


def test_plain_values_cross_exactly():
    values = [None, True, 3, -2 ** 70, 0.1, float("inf"), float("nan"), "é", [1, [2.5, "x"]], (1, (2,)),
              {"a": 1, 2: "b", (3, 4): [None]},
              torch.tensor([0.1, -0.0, float("nan")]), torch.zeros(0, 3, dtype=torch.int8),
              torch.tensor([1.5, -2.0], dtype=torch.bfloat16), torch.arange(6).reshape(2, 3).t(),
              torch.tensor([True, False]), torch.tensor(7, dtype=torch.uint8)]
    for v in values:
        back = codec.roundtrip(v)
        if isinstance(v, torch.Tensor):
            assert type(back) is torch.Tensor and back.dtype == v.dtype and back.shape == v.shape
            assert torch.equal(back.view(torch.uint8) if v.dtype == torch.bool else back, v.contiguous()) or \
                torch.equal(torch.isnan(back.float()), torch.isnan(v.float()))
        elif isinstance(v, float) and v != v:
            assert back != back
        else:
            assert back == v and type(back) is type(v)


def test_objects_of_the_student_arrive_as_opaque_descriptions():
    class Same:
        def __eq__(self, other):
            return True

    class Liar(torch.Tensor):
        def __eq__(self, other):
            return True

    class Fl(float):
        def __eq__(self, other):
            return True

    back = codec.roundtrip([Same(), torch.Tensor._make_subclass(Liar, torch.ones(2)), Fl(0.25)])
    assert isinstance(back[0], codec.Opaque) and back[0] != 0 and back[0] != "x" and "Same" in repr(back[0])
    assert type(back[1]) is torch.Tensor and torch.equal(back[1], torch.ones(2))
    assert type(back[2]) is float and back[2] == 0.25


@pytest.mark.parametrize("raw", [
    b"not json", json.dumps({"x": 1}).encode(), json.dumps({"$": "tensor", "dtype": "float32", "shape": [2],
                                                          "data": "AAAA"}).encode(),
    json.dumps({"$": "tensor", "dtype": "object", "shape": [1], "data": ""}).encode(),
    json.dumps({"$": "tensor", "dtype": "float32", "shape": [2 ** 30], "data": ""}).encode(),
    json.dumps({"$": "dict", "items": [[[1], 2]]}).encode(), json.dumps({"$": "pickle", "v": "..."}).encode(),
    b"[" * 100000 + b"]" * 100000,
])
def test_malformed_data_is_refused(raw):
    with pytest.raises(codec.Malformed):
        codec.decode(raw)


def test_a_size_limit_holds():
    with pytest.raises(codec.Malformed, match="limit"):
        codec.decode(codec.encode(torch.zeros(1000)), limit=100)


def test_the_harness_reports_inputs_changed_in_place_and_exceptions():
    x = torch.tensor([1.0, 2.0])
    out = harness.outcome("call", lambda t: t.add_(1), (x,), {})
    assert out["changed"] == ["argument 1"]
    out = harness.outcome("call", lambda layers: layers.append({}), ([{"a": 1}],), {})
    assert out["changed"] == ["argument 1"]
    out = harness.outcome("call", lambda: int("x"), (), {}, expect_raises=("ValueError",))
    assert out["value"] == "raises ValueError"
    out = harness.outcome("call", lambda: sys.exit(2), (), {})
    assert out["raised"] == "SystemExit"
    assert harness.outcome("call", lambda: (_ for _ in ()).throw(NotImplementedError), (), {}) == {"not_attempted": True}


def test_the_device_case_sees_where_tensors_end_up():
    def keeps(x):
        return torch.zeros_like(x) + 1

    def cpu_mask(x):
        return torch.ones(x.shape, dtype=torch.bool)

    def reads_values(x):
        return x * 2 if float(x.max()) > 0 else x

    x = torch.randn(4)
    assert harness.outcome("call", keeps, (x,), {}, on_meta=True)["value"] == \
        {"device": "meta", "shape": [4], "dtype": "torch.float32"}
    assert harness.outcome("call", cpu_mask, (x,), {}, on_meta=True)["value"]["device"] == "cpu"
    assert harness.outcome("call", reads_values, (x,), {}, on_meta=True)["value"] == harness.DATA_DEPENDENT


def test_a_tripwire_answers_nothing():
    fired = []
    wire = guard.Tripwire("quant", fired.append)
    isinstance(wire, dict), repr(wire), callable(wire)
    assert not fired
    for touch in (lambda: wire.fixed_point, lambda: wire.__dict__, lambda: wire.__spec__, lambda: wire(1),
                  lambda: setattr(wire, "x", 1)):
        touch()
    assert fired == ["quant.fixed_point", "quant.__dict__", "quant.__spec__", "quant(...)", "quant.x = ..."]
