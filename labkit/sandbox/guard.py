"""The limits a graded process runs under, set before the student's code runs and kept after it.

An audit hook (``sys.addaudithook``: it cannot be removed) refuses to start processes, open sockets, call
foreign code through ctypes, signal other processes, or touch a file outside the process's own folder and the
installed packages; any import of labkit (a statement, ``importlib``, ``__import__``, ``sys.modules``, text
decoded and executed) or read of labkit's files ends the process at once with ``USES_LABKIT`` after writing
what it touched to the result channel: "uses labkit's implementation" is decided by what runs, not by what the
source says. The process limits come from ``resource``: CPU seconds, address space, bytes written to a file.
"""
from __future__ import annotations

import json
import os
import resource
import sys

USES_LABKIT = 87
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
PROCESS_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                  "pty.spawn", "os.startfile")
FOREIGN_EVENTS = ("ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function", "ctypes.string_at",
                  "ctypes.wstring_at", "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.PyObj_FromPtr")
PATH_EVENTS = {"os.listdir": 0, "os.scandir": 0, "glob.glob": 0, "shutil.copyfile": 0, "shutil.copytree": 0}
WRITE_EVENTS = {"os.remove": 0, "os.rmdir": 0, "os.mkdir": 0, "os.rename": (0, 1), "os.symlink": (0, 1),
                "os.link": (0, 1), "os.chmod": 0, "os.chown": 0, "os.truncate": 0, "os.utime": 0,
                "shutil.rmtree": 0, "shutil.move": (0, 1), "shutil.copyfile": 1, "shutil.copytree": 1}
SYSTEM_READS = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/etc/localtime", "/usr/share/zoneinfo",
                "/sys/devices/system/cpu", "/sys/fs/cgroup", "/etc/ld.so.cache", "/proc/cpuinfo", "/proc/meminfo")


def is_labkit(name: str) -> bool:
    return name == "labkit" or name.startswith("labkit.")


def _names_labkit(path: str) -> bool:
    """A path into a labkit package, checkout or installed distribution."""
    return any(part == "labkit" or part.startswith(("labkit-", "labkit_", "__editable__.labkit", "__editable___labkit"))
               for part in path.split("/"))


class Tripwire:
    """Where labkit would be (``sys.modules["labkit"]``, a name the notebook's imports bind to labkit): any
    attribute of it (``__dict__`` and ``__spec__`` included), a call or an assignment ends the process as
    "uses labkit's implementation". Only ``__class__`` answers, so ``isinstance`` stays quiet."""

    def __init__(self, name: str, trip):
        object.__setattr__(self, "_tripwire", (name, trip))

    def _fire(self, what: str):
        name, trip = object.__getattribute__(self, "_tripwire")
        trip(f"{name}{what}")

    def __getattribute__(self, attr):
        if attr == "__class__":
            return type(self)
        Tripwire._fire(self, f".{attr}")

    def __call__(self, *args, **kwargs):
        Tripwire._fire(self, "(...)")

    def __setattr__(self, attr, value):
        Tripwire._fire(self, f".{attr} = ...")

    def __delattr__(self, attr):
        Tripwire._fire(self, f"del .{attr}")

    def __repr__(self):
        return f"<labkit name {object.__getattribute__(self, '_tripwire')[0]!r}: not available while grading>"


class Guard:
    """The audit hook of one graded process: ``work`` is its own folder (read and write), ``reads`` the folders
    it may read (the standard library, the installed packages); ``channel`` the result file descriptor."""

    def __init__(self, work: str, reads: list[str], channel: int):
        self.work = os.path.realpath(work)
        self.reads = [os.path.realpath(p) for p in reads] + list(SYSTEM_READS)
        self.channel = channel
        self.pid = os.getpid()

    def trip(self, what: str):
        """Say what reached labkit, then end the process: nothing the student's code does can undo it."""
        try:
            os.write(self.channel, (json.dumps({"flag": "uses labkit's implementation", "what": what[:300]})
                                    + "\n").encode())
        finally:
            os._exit(USES_LABKIT)

    @staticmethod
    def _under(path: str, roots) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

    def _path(self, value) -> str | None:
        if isinstance(value, int) or value is None:
            return None  # an open file descriptor: it was checked when it was opened
        try:
            return os.path.realpath(os.fsdecode(value))
        except (TypeError, ValueError):
            return ""

    def check_read(self, value, event: str):
        path = self._path(value)
        if path is None:
            return
        if self._under(path, [self.work]) or self._under(path, self.reads):
            return
        if _names_labkit(path):
            self.trip(f"{event} {path}")
        raise PermissionError(f"grading: your code may read only its own folder and installed packages, "
                                  f"not {path}")

    def check_write(self, value, event: str):
        path = self._path(value)
        if path is None:
            return
        if self._under(path, [self.work]) or path == "/dev/null":
            return
        if _names_labkit(path):
            self.trip(f"{event} {path}")
        raise PermissionError(f"grading: your code may write only in its own folder, not {path}")

    def __call__(self, event: str, args):
        if event == "import":
            if is_labkit(args[0]):
                self.trip(f"import {args[0]}")
            if args[0] == "_posixsubprocess":
                raise PermissionError("grading: your code runs without starting processes")
        elif event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
            (self.check_write if writes else self.check_read)(path, "open")
        elif event in PATH_EVENTS or event in WRITE_EVENTS:
            if event in PATH_EVENTS:
                self.check_read(args[PATH_EVENTS[event]], event)
            where = WRITE_EVENTS.get(event)
            for i in ((where,) if isinstance(where, int) else where or ()):
                self.check_write(args[i], event)
        elif event.startswith(PROCESS_EVENTS):
            raise PermissionError(f"grading: your code runs without starting processes ({event})")
        elif event.startswith("socket."):
            raise PermissionError(f"grading: your code runs without a network ({event})")
        elif event in FOREIGN_EVENTS:
            raise PermissionError(f"grading: your code runs without calling foreign code ({event})")
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill") and args[0] not in (self.pid, 0):
            raise PermissionError(f"grading: your code may not signal other processes ({event})")


def install(work: str, reads: list[str], channel: int) -> Guard:
    """The hook, the tripwires where labkit would be, and no way back to ``_posixsubprocess``."""
    guard = Guard(work, reads, channel)
    for name in [m for m in sys.modules if is_labkit(m)]:  # none: this process never imported labkit
        del sys.modules[name]
    sys.modules["labkit"] = Tripwire("labkit", guard.trip)
    for name in ("_posixsubprocess",):
        sys.modules.pop(name, None)
    for module_name in ("subprocess", "multiprocessing.util"):
        module = sys.modules.get(module_name)
        if module is not None and hasattr(module, "_fork_exec"):
            module._fork_exec = None
    sys.addaudithook(guard)
    return guard


def limit(cpu_seconds: float, memory_bytes: int, output_bytes: int) -> None:
    """CPU seconds (then SIGXCPU), address space beyond what the process already maps, bytes in any one file
    written (then SIGXFSZ), no core files."""
    cpu = max(1, int(cpu_seconds + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    mapped = _mapped_bytes()
    resource.setrlimit(resource.RLIMIT_AS, (mapped + memory_bytes, mapped + memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (output_bytes, output_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _mapped_bytes() -> int:
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0
