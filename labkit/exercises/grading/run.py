"""``labkit grade``: a class graded into a gradebook, every path checked before anything runs."""
from __future__ import annotations

import time
from pathlib import Path

from . import gradebook, grader, submissions
from .runtime import Limits, Runtime


def check_paths(folder: Path, out: Path) -> None:
    folder, out = Path(folder).resolve(), Path(out).resolve()
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder of submissions (one sub-folder per student)")
    if out == folder or folder in out.parents:
        raise ValueError(f"--out {out} is inside the submissions {folder}: the gradebook would be graded next time")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder")


def grade(folder: Path, out: Path, hidden_seed: int | None = None, jobs: int = 2, limits: Limits | None = None,
          release: Path | None = None, log=print) -> list[grader.StudentGrade]:
    """Grade every student of ``folder`` into ``out``; returns the grades."""
    check_paths(folder, out)
    if jobs < 1:
        raise ValueError(f"--jobs {jobs}: at least 1 graded process at a time")
    limits = limits or Limits()
    if limits.timeout <= 0 or limits.memory <= 0:
        raise ValueError("--timeout and --memory must be > 0")
    released = submissions.release(release or submissions.STUDENT_EDITION)
    students = submissions.collect(folder, released)
    seed = grader.fresh_seed() if hidden_seed is None else hidden_seed
    start = time.perf_counter()
    keyring = grader.keys(seed)
    log(f"[labkit] grading {len(students)} students x {len(released)} notebooks "
        f"({sum(len(r.exercises) for r in released.values())} exercises each), {jobs} at a time")
    runtime = Runtime(limits)
    try:
        grades = grader.grade_class(students, released, keyring, runtime, jobs, log)
        isolation = runtime.isolation
    finally:
        runtime.close()
    seconds = time.perf_counter() - start
    from ...results import provenance

    meta = {"hidden_seed": seed, "seed_given": hidden_seed is not None, "students": len(students),
            "notebooks": sorted(released), "limits": vars(limits), "jobs": jobs, "isolation": isolation,
            "seconds": round(seconds, 2), **grader.timing(grades), "provenance": provenance()}
    gradebook.write(grades, Path(out), meta)
    log(f"[labkit] graded {len(students)} students in {seconds:.1f} s -> {out}/grades.csv")
    return grades
