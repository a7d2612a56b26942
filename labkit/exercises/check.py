"""Check a student's function against labkit's oracle, on the spot.

``check(id, fn)`` prints one line per public case (ok / FAIL, the input, and on a failure what was expected,
what came back and a hint) and a summary "N of M public cases pass"; it never says "all tests passed": the
staff grade with further cases (``labkit grade``, in processes of their own). It returns a ``CheckResult``
whose ``fn`` is what the rest of the notebook uses: the student's function once every case passes, labkit's
otherwise (a one-line note says which). A failed case whose result equals a registered mutant's says which
mistake that is.

Under ``labkit check`` each result is also appended to the JSON-lines file ``$LABKIT_CHECK_LOG``: formative
feedback, which grading never reads.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .. import records
from ..labs import per_seed
from . import inputs
from .catalog import get, registry
from .core import Case, Exercise, hidden_cases

LOG_ENV = "LABKIT_CHECK_LOG"
CASE_SECONDS_ENV = "LABKIT_CHECK_CASE_SECONDS"
CASE_SECONDS = 10.0


class CaseTimeout(BaseException):
    """A student's function ran past the check's limit for one case (an endless loop?). A ``BaseException``, so an
    ``except Exception`` in the student's loop does not swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise ``CaseTimeout`` in the block after ``seconds`` (and every half second after, should the student's
    code catch it), where a timer signal can reach this thread; elsewhere, no limit."""
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise CaseTimeout(f"ran past {seconds:g} s on this case and was stopped (an endless loop?)")

    before = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def case_seconds() -> float:
    text = os.environ.get(CASE_SECONDS_ENV)
    try:
        return float(text) if text else CASE_SECONDS
    except ValueError:
        raise ValueError(f"${CASE_SECONDS_ENV}={text!r}: seconds per case, a number") from None
PASS, FAIL, NOT_ATTEMPTED = "pass", "fail", "not attempted"


@dataclass
class CaseResult:
    name: str
    ok: bool
    shown: str
    why: str = ""
    hint: str = ""
    hidden: bool = False
    mistake: str = ""                 # the registered mutant whose result this equals


@dataclass
class CheckResult:
    id: str
    status: str                       # pass | fail | not attempted
    passed: int
    total: int
    hidden_passed: int = 0
    hidden_total: int = 0
    cases: list[CaseResult] = field(default_factory=list)
    fn: Callable | None = field(default=None, repr=False)   # what the rest of the notebook uses

    @property
    def ok(self) -> bool:
        return self.status == PASS

    def summary(self) -> str:
        if self.status == NOT_ATTEMPTED:
            return f"{self.id}: not attempted (the function still raises NotImplementedError)"
        text = f"{self.id}: {self.passed} of {self.total} public cases pass"
        if self.hidden_total:
            text += f"; {self.hidden_passed} of {self.hidden_total} hidden cases pass"
        return text

    @contextlib.contextmanager
    def installed(self):
        """Inside this block the library calls the student's function where the exercise names one
        (``Exercise.install``), once its check passed; otherwise labkit's own stays in place."""
        ex = get(self.id)
        if not (self.ok and ex.install):
            yield self
            return
        module, attr = records.locate(ex.install)
        before = getattr(module, attr)
        setattr(module, attr, self.fn)
        per_seed.EXTRA[f"student:{self.id}"] = _digest(self.fn)  # its numbers are cached apart from labkit's
        try:
            yield self
        finally:
            setattr(module, attr, before)
            per_seed.EXTRA.pop(f"student:{self.id}", None)

    def record(self) -> dict:
        out = asdict(self)
        out.pop("fn")
        return out


def _digest(fn: Callable) -> str:
    """The function's code (its source where Python kept it, else its bytecode)."""
    import hashlib
    import inspect

    fn = inspect.unwrap(fn)  # through the recorder of labkit.exercises.inputs
    try:
        text = inspect.getsource(fn).encode()
    except (OSError, TypeError):
        text = getattr(getattr(fn, "__code__", None), "co_code", repr(fn).encode())
    return hashlib.sha256(text).hexdigest()[:16]


def _where(err: BaseException) -> str:
    """The line of the student's code that raised: the last frame outside labkit and installed packages
    (an error raised inside optuna or torch is still the student's call)."""
    frames = traceback.extract_tb(err.__traceback__)
    labkit_dir = str(Path(__file__).resolve().parents[1])
    theirs = [f for f in frames if "-packages" not in f.filename and not f.filename.startswith(labkit_dir)]
    if theirs:
        return f"line {theirs[-1].lineno} of your code"
    last = frames[-1]
    return f"in {Path(last.filename).name}, line {last.lineno}"


def case_result(ex: Exercise, case: Case, expected: dict, got: dict, hidden: bool) -> CaseResult:
    """One case's line from the reference's outcome and the function's."""
    why = ex.judge(case, expected, got)
    if why is None:
        return CaseResult(case.name, True, case.shown(), hidden=hidden)
    return CaseResult(case.name, False, case.shown(), why, case.hint or ex.hint, hidden, ex.mistake(case, got) or "")


def tie_device_cases(cases: list[Case], results: list[CaseResult]) -> None:
    """A device case (``Case.on_meta``) checks only where the result's tensors are, so it passes only when the
    case it repeats (the first) passes on the CPU: a function that returns the right shapes earns nothing."""
    for case, r in zip(cases, results):
        if case.on_meta and r.ok and not results[0].ok:
            r.ok, r.why = False, f"counted once case '{results[0].name}' passes on the CPU"
            r.hint = "get the values right first"


