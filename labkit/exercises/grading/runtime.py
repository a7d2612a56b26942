"""The clean interpreters a class's code runs in, started and fed from the staff process.

``Runtime`` makes one temporary folder: ``runtime/sandbox/`` (a copy of ``labkit/sandbox``, the only code of
labkit the graded side has), ``site/`` (a link to every installed distribution except labkit's), ``home/`` and a
work folder per graded exercise. ``Sandbox`` is one interpreter (``python -I -S`` of the base Python, with an
environment of five variables, in a network namespace of its own where ``unshare`` can make one) that forks a
process per exercise. ``run`` writes the job into a fresh work folder, waits for the verdict on how the process
ended and reads back what it wrote, within size limits.
"""
from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ...sandbox import child

SANDBOX_SOURCE = Path(__file__).resolve().parents[2] / "sandbox"
BOOT = ("import json, sys; cfg = json.loads(sys.stdin.readline()); sys.path[:0] = cfg['first']; "
        "sys.path += cfg['last']; from sandbox.child import main; main(cfg['reads'], cfg['preload'])")
LABKIT_ENTRY = ("labkit", "labkit-", "labkit_", "__editable__.labkit", "__editable___labkit")
PRELOAD = ("torch", "torch.fx", "torch.nn.functional", "optuna", "numpy", "math", "copy", "statistics")


@dataclass
class Limits:
    timeout: float = 60.0                  # wall and CPU seconds per exercise
    memory: int = 2 * 2 ** 30              # address space beyond what the interpreter maps at the fork
    output: int = 2 * 2 ** 20              # bytes printed (and bytes of results) per exercise


@dataclass
class Run:
    """How one graded process ended and what it wrote."""

    exit: int | None
    signal: int | None
    killed_at_deadline: bool
    wall: float
    cpu: float
    records: list[str] = field(default_factory=list)    # result lines, unread: the grader decodes them
    output: str = ""                                     # the start of what it printed
    output_bytes: int = 0


def _entries_to_link(dirs: list[Path]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in dirs:
        if not d.is_dir():
            continue
        for entry in sorted(d.iterdir()):
            name = entry.name
            if name.startswith(LABKIT_ENTRY) or name.endswith(".pth") or name == "__pycache__":
                continue
            found.setdefault(name, entry)
    return found


def isolation_prefix() -> tuple[list[str], str]:
    """The command that gives a process a network namespace of its own, where this machine allows it."""
    unshare = shutil.which("unshare")
    candidates = []
    if unshare:
        if os.geteuid() == 0:
            candidates.append([unshare, "--net"])
        candidates.append([unshare, "--user", "--map-root-user", "--net"])
    for prefix in candidates:
        try:
            if subprocess.run([*prefix, "/bin/true"], capture_output=True, timeout=10).returncode == 0:
                return prefix, "a network namespace of its own (no network device but loopback)"
        except (OSError, subprocess.TimeoutExpired):
            continue
    return [], "no network namespace (unshare unavailable): sockets refused by the audit hook only"


class Runtime:
    """The graded side's folder, made once per ``labkit grade`` and removed by ``close``."""

    def __init__(self, limits: Limits | None = None):
        self.limits = limits or Limits()
        self.root = Path(tempfile.mkdtemp(prefix="grading-sandbox-"))
        code = self.root / "runtime" / "sandbox"
        code.mkdir(parents=True)
        for src in SANDBOX_SOURCE.glob("*.py"):
            shutil.copyfile(src, code / src.name)
        self.site = self.root / "site"
        self.site.mkdir()
        paths = sysconfig.get_paths()
        installed = {Path(paths["purelib"]), Path(paths["platlib"])}
        import torch  # where torch lives is a site folder too (a venv made with --system-site-packages)

        installed.add(Path(torch.__file__).resolve().parent.parent)
        links = _entries_to_link(sorted(installed))
        for name, target in links.items():
            (self.site / name).symlink_to(target)
        stdlib = Path(os.__file__).resolve().parent  # the base interpreter's, never a venv's
        self.stdlib = [str(stdlib), *([str(stdlib / "lib-dynload")] if (stdlib / "lib-dynload").is_dir() else [])]
        self.reads = [*self.stdlib, str(self.root / "runtime"), str(self.site),
                      *sorted({str(t.resolve()) for t in links.values()})]
        self.python = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
        self.prefix, self.isolation = isolation_prefix()
        (self.root / "home").mkdir()
        (self.root / "work").mkdir(mode=0o700)
        self._count = 0
        self._lock = threading.Lock()

    def env(self) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(self.root / "home"), "OMP_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1"}

    def work_dir(self) -> Path:
        with self._lock:
            self._count += 1
            n = self._count
        path = self.root / "work" / f"{n:06d}"
        path.mkdir(mode=0o700)
        return path

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class SandboxDied(RuntimeError):
    """The interpreter that forks the graded processes ended: its log says why."""


class Sandbox:
    """One clean interpreter of a ``Runtime``; ``run`` grades one exercise at a time."""

    def __init__(self, runtime: Runtime, preload: tuple[str, ...] = PRELOAD, number: int = 0):
        self.runtime = runtime
        self.log = runtime.root / f"sandbox-{number}.log"
        self.proc = subprocess.Popen([*runtime.prefix, runtime.python, "-I", "-S", "-B", "-c", BOOT],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log.open("wb"),
                                     env=runtime.env(), cwd=runtime.root / "home", text=True, bufsize=1)
        self._send({"first": [str(runtime.root / "runtime")], "last": [str(runtime.site)], "reads": runtime.reads,
                    "preload": list(preload)})
        self.ready = self._receive()
        if not self.ready.get("ready"):
            raise SandboxDied(f"the grading interpreter did not start: {self.ready}")

    def _send(self, payload: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(payload) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as err:
            raise SandboxDied(self._why(err)) from None

    def _receive(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise SandboxDied(self._why(None))
        return json.loads(line)

    def _why(self, err) -> str:
        tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
        return f"the grading interpreter ended ({err or 'no answer'}); its log: {tail.strip() or '(empty)'}"

    def run(self, spec: dict, limits: Limits | None = None) -> Run:
        """Grade one exercise: ``spec`` is what the graded process reads (``child._graded``)."""
        limits = limits or self.runtime.limits
        work = self.runtime.work_dir()
        try:
            with (work / "job.pickle").open("wb") as f:
                pickle.dump(spec, f, protocol=pickle.HIGHEST_PROTOCOL)
            self._send({"work": str(work), "timeout": limits.timeout, "memory": limits.memory,
                        "output": limits.output})
            ended = self._receive()
            records = _read_capped(work / "result.jsonl", limits.output).splitlines()
            out_path = work / "output.txt"
            size = out_path.lstat().st_size if out_path.exists() else 0
            return Run(ended["exit"], ended["signal"], ended["killed_at_deadline"], ended["wall"], ended["cpu"],
                       records, _read_capped(out_path, 4000), size)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _read_capped(path: Path, limit: int) -> str:
    """The start of a file the graded process wrote, only if it is still a plain file (not a link, not a pipe)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, limit).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


CELL = child.CELL
