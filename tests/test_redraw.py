"""One tool redraws every lab's figures and re-renders every lab's answers from the committed JSON, for all eight
notebooks, without measuring."""
import json
import shutil
from pathlib import Path

import pytest

from labkit import records, redraw
from labkit.run.runner import lab_notebooks

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "figures"


def test_every_notebook_has_an_entry():
    books = {p.stem for entry in lab_notebooks().values() for p in (entry if isinstance(entry, list) else [entry])}
    assert set(records.records()) == books


@pytest.mark.parametrize("notebook", list(records.records()))
def test_committed_answers_are_the_render_of_the_committed_json(notebook):
    path, text = redraw.render_answers(notebook)
    assert path.is_file(), f"{path} is not committed"
    assert path.read_text() == text, f"{path.name} is stale: python -m labkit.redraw {notebook} --answers"


def test_redraw_all_draws_every_figure_from_its_json(tmp_path, monkeypatch):
    shutil.copytree(FIGURES, tmp_path / "figures", ignore=shutil.ignore_patterns("*.journal*", "gpu_logs", "quick",
                                                                                  "smoke"))
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path / "figures"))
    for png in (tmp_path / "figures").rglob("*.png"):
        png.unlink()
    assert redraw.main(["all"]) == 0
    for notebook, nb in records.records().items():
        for name in nb.figures:
            folder = tmp_path / "figures" / nb.lab
            assert (folder / f"{name}.png").stat().st_size > 0, (notebook, name)
            payload = json.loads((folder / f"{name}.json").read_text())
            committed = json.loads((FIGURES / nb.lab / f"{name}.json").read_text())
            assert payload["drawn"]["by"] == f"python -m labkit.redraw {notebook}"
            assert payload["numbers"] == committed["numbers"] and payload["provenance"] == committed["provenance"]
        assert (tmp_path / "figures" / nb.lab / nb.answers).is_file()


def test_a_bad_name_names_the_allowed_values():
    with pytest.raises(ValueError, match="allowed values are 'all', a lab .*lab0_graphs_lora"):
        redraw.select("lab9")


@pytest.mark.parametrize("profile", ["full", "quick"])
def test_every_committed_figure_redraws_byte_identically_from_its_json(tmp_path, monkeypatch, profile):
    """A committed figure is what its JSON draws: redrawn into a copy of figures/, every image and JSON keeps its
    bytes (a rule or a plot that changed without its figure redrawn fails here)."""
    shutil.copytree(FIGURES, tmp_path / "figures", ignore=shutil.ignore_patterns("*.journal*", "gpu_logs"))
    monkeypatch.setenv("LABKIT_FIGURES_DIR", str(tmp_path / "figures"))
    drawn = []
    for notebook, nb in records.records().items():
        if any((tmp_path / "figures" / nb.lab / (profile if profile != "full" else "") / f"{n}.json").is_file()
               for n in nb.figures):
            drawn += redraw.redraw_figures(notebook, profile)
    assert drawn, f"no committed {profile} figure"
    changed = [str(p.relative_to(tmp_path / "figures")) for p in drawn
               if p.read_bytes() != (FIGURES / p.relative_to(tmp_path / "figures")).read_bytes()]
    assert not changed, f"redraw them: python -m labkit.redraw all --figures --profile {profile}: {changed}"


@pytest.mark.parametrize("notebook", list(records.records()))
def test_the_executed_notebooks_close_with_the_current_answers(notebook):
    """An executed notebook's closing cell shows the answers its stored numbers give now (a rule or a wording that
    changed after the run is refreshed there by `labkit redraw all`), once."""
    import nbformat

    from labkit import executed

    path = executed.EXECUTED / f"{notebook}.ipynb"
    assert path.is_file(), path
    nb = nbformat.read(path, as_version=4)
    closing = [c for c in nb.cells if c.cell_type == "code" and executed.CLOSING in c.source]
    assert len(closing) == 1
    shown = [o["data"]["text/markdown"] for o in closing[0].outputs if "text/markdown" in o.get("data", {})]
    assert shown == [redraw.answers_body(notebook)], "stale: python -m labkit.redraw all --answers"
