"""Which committed results a regeneration made: listed by a done run, or written within one of its calls at its
commit; CPU results named as such."""
import json

from labkit.maintain import regen_results

CALL = {"call": "call1", "commit": "a" * 40, "started": "2026-12-02T14:07:10Z", "seconds": 400.0}


def _result(figures, rel, device, commit, created):
    path = figures / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"numbers": {}, "provenance": {"device": device, "git_commit": commit,
                                                             "created": created}}))


def test_results_are_the_regenerations_by_file_or_by_call_and_cpu_runs_are_named(tmp_path):
    state = {"calls": [CALL], "steps": {"lab1_prune": {"runs": [
        {"call": "call1", "status": "done", "files": ["lab1/pruning.json"]}]}}}
    _result(tmp_path, "lab0/accuracy.json", "NVIDIA H200", "a" * 40, "2026-12-02T14:10:05+00:00")  # in the call
    _result(tmp_path, "lab1/pruning.json", "NVIDIA H200", "b" * 40, "2026-11-28T02:00:00+00:00")  # listed
    _result(tmp_path, "lab1/quantization.json", "NVIDIA H100 80GB HBM3", "a" * 40,
            "2026-12-02T15:10:00+00:00")  # the call's commit, but written an hour after the call
    _result(tmp_path, "lab4/compile_cpu.json", "cpu (x86_64, 2 threads)", "c" * 40, "2026-11-26T08:49:45+00:00")
    c = regen_results.classify(state, tmp_path)
    assert c["made"] == ["lab0/accuracy.json", "lab1/pruning.json"]
    assert c["not_made"] == ["lab1/quantization.json"] and c["cpu"] == ["lab4/compile_cpu.json"]
    assert "lab2/samplers.json" in c["missing"] and c["unreadable"] == []
    (tmp_path / "lab2").mkdir()
    (tmp_path / "lab2" / "samplers.json").write_text("")
    assert regen_results.classify(state, tmp_path)["unreadable"] == ["lab2/samplers.json"]
    line = regen_results.summary(state, tmp_path)
    assert "2 of 3 GPU results; not (yet): lab1/quantization.json" in line and "named as such: lab4/compile_cpu" in line
    state["steps"]["lab1_prune"]["runs"][0]["status"] = "failed"  # a failed run's files are not its results
    assert "lab1/pruning.json" in regen_results.classify(state, tmp_path)["not_made"]
