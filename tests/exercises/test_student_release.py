"""The student release, as a student gets it: built by `labkit release student`, installed into a fresh virtual
environment with no checkout on its path, then `student init`, `check` on an untouched notebook (exit 1, "not
attempted") and on a solved one (exit 0). The release holds none of the key, ships AGENTS.md, and nothing is
written under site-packages or into the checkout's committed folders."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest

from labkit.exercises import release

ROOT = Path(__file__).resolve().parents[2]
CHEAPEST = "lab4_mxint8"


def _files(folder: Path) -> set[str]:
    """Every file under ``folder`` but Python's bytecode caches."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
            and p.suffix != ".pyc"}


def _committed_state() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--", "figures", "notebooks", "labkit", "docs"],
                          cwd=ROOT, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The release built and installed into a fresh venv whose other packages are this environment's (a .pth
    line: their .pth files, the checkout's editable install among them, are not read)."""
    base = tmp_path_factory.mktemp("release")
    build = subprocess.run([sys.executable, "-m", "labkit", "release", "student", str(base / "release")],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    wheel = next((base / "release").glob("labkit-*.whl"))
    python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    subprocess.run([python, "-m", "venv", str(base / "venv")], check=True, timeout=300)
    site = next((base / "venv" / "lib").glob("python3*/site-packages"))
    (site / "_labkit_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = subprocess.run([str(base / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                          "--no-index", "--disable-pip-version-check", str(wheel)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    return base, wheel, site


def _labkit(base: Path, *args, cwd: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABKIT_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(LABKIT_DATA_DIR=os.environ.get("LABKIT_DATA_DIR", str(ROOT.parent / "shared" / "data")),
               HF_HUB_OFFLINE="1", HOME=str(base / "home"))
    return subprocess.run([str(base / "venv" / "bin" / "labkit"), *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=900, env=env)


def test_the_release_holds_no_key_and_ships_agents_md(installed):
    base, wheel, _ = installed
    assert release.key_lines(wheel) == []
    assert (base / "release" / "AGENTS.md").is_file() and "may not" in (base / "release" / "AGENTS.md").read_text()
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "labkit/edition/AGENTS.md" in names and f"labkit/edition/{CHEAPEST}.ipynb" in names
    assert "labkit/csrc/mxint8_dequant.cuh" in names
    assert not any(n.startswith("labkit/answers/") for n in names)


def test_the_key_check_finds_the_key(tmp_path):
    """``key_lines`` is not vacuous: a wheel holding a solution, an answers sentence or an executed notebook
    is caught."""
    import zipfile

    answers = next(ROOT.glob("figures/*/*answers.md")).read_text()
    sentence = next(iter(release._sentences(answers)))
    solution = next(ROOT.glob("notebooks/lab1_quantize.ipynb")).read_text()
    bad = tmp_path / "bad.whl"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("labkit/x.md", sentence)
        z.writestr("labkit/edition/lab1_quantize.ipynb", solution)
    found = release.key_lines(bad)
    assert any("a sentence of" in f for f in found) and any("a solution of lab1_quantize" in f for f in found)


@pytest.mark.notebook
def test_init_and_check_from_the_release_alone(installed, tmp_path):
    base, _, site = installed
    before_site, before_tree = _files(site), _committed_state()
    init = _labkit(base, "student", "init", "my-labs", cwd=tmp_path)
    assert init.returncode == 0, init.stdout + init.stderr
    work = tmp_path / "my-labs"
    assert {"AGENTS.md", "README.md", f"{CHEAPEST}.ipynb"} <= {p.name for p in work.iterdir()}
    again = _labkit(base, "student", "init", "my-labs", cwd=tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "README.md").write_text("mine")
    clash = _labkit(base, "student", "init", "other", cwd=tmp_path)
    assert clash.returncode == 2 and (tmp_path / "other" / "README.md").read_text() == "mine"

    untouched = _labkit(base, "check", work / f"{CHEAPEST}.ipynb", "--json", tmp_path / "untouched.json",
                        cwd=tmp_path)
    assert untouched.returncode == 1 and "not attempted" in untouched.stdout, untouched.stdout + untouched.stderr

    solution = nbformat.read(ROOT / "notebooks" / f"{CHEAPEST}.ipynb", as_version=4)
    answers = {c.metadata["exercise"]: c.source for c in solution.cells
               if "exercise" in c.metadata.get("tags", [])}
    mine = nbformat.read(work / f"{CHEAPEST}.ipynb", as_version=4)
    for cell in mine.cells:
        if "exercise" in cell.metadata.get("tags", []):
            cell.source = answers[cell.metadata["exercise"]]
    nbformat.write(mine, work / f"{CHEAPEST}.ipynb")
    solved = _labkit(base, "check", work / f"{CHEAPEST}.ipynb", "--json", tmp_path / "solved.json", cwd=tmp_path)
    assert solved.returncode == 0, solved.stdout + solved.stderr

    assert _files(site) == before_site, "the student's work wrote under site-packages"
    assert _committed_state() == before_tree, "the student's work wrote into the checkout"
    assert not list(tmp_path.glob("labkit-check-*"))


def test_staff_commands_say_what_they_need(installed, tmp_path):
    base, _, _ = installed
    for args in (("claims",), ("redraw", "all"), ("regenerate", "--status"), ("run", "--all"),
                 ("release", "student", tmp_path / "r")):
        out = _labkit(base, *args, cwd=tmp_path)
        assert out.returncode == 2 and "checkout" in out.stderr, (args, out.stdout, out.stderr)
