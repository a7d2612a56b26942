"""Grade each exercise of each submission: the cases and their expected outcomes are computed here, in the staff
process, from labkit's oracle (hidden cases from the staff's seed); the student's cell runs in a graded process of
its own (``runtime.Sandbox``) that receives only the cases' inputs and returns plain values.

An exercise scores its points times the share of its public and hidden cases that pass. It scores 0 when its cell
is missing, still the release's stub, fails to define its function, or reaches labkit's own implementation. A
process that times out, crashes or prints past the limit keeps the cases it finished; the rest fail, and the
gradebook flags it.
"""
from __future__ import annotations

import itertools
import json
import pickle
import random
import signal
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from queue import Queue

import torch

from .. import catalog
from ..check import CaseResult, case_result, tie_device_cases
from ..core import Case, Exercise, hidden_cases
from ...sandbox import codec, guard
from . import submissions
from .runtime import Limits, Run, Runtime, Sandbox, SandboxDied

USES_LABKIT = "uses labkit's implementation"
FLAGS = ("timed out", "crashed", "output over the limit", "edited locked cell", USES_LABKIT, "notebook missing")


@dataclass
class Key:
    """One exercise's cases and what labkit's oracle gives for each: staff-only."""

    exercise: Exercise
    cases: list[Case]
    hidden: list[bool]
    expected: list[dict]
    payload: bytes                                  # the cases' inputs, as the graded process reads them
    _mutants: dict = field(default_factory=dict)

    @property
    def public(self) -> int:
        return self.hidden.count(False)

    def result(self, i: int, got: dict) -> CaseResult:
        return case_result(self.exercise, self.cases[i], self.expected[i], got, self.hidden[i])


def keys(hidden_seed: int) -> dict[str, Key]:
    """Every exercise's key: public cases, then the seed's hidden cases, each with the reference's outcome
    (computed single-threaded, as the graded processes run, so float sums agree bit for bit)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = {}
        for ex in catalog.registry().values():
            public, extra = ex.public(), hidden_cases(ex, hidden_seed)
            cases, hidden = public + extra, [False] * len(public) + [True] * len(extra)
            expected = [ex.outcome(ex.reference, c) for c in cases]
            bad = [c.name for c, e in zip(cases, expected) if "value" not in e]
            if bad:
                raise RuntimeError(f"{ex.id}: labkit's reference gives no value on {bad}")
            payload = pickle.dumps([(c.args, c.kwargs, c.on_meta) for c in cases], protocol=pickle.HIGHEST_PROTOCOL)
            out[ex.id] = Key(ex, cases, hidden, expected, payload)
        return out
    finally:
        torch.set_num_threads(threads)


@dataclass
class Graded:
    """One exercise of one student's notebook."""

    id: str
    notebook: str
    points: int
    score: float
    status: str                        # graded | not attempted | missing | cell error | uses labkit's implementation
    flags: list[str] = field(default_factory=list)
    detail: str = ""
    cases: list[CaseResult] = field(default_factory=list)
    output: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> tuple[int, int, int, int]:
        pub = [c for c in self.cases if not c.hidden]
        hid = [c for c in self.cases if c.hidden]
        return sum(c.ok for c in pub), len(pub), sum(c.ok for c in hid), len(hid)


def zero(key: Key, status: str, detail: str, flags: list[str] | None = None) -> Graded:
    ex = key.exercise
    return Graded(ex.id, ex.notebook, ex.points, 0.0, status, list(flags or []), detail,
                  [CaseResult(c.name, False, c.shown(), detail, hidden=h) for c, h in zip(key.cases, key.hidden)])


def spec_for(rel: submissions.ReleasedExercise, key: Key, source: str) -> dict:
    ex = key.exercise
    return {"source": source, "function": rel.function, "preamble": list(rel.preamble),
            "labkit_names": list(rel.labkit_names), "runner": ex.runner, "expect_raises": list(ex.expect_raises),
            "cases": key.payload}


