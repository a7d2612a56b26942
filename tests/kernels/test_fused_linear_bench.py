"""benchmarks/mxint8/fused_linear.py on a CPU: the dry run, and the gemlite peer's bookkeeping with a stand-in
layer (gemlite itself imports only where torch sees a CUDA GPU; its timing runs on the GPU machine)."""
import importlib.util
import json
import statistics
from pathlib import Path

import pytest
import torch

from labkit.perf.timing import MedianTimer

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "mxint8" / "fused_linear.py"
spec = importlib.util.spec_from_file_location("fused_linear_bench", SCRIPT)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_channelwise_int8_is_gemlites_a16w8_quantization():
    w = torch.randn(6, 40) * torch.tensor([1e-3, 0.02, 1.0, 5.0, 0.0, 1e-9])[:, None]
    q, scales = bench.channelwise_int8(w.to(torch.bfloat16))
    assert q.dtype == torch.int8 and scales.shape == (6, 1) and scales.dtype == torch.float32
    wf = w.to(torch.bfloat16).float()
    assert torch.equal(q.abs().amax(1)[:4], torch.full((4,), 127, dtype=torch.int8))  # each row's amax -> 127
    assert torch.all((q.float() * scales - wf).abs() <= scales / 2 + 1e-12)  # round to nearest
    assert torch.equal(scales[4:], torch.full((2, 1), 1e-6)) and torch.equal(q[4:], torch.zeros_like(q[4:]))


class StandIn:
    """What the benchmark needs of a gemlite layer: called on x, it multiplies its channel-wise int8 weight
    (``exact=False``: a wrong one)."""

    def __init__(self, w, exact=True):
        q, scales = bench.channelwise_int8(w)
        self.w = q.float() * scales * (1 if exact else 1.5)

    def __call__(self, x):
        return (x.float() @ self.w.T).to(x.dtype)


@pytest.mark.parametrize("exact", [True, False])
def test_gemlite_row_checks_its_own_weight_and_reports_the_format_gap(exact):
    torch.manual_seed(0)
    w = (torch.randn(64, 96) * 0.02).to(torch.bfloat16)
    x = torch.randn(4, 96).to(torch.bfloat16)
    row = {"N": 64, "K": 96, "batch": 4, "packed_bytes": 64 * 96 + 64 * 3, "fused_ms": 2.0, "bf16_ms": 3.0}
    layers = [StandIn(w, exact), StandIn(w, exact)]
    graphed, reps = bench._time_gemlite(row, x, w, layers, MedianTimer("cpu", reps=3, warmup=1),
                                        dry_run=True)
    assert len(graphed) == len(layers) and reps == 1 and row["gemlite_ms_rounds"] == [row["gemlite_ms"]]
    assert torch.equal(graphed[1](), layers[1](x))  # the rounds time the same callables, one per weight copy
    assert row["gemlite_ok"] is exact  # a layer computing something else than its int8 weight fails the check
    assert 0 < row["gemlite_mxint8_rel_err"] < (0.05 if exact else 1)  # channel-wise int8 is not the bf16 weight
    assert row["gemlite_over_fused"] == row["gemlite_ms"] / 2.0 and row["bf16_over_gemlite"] == 3.0 / row["gemlite_ms"]


