"""``labkit student init DIR``: a student's working copy of the student edition, ready to open and check.

The edition comes from the checkout (``notebooks/student/``) or, in an installed student release, from the
package (``labkit/edition/``). ``DIR`` gets the notebooks, ``AGENTS.md`` (what coding assistants may do there),
a README and the mark that makes it the student's folder: an installed labkit writes its cache, runs and
figures there (``labkit.settings.output_root``). No file already there is overwritten without ``force``.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

from .. import settings

PACKAGED = Path(__file__).resolve().parents[1] / "edition"
README = """# Your labkit labs

Each notebook is one lab. Write each function where it says `# YOUR CODE HERE` and run the check cell under
it: it prints one line per public case (ok / FAIL, with a hint) and "N of M public cases pass". Until your
function passes, the notebook uses labkit's own, so every later cell still runs. Answer the questions where
it says YOUR ANSWER HERE, from the numbers your run printed.

    labkit lab --dir {dir} --profile quick   # open JupyterLab on these notebooks
    labkit check {dir}                      # run every notebook headlessly and report every exercise

The teaching staff grade each exercise cell on its own, with further cases than the public ones. labkit's
cache, runs and figures for these notebooks are written in this folder. AGENTS.md says what a coding
assistant may do here.
"""


def edition_dir() -> Path:
    """The student edition: the checkout's ``notebooks/student``, else the release's packaged copy."""
    if settings.in_checkout():
        return settings.REPO_ROOT / "notebooks" / "student"
    return PACKAGED


def init(target: Path, force: bool = False, log=print) -> list[Path]:
    """Copy the student edition into ``target``; check the Jupyter kernel and the dataset. Returns the copies."""
    edition = edition_dir()
    books = sorted(edition.glob("lab*_*.ipynb"))
    if not books:
        raise FileNotFoundError(f"no student edition at {edition}: in the labkit checkout run `make notebooks`; "
                                "an installed labkit needs the course's student release (`labkit release student`)")
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise FileExistsError(f"{target} is a file, not a folder")
    writes = {target / b.name: b for b in books}
    agents = edition / "AGENTS.md"
    if agents.is_file():
        writes[target / "AGENTS.md"] = agents
    writes[target / "README.md"] = None
    writes[target / settings.WORKSPACE_MARK] = None
    clash = [p.name for p in writes if p.exists()]
    if clash and not force:
        raise FileExistsError(f"{target} already holds {', '.join(clash)}; your work there is kept: choose "
                              "another folder, or pass --force to overwrite them")
    target.mkdir(parents=True, exist_ok=True)
    for dest, src in writes.items():
        if src is not None:
            shutil.copyfile(src, dest)
    (target / "README.md").write_text(README.format(dir=target))
    (target / settings.WORKSPACE_MARK).write_text("labkit student folder: cache, runs and figures go here\n")
    copies = [target / b.name for b in books]
    log(f"labkit student init: {len(copies)} notebooks in {target}")
    log(f"  kernel: {kernel_line()}")
    log(f"  data: {data_line(target)}")
    return copies


def kernel_line() -> str:
    """The notebooks' kernel (``python3``) must run this Python, where labkit is installed."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec("python3")
    except NoSuchKernel:
        spec = None
    if spec is None or Path(spec.argv[0]).resolve() != Path(sys.executable).resolve():
        from ipykernel.kernelspec import install

        install(prefix=sys.prefix, kernel_name="python3", display_name="Python 3 (labkit)")
        spec = KernelSpecManager().get_kernel_spec("python3")
        return f"installed 'python3' ({spec.display_name}) running {sys.executable}"
    return f"'python3' ({spec.display_name}) runs {spec.argv[0]}"


def data_line(folder: Path | None = None) -> str:
    """Where the labs will find IMDb, as from the student's folder (``folder``), its checksums verified."""
    import os

    from .. import data

    here = os.getcwd()
    try:
        if folder is not None:
            os.chdir(folder)  # an installed labkit looks in the student's folder
        found = data.find_imdb_dir()
    finally:
        os.chdir(here)
    folder = found
    data.verify_imdb_dir(folder)
    return f"IMDb at {folder}, sha256 verified"
