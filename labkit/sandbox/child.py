"""The graded side's main loop: a clean interpreter that imported torch and optuna once and forks one process per
graded exercise.

The staff process starts it with ``python -I -S`` (no site, no environment of its own beyond a handful of
variables, labkit nowhere on its path) and writes one JSON line per job to its standard input: ``{"work": DIR,
"timeout": s, "memory": bytes, "output": bytes}``. The job itself (the exercise cell, the cases' inputs) waits in
``DIR/job.pickle``, written by the staff process: this loop never reads it, so no student's code or result
passes through the memory every later process inherits. The forked process reads it, removes it, runs the cell
and the cases under ``guard``'s limits, and writes one JSON line per case to ``DIR/result.jsonl``; this loop
waits for it (killing its process group at the deadline) and answers one JSON line: how the process ended.
"""
from __future__ import annotations

import importlib
import json
import os
import pickle
import select
import signal
import sys
import time
import types

from . import codec, guard, harness

CELL = "<your exercise cell>"
PROC_READS = ("status", "stat", "statm", "cmdline", "environ", "limits", "cgroup")


def main(reads: list[str], preload: list[str]) -> None:
    import torch

    torch.set_num_threads(1)
    # the meta device's first op imports its kernels (a second and more): once here, not in every process
    torch.round(torch.ones(2, device="meta") * 2).clamp(-1, 1).softmax(-1)
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 (a module the preamble names but this interpreter lacks: the cell says so)
            pass
    _reply({"ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        job = json.loads(line)
        _reply(_run(job, reads))


def _reply(payload: dict) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def _run(job: dict, reads: list[str]) -> dict:
    work = job["work"]
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            _graded(work, job, reads)
            code = 0
        except BaseException:  # noqa: BLE001 (what went wrong is in output.txt)
            import traceback

            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    killed, status, usage = _wait(pid, start + job["timeout"])
    try:
        os.killpg(pid, signal.SIGKILL)  # anything it left behind
    except OSError:
        pass
    return {"exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None, "killed_at_deadline": killed,
            "wall": round(time.monotonic() - start, 4), "cpu": round(usage.ru_utime + usage.ru_stime, 4),
            "max_rss": usage.ru_maxrss * 1024}


def _wait(pid: int, deadline: float):
    """Reap ``pid``, killing its process group at ``deadline``: (killed, status, rusage)."""
    fd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    killed = False
    try:
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                return killed, status, usage
            left = deadline - time.monotonic()
            if left <= 0 and not killed:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    os.kill(pid, signal.SIGKILL)
                killed = True
            if fd is not None:
                select.select([fd], [], [], max(left, 0.0) if not killed else 0.01)
            else:
                time.sleep(0.002)
    finally:
        if fd is not None:
            os.close(fd)


def _graded(work: str, job: dict, reads: list[str]) -> None:
    os.setsid()
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    out = os.open(os.path.join(work, "output.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    channel = os.open(os.path.join(work, "result.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.closerange(3, channel)
    os.closerange(channel + 1, 4096)
    os.chdir(work)
    os.environ.clear()
    os.environ.update({"HOME": work, "TMPDIR": work, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    for sig in (signal.SIGXFSZ, signal.SIGXCPU, signal.SIGPIPE, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    path = os.path.join(work, "job.pickle")
    with open(path, "rb") as f:
        spec = pickle.load(f)  # the staff process wrote it: its cases' inputs
    os.remove(path)
    cases = pickle.loads(spec["cases"]) if isinstance(spec["cases"], bytes) else spec["cases"]
    guard.limit(job["timeout"], job["memory"], job["output"])
    g = guard.install(work, reads + [f"/proc/{os.getpid()}/{name}" for name in PROC_READS], channel)

    def write(record: dict) -> None:
        os.write(channel, (json.dumps(record, separators=(",", ":")) + "\n").encode())

    fn, cell_error = _define(spec, g)
    write({"defined": fn is not None, "cell_error": cell_error})
    if fn is None:
        write({"done": True})
        return
    for i, (args, kwargs, on_meta) in enumerate(cases):
        result = harness.outcome(spec["runner"], fn, args, kwargs, tuple(spec["expect_raises"]),
                                 where=lambda err: harness.last_line(err, CELL), on_meta=on_meta)
        sys.stdout.flush()
        write({"case": i, "outcome": codec.plain(result)})
        if result.get("not_attempted"):
            break
    write({"done": True})


def _define(spec: dict, g) -> tuple:
    """Run the release's imports and the student's exercise cell in a fresh module; the function it defines."""
    module = types.ModuleType("__student__")
    sys.modules["__student__"] = module
    for name in spec["labkit_names"]:
        module.__dict__[name] = guard.Tripwire(name, g.trip)
    if "check" in spec["labkit_names"]:  # a check call left in the cell: labkit's staff side grades it
        module.__dict__["check"] = lambda exercise_id, fn, *a, **k: types.SimpleNamespace(fn=fn, ok=None)
    for statement in spec["preamble"]:
        try:
            exec(compile(statement, "<the notebook's imports>", "exec"), module.__dict__)
        except Exception:  # noqa: BLE001 (a name the cell then uses raises NameError, shown per case)
            pass
    error = None
    try:
        exec(compile(spec["source"], CELL, "exec"), module.__dict__)
    except BaseException as err:  # noqa: BLE001 (a syntax error, or a top-level statement that raised)
        line = err.lineno if isinstance(err, SyntaxError) else harness.line_in(err, CELL)
        error = f"{type(err).__name__}: {harness.message(err)}" + (f" (line {line} of your cell)" if line else "")
    fn = module.__dict__.get(spec["function"])
    if not callable(fn) or isinstance(fn, guard.Tripwire):
        fn = None
        error = error or f"your cell defines no function named {spec['function']}"
    return fn, error
