"""What a student does in JupyterLab, in Playwright steps: open a notebook, edit its parameters cell, Run >
Run All Cells, wait for the kernel to go idle, File > Save; and the checks a run must pass."""
from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat

KERNEL_DISPLAY_NAME = "Python 3 (labkit)"
# stderr a notebook may write in JupyterLab, each with the reason it is harmless. Anything else fails.
ALLOWED_STDERR: list[tuple[str, str]] = []

_STATE_JS = """panel => {
  const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent.trim());
  const ind = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  return {status: ind ? ind.getAttribute('data-status') : null,
          running: prompts.filter(t => t.includes('[*]')).length,
          executed: prompts.filter(t => /\\[\\d+\\]/.test(t)).length, cells: prompts.length};
}"""


def open_notebook(page, lab, name: str):
    """Open ``name`` in a fresh workspace and wait for its kernel; returns the notebook panel."""
    page.goto(lab.url(f"/lab/workspaces/{Path(name).stem}/tree/{name}"))
    panel = page.locator(".jp-NotebookPanel:visible")
    panel.wait_for()
    # the kernel starts by itself: the notebook's kernelspec names the project's kernel, no dialog asks
    deadline = time.time() + 120
    while time.time() < deadline:
        dialog = page.locator(".jp-Dialog")
        if dialog.count():
            page.screenshot(path=str(lab.work / f"{Path(name).stem}-dialog.png"))
            raise AssertionError(f"JupyterLab asked: {dialog.first.inner_text()[:300]}")
        status = panel.locator(".jp-Notebook-ExecutionIndicator").get_attribute("data-status")
        if status == "idle" and kernel_name(panel) != "No Kernel":
            return panel
        time.sleep(0.5)
    raise TimeoutError(f"{name}: the kernel did not start within 120 s (shows {kernel_name(panel)!r}, {status})")


def kernel_name(panel) -> str:
    return panel.locator(".jp-Toolbar-kernelName").inner_text().strip()


def set_parameters(page, panel, old: str, new: str) -> None:
    """Edit the parameters cell as a person would: click into it, select all, type the new text."""
    cells = panel.locator(".jp-CodeCell")
    index = next(i for i in range(cells.count()) if old in cells.nth(i).locator(".cm-content").inner_text())
    editor = cells.nth(index).locator(".cm-content")  # by position: the text that found it is about to change
    editor.click()
    text = editor.inner_text()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(text.replace(old, new))
    page.keyboard.press("Escape")  # leave edit mode, as after typing
    assert new in editor.inner_text(), editor.inner_text()


def menu(page, top: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=top).first.click()
    page.locator(f'.lm-Menu-itemLabel:text-is("{item}")').click()


def run_all_and_wait(page, panel, timeout: float = 900) -> dict:
    """Run > Run All Cells; returns once the kernel is idle with no cell queued (2 polls in a row)."""
    menu(page, "Run", "Run All Cells")
    return wait_idle(panel, timeout)


def set_cell_text(page, cell, text: str) -> None:
    """Replace a code cell's text as a person would: click into it, select all, type."""
    editor = cell.locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(text)
    page.keyboard.press("Escape")


def wait_idle(panel, timeout: float = 900) -> dict:
    """Once a run started: returns when the kernel is idle with no cell queued (2 polls in a row)."""
    deadline, settled, state = time.time() + timeout, 0, {}
    while time.time() < deadline:
        state = panel.evaluate(_STATE_JS)
        started = state["running"] or state["executed"]
        settled = settled + 1 if started and not state["running"] and state["status"] == "idle" else 0
        if settled >= 2:
            return state
        time.sleep(1)
    raise TimeoutError(f"the notebook was still running after {timeout:.0f} s: {state}")


def save(page, panel, path: Path) -> nbformat.NotebookNode:
    """File > Save Notebook, then the notebook as saved on disk."""
    before = path.stat().st_mtime_ns
    menu(page, "File", "Save Notebook")
    deadline = time.time() + 60
    while time.time() < deadline:
        dirty = page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty").count()
        if not dirty and path.stat().st_mtime_ns != before:
            return nbformat.read(path, as_version=4)
        time.sleep(0.5)
    raise TimeoutError(f"{path.name} was not saved within 60 s")


def rendered_images(panel) -> dict:
    """Images in the notebook's outputs as the browser drew them."""
    return panel.evaluate("""panel => {
      const imgs = [...panel.querySelectorAll('.jp-OutputArea-output img')];
      return {count: imgs.length, broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length};
    }""")


def problems(nb: nbformat.NotebookNode, min_figures: int = 1) -> list[str]:
    """What a student would see go wrong in a saved notebook: errors, stderr nobody explained, cells that
    never ran, no figure."""
    found = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append(f"cell {i}: {out['ename']}: {out['evalue']}")
            elif out.get("output_type") == "stream" and "%|" in out["text"]:
                found.append(f"cell {i}: a text progress bar where JupyterLab shows a widget: {out['text'][:200]}")
            elif out.get("output_type") == "stream" and out.get("name") == "stderr":
                text = out["text"]
                if not all(any(pattern in line for pattern, _ in ALLOWED_STDERR)
                           for line in text.splitlines() if line.strip()):
                    found.append(f"cell {i} wrote to stderr: {text.strip()[:500]}")
    not_run = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()
               and c.get("execution_count") is None]
    if not_run:
        found.append(f"cells {not_run} did not run")
    figures = sum("image/png" in out.get("data", {}) for c in code for out in c.get("outputs", []))
    if figures < min_figures:
        found.append(f"{figures} figure(s) rendered, expected at least {min_figures}")
    return found


def screenshot(page, panel, path: Path) -> None:
    """The notebook with its first figure in view (or its top), for a person to look at."""
    img = panel.locator(".jp-OutputArea-output img").first
    if img.count():
        img.scroll_into_view_if_needed()
    page.screenshot(path=str(path))


def results_json(figures: Path, since: float) -> list[dict]:
    return [json.loads(p.read_text()) for p in figures.rglob("*.json") if p.stat().st_mtime >= since]
