import json
from pathlib import Path

import pytest

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


def test_git_commit_is_real_or_given_never_a_placeholder(monkeypatch, tmp_path):
    from labkit import results, settings

    sha = results.git_commit()
    assert sha is None or (len(sha.split("+")[0]) == 40 and sha.split("+")[1:] in ([], ["dirty"]))
    monkeypatch.setenv("LABKIT_COMMIT", "0123abc" * 5 + "01234")
    assert results.git_commit() == "0123abc" * 5 + "01234" and results.provenance()["git_commit"] == "0123abc" * 5 + "01234"
    monkeypatch.delenv("LABKIT_COMMIT")
    monkeypatch.setattr(settings, "REPO_ROOT", tmp_path)  # a copy without git: None, not "HEAD"
    assert results.git_commit() is None
    assert results.versions()["labkit"]  # the package's own version even when not installed


def test_a_commit_passed_in_must_be_a_full_sha(monkeypatch):
    from labkit.results import git_commit
    monkeypatch.setenv("LABKIT_COMMIT", "46250f0")
    with pytest.raises(ValueError, match="LABKIT_COMMIT='46250f0': give the full 40-hex commit"):
        git_commit()
    monkeypatch.setenv("LABKIT_COMMIT", "a" * 40 + "+dirty")
    assert git_commit() == "a" * 40 + "+dirty"


def _git(cwd, *args) -> str:
    import subprocess
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def test_a_copy_inside_another_repository_records_no_foreign_commit(monkeypatch, tmp_path):
    # a kit unpacked (without its .git) inside someone's project: git would answer with the project's commit
    from labkit import settings
    outer, copy = tmp_path / "project", tmp_path / "project" / "vendor" / "labkit-copy"
    (copy / "labkit").mkdir(parents=True)
    (copy / "labkit" / "settings.py").write_text("REPO_ROOT = None\n")
    (outer / "README").write_text("someone else's project\n")
    _git(outer, "init", "-q")
    _git(outer, "add", ".")
    _git(outer, "commit", "-q", "-m", "theirs")
    theirs = _git(outer, "rev-parse", "HEAD")
    monkeypatch.delenv("LABKIT_COMMIT", raising=False)
    monkeypatch.setattr(settings, "REPO_ROOT", copy)
    assert results.git_commit() is None
    assert results.provenance()["git_commit"] is None
    monkeypatch.setenv("LABKIT_COMMIT", "b" * 40)  # the copy told where it came from: that, not theirs
    assert results.git_commit() == "b" * 40
    monkeypatch.delenv("LABKIT_COMMIT")
    # the repository's own top, also reached through a symlink, is its commit (so None above is not a failure)
    monkeypatch.setattr(settings, "REPO_ROOT", outer)
    assert results.git_commit() == theirs
    (tmp_path / "link").symlink_to(outer)
    monkeypatch.setattr(settings, "REPO_ROOT", tmp_path / "link")
    assert results.git_commit() == theirs


def test_stored_results_name_no_machine_folders(monkeypatch, tmp_path):
    from labkit import settings
    from labkit.results import portable

    monkeypatch.setenv("LABKIT_CACHE_DIR", str(tmp_path / "cache"))
    root = str(settings.REPO_ROOT)
    got = portable({"storage": f"journal:{root}/figures/lab2/studies.journal",
                    "rows": [f"{tmp_path}/cache/torch_extensions/x.so", "plain", 3]})
    assert got == {"storage": "journal:figures/lab2/studies.journal",
                   "rows": ["$LABKIT_CACHE_DIR/torch_extensions/x.so", "plain", 3]}


def test_no_committed_result_names_a_machine_folder():
    import re
    root = Path(__file__).resolve().parent.parent / "figures"
    bad = [str(p) for p in root.rglob("*") if p.suffix in (".json", ".md")
           and re.search(r"(?<![\w$])/(work|tmp|root|home)/", p.read_text(errors="replace"))]
    assert not bad, bad


def test_provenance_names_the_notebooks_that_shared_the_gpu(monkeypatch):
    """regenerate --parallel sets LABKIT_GPU_SHARED per notebook: its results say who ran beside it."""
    monkeypatch.delenv(results.SHARED_GPU_ENV, raising=False)
    assert "gpu_shared_with" not in results.provenance()
    monkeypatch.setenv(results.SHARED_GPU_ENV, "lab1_quantize,lab3_formats")
    assert results.provenance()["gpu_shared_with"] == ["lab1_quantize", "lab3_formats"]