def _outcome(raw) -> dict | None:
    """A case's outcome as the graded process wrote it, if it has the shape ``harness.outcome`` gives."""
    if not isinstance(raw, dict):
        return None
    if raw.get("not_attempted") is True:
        return {"not_attempted": True}
    if isinstance(raw.get("raised"), str):
        return {"raised": raw["raised"][:100], "message": str(raw.get("message", ""))[:300],
                "where": str(raw.get("where", ""))[:100]}
    if "value" in raw:
        changed = raw.get("changed")
        return {"value": raw["value"], "changed": [str(c)[:60] for c in changed] if isinstance(changed, list) else []}
    return None


def read_run(run: Run) -> dict:
    """The graded process's result lines, decoded by the codec only: whether its cell defined the function, each
    case's outcome (the first line for each case), what reached labkit, whether it finished."""
    seen = {"defined": None, "cell_error": None, "outcomes": {}, "labkit": None, "done": False}
    for line in run.records:
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(rec, dict):
            continue
        if "defined" in rec and seen["defined"] is None:
            seen["defined"] = rec["defined"] is True
            seen["cell_error"] = str(rec["cell_error"])[:500] if rec.get("cell_error") else None
        elif type(rec.get("case")) is int and "outcome" in rec and rec["case"] not in seen["outcomes"]:
            try:
                seen["outcomes"][rec["case"]] = _outcome(codec.build(rec["outcome"]))
            except (codec.Malformed, RecursionError):
                seen["outcomes"][rec["case"]] = None
        elif rec.get("flag") == USES_LABKIT:
            seen["labkit"] = str(rec.get("what", ""))[:300]
        elif rec.get("done") is True:
            seen["done"] = True
    return seen


def _ended(run: Run, done: bool, limits: Limits) -> tuple[str | None, str]:
    """(flag, what happened) for a process that did not finish normally."""
    if run.killed_at_deadline or run.signal == signal.SIGXCPU:
        return "timed out", f"timed out: still running after {limits.timeout:g} s (an endless loop, or a wait?)"
    if run.signal == signal.SIGXFSZ:
        return "output over the limit", (f"stopped: it printed more than {limits.output // 2 ** 20} MB (a print "
                                         "in a loop?)")
    if run.signal is not None:
        name = signal.Signals(run.signal).name if run.signal in signal.valid_signals() else str(run.signal)
        return "crashed", f"crashed: the process was killed by {name}"
    if run.exit not in (0, None):
        return "crashed", f"crashed: the process exited with status {run.exit} (os._exit or sys.exit?)"
    if not done:
        return "crashed", "crashed: the process ended before its last case"
    return None, ""


def grade_exercise(sandbox: Sandbox, key: Key, rel: submissions.ReleasedExercise, source: str | None,
                   note: str = "") -> Graded:
    ex = key.exercise
    if source is None:
        return zero(key, "missing", note or "its exercise cell is missing")
    if source.strip() == rel.stub.strip():
        return zero(key, "not attempted", "not attempted: the cell is still the released stub")
    start = time.perf_counter()
    run = sandbox.run(spec_for(rel, key, source))
    seen = read_run(run)
    seconds = time.perf_counter() - start
    if run.exit == guard.USES_LABKIT:
        g = zero(key, USES_LABKIT, f"uses labkit's implementation ({seen['labkit'] or 'reached labkit'}): 0 points",
                 [USES_LABKIT])
        g.output, g.seconds = run.output, seconds
        return g
    flag, what = _ended(run, seen["done"], sandbox.runtime.limits)
    if not seen["defined"]:
        detail = seen["cell_error"] or what or "the cell did not run"
        g = zero(key, "cell error", detail, [flag] if flag else [])
        g.output, g.seconds = run.output, seconds
        return g
    results = []
    for i in range(len(key.cases)):
        got = seen["outcomes"].get(i)
        if got is not None and got.get("not_attempted"):
            g = zero(key, "not attempted", "not attempted: the function still raises NotImplementedError")
            g.output, g.seconds = run.output, seconds
            return g
        if got is None:
            c = key.cases[i]
            results.append(CaseResult(c.name, False, c.shown(), f"not run: {what or 'no result came back'}",
                                      c.hint or ex.hint, key.hidden[i]))
        else:
            results.append(key.result(i, got))
    tie_device_cases(key.cases, results)
    score = round(ex.points * sum(r.ok for r in results) / len(results), 4)
    detail = "; ".join(x for x in (seen["cell_error"] and f"your cell raised after defining "
                                   f"{rel.function}: {seen['cell_error']}", what, note) if x)
    return Graded(ex.id, ex.notebook, ex.points, score, "graded", [flag] if flag else [], detail, results,
                  run.output, seconds)


