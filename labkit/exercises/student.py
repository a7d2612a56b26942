"""``labkit student init DIR``: a student's working copy of the student edition, ready to open and check."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

from ..settings import REPO_ROOT

EDITION = REPO_ROOT / "notebooks" / "student"
README = """# Your labkit labs

Each notebook is one lab. Write each function where it says `# YOUR CODE HERE` and run the check cell under
it: it prints one line per public case (ok / FAIL, with a hint) and "N of M public cases pass". Until your
function passes, the notebook uses labkit's own, so every later cell still runs. Answer the questions where
it says YOUR ANSWER HERE, from the numbers your run printed.

    labkit lab --dir {dir} --profile quick   # open JupyterLab on these notebooks
    labkit check {dir}                      # run every notebook headlessly and report every exercise

The teaching staff may check further cases than the public ones.
"""


def init(target: Path, force: bool = False, log=print) -> list[Path]:
    """Copy the student edition into ``target``; check the Jupyter kernel and the dataset. Returns the copies."""
    books = sorted(EDITION.glob("lab*_*.ipynb"))
    if not books:
        raise FileNotFoundError(f"no student edition at {EDITION}: run `make notebooks` in the labkit checkout")
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    clash = [b.name for b in books if (target / b.name).exists()]
    if clash and not force:
        raise FileExistsError(f"{target} already holds {', '.join(clash)}; your work there is kept: choose "
                              "another folder, or pass --force to overwrite them")
    copies = []
    for b in books:
        shutil.copyfile(b, target / b.name)
        copies.append(target / b.name)
    (target / "README.md").write_text(README.format(dir=target))
    log(f"labkit student init: {len(copies)} notebooks in {target}")
    log(f"  kernel: {kernel_line()}")
    log(f"  data: {data_line()}")
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


def data_line() -> str:
    from .. import data

    folder = data.find_imdb_dir()
    data.verify_imdb_dir(folder)
    return f"IMDb at {folder}, sha256 verified"
