"""How long `labkit grade` takes for a class: N students x every lab notebook, each student's notebooks the
reference solutions with small perturbations (a cell untouched, one whose function also prints, one left as the
stub, one that crashes), graded with hidden cases on this machine's cores.

    .venv/bin/python benchmarks/grading/grade_class.py [--students 30] [--jobs 2] [--out FILE]

Prints the total, the time per exercise (median and slowest) and the rate; writes them, with provenance, to
``--out`` (default benchmarks/grading/grade_class.json).
"""
from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

import nbformat

from labkit.exercises.grading import run, submissions
from labkit.results import write_json

ROOT = Path(__file__).resolve().parents[2]
PERTURBATIONS = ("untouched", "prints", "stub", "crashes")


def perturbed(cell_source: str, fn: str, stub: str, kind: str) -> str:
    if kind == "prints":  # a debug print in the student's function
        return cell_source + f"\n\n_mine = {fn}\n\ndef {fn}(*args, **kwargs):\n    print('called')\n" \
                             "    return _mine(*args, **kwargs)\n"
    if kind == "stub":
        return stub
    if kind == "crashes":
        return cell_source + f"\n\ndef {fn}(*args, **kwargs):\n    raise RuntimeError('a bug')\n"
    return cell_source


def make_class(folder: Path, students: int, seed: int) -> None:
    rng = random.Random(seed)
    released = submissions.release()
    for n in range(students):
        mine = folder / f"student{n:03d}"
        mine.mkdir(parents=True)
        for stem, rel in released.items():
            nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
            for cell in nb.cells:
                ex_id = cell.metadata.get("exercise")
                if ex_id in rel.exercises and "exercise" in cell.metadata.get("tags", []):
                    kind = rng.choices(PERTURBATIONS, weights=(6, 2, 1, 1))[0]
                    cell.source = perturbed(cell.source, rel.exercises[ex_id].function, rel.exercises[ex_id].stub,
                                            kind)
            nbformat.write(nb, mine / f"{mine.name}_{stem}.ipynb")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="which perturbations each student gets")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "grading" / "grade_class.json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="grade-class-"))
    try:
        make_class(work / "submissions", args.students, args.seed)
        start = time.perf_counter()
        grades = run.grade(work / "submissions", work / "gradebook", hidden_seed=1, jobs=args.jobs)
        total = time.perf_counter() - start
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ran = sorted(g.seconds for s in grades for g in s.exercises if g.seconds)
    exercises = sum(len(s.exercises) for s in grades)
    result = {"students": args.students, "notebooks": len(grades[0].notebooks), "exercises": exercises,
              "graded_processes": len(ran), "jobs": args.jobs, "total_seconds": round(total, 2),
              "median_seconds_per_exercise": round(ran[len(ran) // 2], 4),
              "slowest_seconds": round(ran[-1], 3), "exercises_per_second": round(exercises / total, 1)}
    print(f"{args.students} students x {result['notebooks']} notebooks ({exercises} exercises, {len(ran)} run in "
          f"a graded process) in {total:.1f} s with {args.jobs} jobs: median {result['median_seconds_per_exercise']}"
          f" s an exercise, slowest {result['slowest_seconds']} s, {result['exercises_per_second']} exercises/s")
    write_json(args.out, result)


if __name__ == "__main__":
    main()
