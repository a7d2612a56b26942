"""Build both editions of every lab notebook from its percent-format source in notebooks/src/*.py.

Sources are plain Python (reviewable diffs); cells start with ``# %%`` (code) or ``# %% [markdown]``
(markdown, each line prefixed ``# ``), optionally followed by ``tags=[...]`` (``parameters`` for papermill's
cell; the exercise roles of ``labkit.exercises.editions``) and, for an answer cell, ``question=<label>
points=<n>``. Writes the solution edition ``notebooks/<name>.ipynb`` and the student edition
``notebooks/student/<name>.ipynb``. ``--check`` exits 1 if a committed notebook differs from its source (the
tests use it).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from a checkout: labkit is the checkout's

from labkit.exercises import editions  # noqa: E402

SRC, OUT, STUDENT = ROOT / "notebooks" / "src", ROOT / "notebooks", ROOT / "notebooks" / "student"


def outputs(src: Path) -> dict[Path, str]:
    solution = editions.parse(src.read_text(), src.stem)
    return {OUT / f"{src.stem}.ipynb": editions.render(editions.solution(solution)),
            STUDENT / f"{src.stem}.ipynb": editions.render(editions.student(solution))}


def main(argv) -> int:
    check = "--check" in argv
    stale = []
    STUDENT.mkdir(exist_ok=True)
    for src in sorted(SRC.glob("lab*.py")):
        for target, text in outputs(src).items():
            if check:
                if not target.is_file() or target.read_text() != text:
                    stale.append(str(target.relative_to(OUT)))
            else:
                target.write_text(text)
                print(f"wrote {target.relative_to(ROOT)}")
    if stale:
        print(f"out of date (run python tools/build_notebooks.py): {stale}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
