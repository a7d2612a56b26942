"""tools/land_gpu_call.py: a call's results land in the checkout; only the files the call wrote (a warm GPU
machine's tree copy puts the checkout's older files beside them), and never an older call over a newer one."""
import calendar
import importlib.util
import io
import json
import tarfile
import time
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "land_gpu_call.py"
STARTED = "2026-11-26T13:09:00Z"


def _tool():
    spec = importlib.util.spec_from_file_location("land_gpu_call", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tar(path: Path, files: dict[str, tuple[bytes, float]]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, (data, mtime) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), mtime
            tar.addfile(info, io.BytesIO(data))


def _call(tmp_path: Path, calls: int, fresh: str = "F") -> Path:
    t0 = calendar.timegm(time.strptime(STARTED, "%Y-%m-%dT%H:%M:%SZ"))
    state = {"calls": [{"call": f"call{i + 1}", "started": STARTED} for i in range(calls)], "sft": {},
             "fresh": {"started": fresh, "supersedes": None, "superseded_calls": 0, "superseded_done": []},
             "steps": {"lab1_prune": {"status": "done", "runs": [{"call": f"call{calls}", "status": "done",
                                                                   "seconds": 1.0}]}}}
    folder = tmp_path / f"call{calls}"
    folder.mkdir()
    _tar(folder / "state.tgz", {"runs/regen/state.json": (json.dumps(state).encode(), t0)})
    _tar(folder / "results.tgz", {"figures/lab1/pruning.json": (b"new pruning", t0 + 60),
                                  # the checkout's copy of another step's file, as the call's machine had it
                                  "figures/lab1/quantization.json": (b"stale quantization", t0 - 3600)})
    return folder


def test_a_call_lands_only_the_files_it_wrote(tmp_path):
    root = tmp_path / "repo"
    (root / "figures" / "lab1").mkdir(parents=True)
    (root / "figures" / "lab1" / "quantization.json").write_bytes(b"landed from an earlier call")
    notes = _tool().land(_call(tmp_path, 2), root=root)
    assert (root / "figures" / "lab1" / "pruning.json").read_bytes() == b"new pruning"
    assert (root / "figures" / "lab1" / "quantization.json").read_bytes() == b"landed from an earlier call"
    assert any("pruning.json" in n and "quantization" not in n for n in notes)
    landed = json.loads((root / "notebooks" / "executed" / "full" / "regen_state.json").read_text())
    assert len(landed["calls"]) == 2 and (root / ".carry" / "runs" / "regen" / "state.json").is_file()


def test_a_call_whose_state_tgz_did_not_come_back_lands_from_its_state_json(tmp_path):
    root, folder = tmp_path / "repo", _call(tmp_path, 2)
    with tarfile.open(folder / "state.tgz") as tar:
        (folder / "state.json").write_bytes(tar.extractfile("runs/regen/state.json").read())
    (folder / "state.tgz").unlink()
    notes = _tool().land(folder, root=root)
    assert (root / "figures" / "lab1" / "pruning.json").read_bytes() == b"new pruning"
    assert len(json.loads((root / "notebooks" / "executed" / "full" / "regen_state.json").read_text())["calls"]) == 2
    assert any("no state.tgz" in n for n in notes)
    (folder / "state.json").unlink()
    with pytest.raises(SystemExit):
        _tool().main([str(folder)])


def test_an_older_call_of_the_same_regeneration_is_refused(tmp_path):
    root = tmp_path / "repo"
    tool = _tool()
    tool.land(_call(tmp_path, 3), root=root)
    with pytest.raises(SystemExit, match="call2.*already holds call3.*land calls in order"):
        tool.land(_call(tmp_path, 2), root=root)
    # a new regeneration's first call lands over the last one's record
    (tmp_path / "new").mkdir()
    tool.land(_call(tmp_path / "new", 1, fresh="G"), root=root)
    assert json.loads((root / "notebooks" / "executed" / "full" / "regen_state.json").read_text())["fresh"][
        "started"] == "G"


def test_a_step_that_lists_its_files_lands_beside_an_unfinished_step_of_its_folder(tmp_path):
    """lab1_quantize finished (alone: its run lists what it wrote; side by side: its record names its files);
    lab1_prune timed out in the same call: quantize's files land, prune's partial file does not. A step with
    neither (a benchmark's) is skipped with a warning."""
    t0 = calendar.timegm(time.strptime(STARTED, "%Y-%m-%dT%H:%M:%SZ"))
    for listed in (True, False):
        quantize = {"call": "call1", "status": "done", "seconds": 1.0,
                    **({"files": ["lab1/ptq.json"]} if listed else {})}
        state = {"calls": [{"call": "call1", "started": STARTED}], "sft": {},
                 "steps": {"lab1_quantize": {"status": "done", "runs": [quantize]},
                           "lab1_prune": {"status": "timeout",
                                          "runs": [{"call": "call1", "status": "timeout", "seconds": 9.0}]}}}
        folder, root = tmp_path / f"call-{listed}", tmp_path / f"repo-{listed}"
        folder.mkdir()
        _tar(folder / "state.tgz", {"runs/regen/state.json": (json.dumps(state).encode(), t0)})
        _tar(folder / "results.tgz", {"figures/lab1/ptq.json": (b"new ptq", t0 + 60),
                                      "figures/lab1/quantization.json": (b"new quantization", t0 + 60),
                                      "figures/lab1/quantize_answers.md": (b"new answers", t0 + 60),
                                      "figures/lab1/pruning.json": (b"half a pruning run", t0 + 90)})
        notes = _tool().land(folder, root=root)
        assert (root / "figures" / "lab1" / "ptq.json").is_file() is listed  # listed, or named by no record
        assert (root / "figures" / "lab1" / "quantization.json").is_file() is not listed
        assert (root / "figures" / "lab1" / "quantize_answers.md").is_file() is not listed
        assert not (root / "figures" / "lab1" / "pruning.json").exists()
        assert not any("copy its files by hand" in n for n in notes)
    tool = _tool()
    assert tool.record_files("mxint8_bandwidth", "lab4") is None
    assert tool.record_files("lab1_prune", "lab1") == {"lab1/pruning.json", "lab1/pruning.png", "lab1/pruning.svg",
                                                       "lab1/prune_answers.md"}
