"""A student in JupyterLab: the student edition of Lab 1a opened, set to the smoke profile, the cells above the
first exercise run; a correct quantizer typed into the exercise cell passes its check cell, a plausible wrong
one (round half up) shows FAIL with the hint and the fallback note."""
import re

import pytest

import jupyterlab_ui as ui

pytestmark = pytest.mark.browser

NAME = "lab1_quantize.ipynb"
RIGHT = '''def quantize_fixed(x, width, frac_width):
    scale = 2.0 ** frac_width
    k = torch.round(x * scale).clamp(-(2 ** (width - 1)), 2 ** (width - 1) - 1)
    return (k / scale).to(x.dtype)
'''
WRONG = RIGHT.replace("torch.round(x * scale)", "torch.floor(x * scale + 0.5)")


def _check_output(page, panel, cells, index, body, screenshots, shot):
    ui.set_cell_text(page, cells.nth(index), body)
    cells.nth(index).locator(".jp-InputPrompt").click()  # select the exercise cell (command mode)
    page.keyboard.press("Shift+Enter")  # run it; the check cell below is selected
    page.keyboard.press("Shift+Enter")  # run the check
    ui.wait_idle(panel, timeout=300)
    out = cells.nth(index + 1).locator(".jp-OutputArea").inner_text()
    cells.nth(index + 1).scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / shot))
    return out


def test_a_student_fills_an_exercise_and_sees_its_check(page, student_lab, screenshots):
    panel = ui.open_notebook(page, student_lab, NAME)
    ui.set_parameters(page, panel, 'PROFILE = "auto"', 'PROFILE = "smoke"')
    cells = panel.locator(".jp-CodeCell")
    index = next(i for i in range(cells.count())
                 if "def quantize_fixed" in cells.nth(i).locator(".cm-content").inner_text())
    assert "raise NotImplementedError" in cells.nth(index).locator(".cm-content").inner_text()
    cells.nth(index).locator(".jp-InputPrompt").click()
    ui.menu(page, "Run", "Run All Above Selected Cell")
    ui.wait_idle(panel, timeout=600)

    out = _check_output(page, panel, cells, index, RIGHT, screenshots, "student-check-pass.png")
    m = re.search(r"(\d+) of (\d+) public cases pass", out)
    assert m and m.group(1) == m.group(2), out
    assert "FAIL" not in out and "uses your function" in out and "all tests passed" not in out.lower()

    out = _check_output(page, panel, cells, index, WRONG, screenshots, "student-check-fail.png")
    assert "FAIL  ties round half to even" in out and "hint: torch.round rounds half to even" in out, out
    m = re.search(r"(\d+) of (\d+) public cases pass", out)
    assert m and int(m.group(1)) < int(m.group(2)), out
    assert "falls back to labkit's" in out
    student_lab.shutdown_kernels()
