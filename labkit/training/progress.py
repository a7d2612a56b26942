"""Progress of labkit's loops (training steps, evaluation batches, sweep points) wherever they run.

``LABKIT_PROGRESS`` picks the form (``labkit.search.progress`` reads the same variable for searches):

- ``bar`` (the default): ``tqdm.auto``, a widget in JupyterLab (ipywidgets is a labkit dependency), text
  in a terminal.
- ``lines`` (``labkit run`` sets it for papermill): no bar, whose redraws would flood the executed
  notebook; a loop that runs longer than ``every`` seconds prints a ``[labkit] ...`` line at most that
  often (the runner echoes these to its console) and one when it ends; a short loop prints nothing.
- ``off``: nothing.
"""
from __future__ import annotations

import os
import time

MODES = ("bar", "lines", "off")


def mode(progress: bool | str = True) -> str:
    """``"off"`` when ``progress`` is False, else ``progress`` itself if it names a mode, else
    ``$LABKIT_PROGRESS`` (default ``"bar"``)."""
    if progress is False or progress == "off":
        return "off"
    value = progress if isinstance(progress, str) else os.environ.get("LABKIT_PROGRESS", "bar")
    if value not in MODES:
        raise ValueError(f"LABKIT_PROGRESS={value!r}: allowed values are {', '.join(map(repr, MODES))}")
    return value


def duration(seconds: float) -> str:
    """Seconds as '42 s' or '3 min'."""
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


class LineProgress:
    """The part of tqdm's interface labkit uses (iterate, ``update``, ``set_postfix``, ``close``), printing
    ``[labkit] desc: n/total ...`` lines at most every ``every`` seconds instead of drawing a bar."""

    def __init__(self, iterable=None, total: int | None = None, desc: str = "", unit: str = "it",
                 every: float = 30.0):
        self.iterable, self.desc, self.unit, self.every = iterable, desc or "progress", unit, every
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total, self.n, self.postfix = total, 0, ""
        self.start = self._last = time.time()
        self._printed = self._closed = False
        self._last_n = None

    def __iter__(self):
        try:
            for item in self.iterable:
                yield item
                self.update()
        finally:
            self.close()

    def __len__(self):
        return self.total or 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def line(self) -> str:
        elapsed = time.time() - self.start
        done = f"{self.n}/{self.total}" if self.total else str(self.n)
        text = f"{self.desc}: {done} {self.unit}, {duration(elapsed)}"
        if self.total and 0 < self.n < self.total:
            text += f", about {duration(elapsed / self.n * (self.total - self.n))} left"
        return text + (f", {self.postfix}" if self.postfix else "")

    def _emit(self) -> None:
        self._last, self._printed, self._last_n = time.time(), True, self.n
        print(f"[labkit] {self.line()}", flush=True)

    def update(self, n: int = 1) -> None:
        self.n += n
        if time.time() - self._last >= self.every:
            self._emit()

    def set_postfix(self, refresh: bool = True, **values) -> None:
        self.postfix = ", ".join(f"{k} {v}" for k, v in values.items())

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            # a loop long enough to have reported ends with a line (unless its last one said it all); a
            # short loop stays silent
            if self._printed and self._last_n != self.n:
                self._emit()


def bar(iterable=None, *, total: int | None = None, desc: str = "", leave: bool = True, unit: str = "it",
        progress: bool | str = True, every: float = 30.0):
    """A progress bar over ``iterable`` (or one advanced with ``update``) in the form ``mode(progress)``
    picks: a ``tqdm.auto`` bar, a :class:`LineProgress`, or a disabled tqdm."""
    m = mode(progress)
    if m == "bar":
        from tqdm.auto import tqdm

        return tqdm(iterable, total=total, desc=desc, leave=leave, unit=unit)
    if m == "lines":
        return LineProgress(iterable, total=total, desc=desc, unit=unit, every=every)
    from tqdm import tqdm

    return tqdm(iterable, total=total, disable=True)