def test_dry_run_records_why_gemlite_was_not_timed(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # what the dry run sets, undone after this test
    out = tmp_path / "dry.json"
    assert bench.main(["--dry-run", "--shapes", "96x64", "--batches", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["gemlite"] == {"timed": False, "reason": "gemlite's kernels need a CUDA GPU (it asks torch for "
                                 "the device when imported); this is a CPU run"}
    assert [r["batch"] for r in result["rows"]] == [1] and "gemlite_ms" not in result["rows"][0]
    assert result["rounds"] == 1 and result["args"]["rounds"] == 3  # the dry run keeps one round, same schema
    row = result["rows"][0]
    for name in ("fused", "bf16"):
        assert len(row[f"{name}_ms_rounds"]) == result["rounds"]
        assert row[f"{name}_ms"] == statistics.median(row[f"{name}_ms_rounds"])
        assert row[f"{name}_weight_GBps"] == row["packed_bytes"] / row[f"{name}_ms"] / 1e6
    assert row["bf16_over_fused"] == row["bf16_ms"] / row["fused_ms"]
    assert "dequant_ms_rounds" not in row and row["dequant_over_fused"] == row["dequant_ms"] / row["fused_ms"]
    assert bench.main(["--dry-run", "--no-gemlite", "--shapes", "96x64", "--batches", "1", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["gemlite"] == {"timed": False, "reason": "--no-gemlite"}


def test_rounds_below_one_is_an_error_naming_the_option(capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--dry-run", "--rounds", "0"])
    assert exc.value.code == 2 and "--rounds" in capsys.readouterr().err


@pytest.mark.parametrize("rounds", [1, 2, 3, 4])
def test_paired_rounds_alternate_the_order_and_settle_on_the_median(rounds):
    """The rounds on stand-in graphed callables: each cell's paths back to back, the order reversed in every
    other round, the first pass's reps reused; then medians and the ratios paired within a round."""
    calls, ticks = [], iter(range(1, 1000))

    def time_fn(graphed, reps):  # a time that grows with every call: a GPU drifting slower over the run
        calls.append((graphed[0], reps))
        return float(next(ticks)), reps

    cells = []
    for cell in ("a", "b"):
        row = {"packed_bytes": 1000, "copy_GBps": 1.0, "fused_ms_rounds": [1.0], "gemlite_ms_rounds": [2.0],
               "bf16_ms_rounds": [3.0]}
        cells.append((row, {name: ([f"{cell}-{name}"], reps) for name, reps in
                            (("fused", 5), ("gemlite", 6), ("bf16", 7))}))
    bench.paired_rounds(cells, rounds, time_fn)
    forward = ["fused", "gemlite", "bf16"]
    expected = [(f"{cell}-{name}", {"fused": 5, "gemlite": 6, "bf16": 7}[name]) for r in range(1, rounds)
                for cell in "ab" for name in (forward if r % 2 == 0 else forward[::-1])]
    assert calls == expected
    for row, _ in cells:
        bench.settle(row)
        for name in forward:
            assert len(row[f"{name}_ms_rounds"]) == rounds
            assert row[f"{name}_ms"] == statistics.median(row[f"{name}_ms_rounds"])
            assert row[f"{name}_weight_GBps"] == 1000 / row[f"{name}_ms"] / 1e6
        ratios = [gl / f for gl, f in zip(row["gemlite_ms_rounds"], row["fused_ms_rounds"])]
        assert row["gemlite_over_fused_rounds"] == ratios
        assert (row["gemlite_over_fused_min"], row["gemlite_over_fused_max"]) == (min(ratios), max(ratios))
        assert row["gemlite_over_fused"] == row["gemlite_ms"] / row["fused_ms"]
        assert row["bf16_over_gemlite"] == row["bf16_ms"] / row["gemlite_ms"]
        assert row["bf16_over_fused"] == row["bf16_ms"] / row["fused_ms"]
        assert row["fused_fraction_of_copy"] == row["fused_weight_GBps"] / 1.0


def test_paired_rounds_skip_a_path_that_was_not_timed():
    row = {"packed_bytes": 10, "copy_GBps": 1.0, "fused_ms_rounds": [1.0], "bf16_ms_rounds": [2.0]}
    seen = []

    def time_fn(graphed, reps):
        seen.append(graphed[0])
        return 4.0, reps

    bench.paired_rounds([(row, {"fused": (["f"], 1), "bf16": (["b"], 1)})], 3, time_fn)
    assert seen == ["b", "f", "f", "b"] and row["fused_ms_rounds"] == [1.0, 4.0, 4.0]
    bench.settle(row)
    assert row["fused_ms"] == 4.0 and "gemlite_over_fused" not in row and "gemlite_over_fused_rounds" not in row
