import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from labkit import results  # noqa: E402


def test_save_figure_writes_image_and_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path))
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    settings = {"profile": "quick", "lab": "labX", "train_size": 10}
    paths = results.save_figure(fig, "labX", "curve", {"acc": [0.5, float("nan")]}, settings)
    assert paths["png"] == tmp_path / "labX" / "quick" / "curve.png" and paths["png"].stat().st_size > 0
    payload = json.loads(paths["json"].read_text())
    assert payload["numbers"] == {"acc": [0.5, None]}  # NaN stored as null: strict JSON
    assert payload["settings"]["train_size"] == 10
    prov = payload["provenance"]
    assert prov["versions"]["torch"] and prov["device"] and "created" in prov
    assert results.load_results("labX", "curve", "quick")["numbers"]["acc"][0] == 0.5
    assert results.load_results("labX", "missing", "quick") is None


def test_full_profile_writes_to_lab_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path))
    path = results.save_results("labY", "n", {"x": 1}, {"profile": "full"})
    assert path == tmp_path / "labY" / "n.json"