def evaluate(exercise_id: str, fn: Callable, hidden_seed: int | None = None) -> CheckResult:
    """Run every public case (and, with ``hidden_seed``, that seed's hidden cases); nothing printed."""
    ex = get(exercise_id)
    cases = [(c, False) for c in ex.public()]
    if hidden_seed is not None:
        cases += [(c, True) for c in hidden_cases(ex, hidden_seed)]
    results, timed_out = [], None
    for case, hidden in cases:
        if timed_out:  # one endless loop is enough to wait for
            results.append(CaseResult(case.name, False, case.shown(), f"not run: case '{timed_out}' ran past the "
                                      "limit", case.hint or ex.hint, hidden))
            continue
        expected = ex.outcome(ex.reference, case)
        try:
            with time_limit(case_seconds()):
                got = ex.outcome(fn, case, where=_where)
        except CaseTimeout as err:  # fired again after the harness caught the first one
            got = {"raised": "CaseTimeout", "message": str(err), "where": ""}
        if got.get("raised") == "CaseTimeout":
            timed_out = case.name
        if got.get("not_attempted"):
            public = sum(1 for _, h in cases if not h)
            return CheckResult(ex.id, NOT_ATTEMPTED, 0, public, 0, len(cases) - public, [], ex.reference)
        results.append(case_result(ex, case, expected, got, hidden))
    tie_device_cases([c for c, _ in cases], results)
    pub = [r for r in results if not r.hidden]
    hid = [r for r in results if r.hidden]
    ok = all(r.ok for r in results)
    return CheckResult(ex.id, PASS if ok else FAIL, sum(r.ok for r in pub), len(pub), sum(r.ok for r in hid),
                       len(hid), results, fn if ok else ex.reference)


def case_lines(r: CaseResult) -> str:
    """A case as the check prints it: ok / FAIL, its input, and on a failure why, the hint and the mistake."""
    tag = ("ok  " if r.ok else "FAIL") + (" (hidden)" if r.hidden else "")
    line = f"  {tag}  {r.name}: {r.shown}"
    if not r.ok:
        line += f"\n        {r.why}\n        hint: {r.hint}"
        if r.mistake:
            line += f"\n        this is the known mistake: {r.mistake}"
    return line


def check(exercise_id: str, fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn`` for exercise ``exercise_id``, print the case lines and the summary, and return the result
    (its ``fn``: the student's function if every case passed, else labkit's)."""
    result = evaluate(exercise_id, fn)
    ex = get(exercise_id)
    if not quiet:
        print(f"[{ex.id}] {ex.title} ({ex.points} pts); tolerance: {ex.tolerance}")
        for r in result.cases:
            print(case_lines(r))
        print(result.summary())
        ref = ex.install.replace(":", ".") if ex.install else f"{ex.reference.__module__}.{ex.reference.__name__}"
        if result.ok:
            print("  -> the rest of this notebook uses your function")
        else:
            print(f"  -> the rest of this notebook falls back to labkit's {ref}")
    result.fn = inputs.recording(ex.id, result.fn, ex.reference)  # what the lab feeds it, where the tests ask ($LABKIT_RECORD_INPUTS)
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(result.record()) + "\n")
    return result


def _stub(*args, **kwargs):
    raise NotImplementedError


@dataclass
class SelfTest:
    exercises: int
    references: int
    stubs: int
    mutants: int
    caught: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        return (f"exercises {self.exercises}, references pass {self.references}/{self.exercises}, stubs fail "
                f"{self.stubs}/{self.exercises}, mutants caught {self.caught}/{self.mutants}")


def self_test(hidden_seed: int = 0, log: Callable[[str], None] = print, ids: list[str] | None = None) -> SelfTest:
    """For every exercise (or those of ``ids``, a list of ids or id prefixes such as ``"lab1."``): the reference
    passes its public and hidden cases, a stub is "not attempted", and every registered mutant fails at least
    one public case."""
    exercises = {k: v for k, v in registry().items() if ids is None or any(k.startswith(i) for i in ids)}
    refs = stubs = mutants = caught = 0
    problems = []
    for ex in exercises.values():
        r = evaluate(ex.id, ex.reference, hidden_seed)
        if r.ok and r.total >= 3:
            refs += 1
        else:
            problems.append(f"{ex.id}: the reference fails its own cases ({r.summary()}) or has < 3 cases")
        if evaluate(ex.id, _stub).status == NOT_ATTEMPTED:
            stubs += 1
        else:
            problems.append(f"{ex.id}: a stub raising NotImplementedError is not reported 'not attempted'")
        for name, mutant in ex.mutants.items():
            mutants += 1
            m = evaluate(ex.id, mutant)
            if m.status == FAIL:
                caught += 1
                failed = next(c.name for c in m.cases if not c.ok)
                log(f"  {ex.id}: mutant '{name}' caught by '{failed}'")
            else:
                problems.append(f"{ex.id}: mutant '{name}' is not caught ({m.summary()})")
    result = SelfTest(len(exercises), refs, stubs, mutants, caught, problems)
    for p in problems:
        log(f"PROBLEM {p}")
    log(result.line())
    return result
