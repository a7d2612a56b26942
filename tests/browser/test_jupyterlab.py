"""Every lab notebook, opened in JupyterLab (started by ``labkit lab``, as ``make lab`` does) in headless
Chromium, set to the smoke profile by editing its parameters cell, run from the Run menu and saved: no
error, no unexplained stderr, figures drawn; and a broken notebook fails these same checks."""
import time

import nbformat
import pytest

import jupyterlab_ui as ui
from _executions import EXECUTED, Execution, read_inputs
from conftest import NOTEBOOKS

pytestmark = pytest.mark.browser  # in conftest's "notebooks" process group (make test)


def _run(page, lab, name, screenshots, old='PROFILE = "auto"', new='PROFILE = "smoke"'):
    panel = ui.open_notebook(page, lab, name)
    assert ui.kernel_name(panel) == ui.KERNEL_DISPLAY_NAME
    ui.set_parameters(page, panel, old, new)
    state = ui.run_all_and_wait(page, panel)
    nb = ui.save(page, panel, lab.notebooks / name)
    images = ui.rendered_images(panel)
    ui.screenshot(page, panel, screenshots / f"{name.removesuffix('.ipynb')}.png")
    lab.shutdown_kernels()
    return nb, state, images


@pytest.mark.parametrize("name", [p.name for p in NOTEBOOKS], ids=lambda n: n.removesuffix(".ipynb"))
def test_notebook_runs_clean_in_jupyterlab(page, lab, name, screenshots):
    start, logged = time.time(), lab.checks.stat().st_size if lab.checks.exists() else 0
    nb, state, images = _run(page, lab, name, screenshots)
    assert not ui.problems(nb), "\n".join(ui.problems(nb))
    assert images["count"] >= 1 and not images["broken"], images
    saved = ui.results_json(lab.figures, start)
    assert saved and all(r["settings"]["profile"] == "smoke" for r in saved), \
        "the edited parameters cell did not select the smoke profile"
    # the notebook's smoke test (tests/run) checks this run rather than running the notebook again
    stem = name.removesuffix(".ipynb")
    EXECUTED[stem] = Execution(nb, lab.checks_since(logged), saved, lab.runs,
                               read_inputs(lab.work / "inputs.jsonl", stem))


BROKEN = {
    "raises": ("raise ValueError('a deliberately broken cell')", "ValueError: a deliberately broken cell"),
    "stderr": ("import sys\nprint('something the student should read', file=sys.stderr)", "wrote to stderr"),
}


@pytest.mark.parametrize("kind", BROKEN)
def test_a_broken_notebook_fails_the_checks(page, lab, kind, screenshots):
    """The checks above are not vacuous: a notebook with a broken cell (or stray stderr) fails them."""
    source, expected = BROKEN[kind]
    cells = [nbformat.v4.new_markdown_cell("# A lab with a broken cell"),
             nbformat.v4.new_code_cell('PROFILE = "auto"\nOVERRIDES = {}', metadata={"tags": ["parameters"]}),
             nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\nplt.show()"),
             nbformat.v4.new_code_cell(source),
             nbformat.v4.new_code_cell("print(PROFILE)")]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    name = f"lab9_broken_{kind}.ipynb"
    nbformat.write(nb, lab.notebooks / name)
    saved, _, images = _run(page, lab, name, screenshots)
    found = ui.problems(saved)
    assert any(expected in p for p in found), found
    assert images["count"] == 1  # the cells before the broken one ran and drew their figure
    if kind == "raises":  # Run All stops at the error: the cell after it never runs, and that is reported
        assert any("did not run" in p for p in found), found
    else:
        assert saved.cells[-1].outputs[0]["text"] == "smoke\n"
