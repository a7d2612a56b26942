"""benchmarks/mxint8/fused_linear.py on a CPU: the dry run, and the gemlite peer's bookkeeping with a stand-in
layer (gemlite itself imports only where torch sees a CUDA GPU; its timing runs on the GPU machine)."""
import importlib.util
import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
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
    bench._time_gemlite(row, x, w, [StandIn(w, exact), StandIn(w, exact)], bench.CpuTimer(), dry_run=True)
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
    assert bench.main(["--dry-run", "--no-gemlite", "--shapes", "96x64", "--batches", "1", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["gemlite"] == {"timed": False, "reason": "--no-gemlite"}