@dataclass
class NotebookGrade:
    stem: str
    path: str | None
    exercises: list[Graded]
    answers: list[tuple[str, int, str]]
    locked: dict


@dataclass
class StudentGrade:
    id: str
    notebooks: dict[str, NotebookGrade]
    problems: list[str]

    @property
    def exercises(self) -> list[Graded]:
        return [g for nb in self.notebooks.values() for g in nb.exercises]

    @property
    def total(self) -> float:
        return round(sum(g.score for g in self.exercises), 4)


def grade_class(students: list[submissions.Student], released: dict[str, submissions.Released],
                keyring: dict[str, Key], runtime: Runtime, jobs: int = 2, log=print) -> list[StudentGrade]:
    """Every exercise of every student, ``jobs`` graded processes at a time."""
    pool: Queue = Queue()
    numbers = itertools.count()
    for _ in range(jobs):
        pool.put(Sandbox(runtime, number=next(numbers)))
    work = []
    grades = []
    for student in students:
        books = {}
        for stem, rel in released.items():
            sub = student.notebooks.get(stem)
            if sub is None:
                books[stem] = NotebookGrade(stem, None, [zero(keyring[i], "missing", "notebook missing",
                                                              ["notebook missing"]) for i in rel.exercises], [], {})
                continue
            locked = submissions.locked_changes(sub.nb, rel)
            exercises = []
            for ex_id, rel_ex in rel.exercises.items():
                source, note = submissions.exercise_source(sub.nb, ex_id)
                exercises.append(None)
                work.append((exercises, len(exercises) - 1, keyring[ex_id], rel_ex, source, note, locked.get(ex_id)))
            books[stem] = NotebookGrade(stem, str(sub.path.relative_to(student.folder)), exercises,
                                        submissions.written_answers(sub.nb, rel), locked)
        grades.append(StudentGrade(student.id, books, list(student.problems)))

    def one(item):
        into, at, key, rel_ex, source, note, locked = item
        sandbox = pool.get()
        try:
            for attempt in range(2):
                try:
                    g = grade_exercise(sandbox, key, rel_ex, source, note)
                    break
                except SandboxDied as err:  # a fresh interpreter grades this exercise again, once
                    sandbox.close()
                    sandbox = Sandbox(runtime, number=next(numbers))
                    g = zero(key, "cell error", f"crashed: grading it stopped its interpreter twice ({err})"[:500],
                             ["crashed"])
        finally:
            pool.put(sandbox)
        if locked:
            g.flags.append("edited locked cell")
            g.detail = "; ".join(x for x in (g.detail, ", ".join(locked)) if x)
        into[at] = g

    start = time.perf_counter()
    try:
        with ThreadPoolExecutor(jobs) as ex:
            for n, _ in enumerate(ex.map(one, work), 1):
                if n % 50 == 0 or n == len(work):
                    log(f"[labkit] graded {n} of {len(work)} exercises ({time.perf_counter() - start:.0f} s)")
    finally:
        while not pool.empty():
            pool.get().close()
    return grades


def timing(grades: list[StudentGrade]) -> dict:
    ran = [g.seconds for s in grades for g in s.exercises if g.seconds]
    return {"exercises_run": len(ran), "median_seconds": round(statistics.median(ran), 4) if ran else None,
            "max_seconds": round(max(ran), 3) if ran else None}


def fresh_seed() -> int:
    return random.SystemRandom().randrange(2 ** 31)
