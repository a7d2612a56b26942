"""Run a lab's per-seed work once per training seed, keeping each finished seed's numbers on disk.

A GPU lent ~10 minutes a call cannot always finish every seed of a lab (Lab 1's pruning sweep trains 16
models per seed). ``run`` saves each seed's numbers under ``runs/seeds/`` as soon as it finishes, so the
same notebook started again (the next call, or after an interruption) resumes after the last finished
seed instead of starting over. A saved seed is reused only for the same settings and the same clean
commit; a tree with uncommitted changes (a developer's) never reuses one, since its code may differ.
Each result records the commit that measured it (``measured_at``).

``LABKIT_SEEDS_FROM=<commit>`` also reuses seeds an earlier clean commit saved with the same settings: for a
change that cannot alter a seed's numbers (a figure, the prose); the results then name both commits.

``LABKIT_SEEDS_DEADLINE`` (a Unix time; ``labkit regenerate`` sets it for its call) stops the run between seeds
where the next seed would not end before it (``SeedsStopped``): a seed killed mid-way at a call's limit is lost
work. A seed's expected time is the longest one this run has computed (this process, this device, as busy as it
is now); the run's first computed seed always starts, so every run makes progress.
"""
from __future__ import annotations

import hashlib
import json
import time
from typing import Callable

from .. import settings as _settings
from ..training import precision, progress as _progress, train


DEADLINE_ENV = "LABKIT_SEEDS_DEADLINE"
STOPPED = "stopped before seed"  # how a SeedsStopped message begins its reason (regenerate reads it in the log)


class SeedsStopped(RuntimeError):
    """The run stopped between seeds at ``LABKIT_SEEDS_DEADLINE``; the finished seeds are kept, and the same
    notebook run again resumes after them."""


# What else decides a seed's numbers besides its settings and the commit: a student's function installed into
# the library (labkit.exercises' CheckResult.installed), name -> a digest of its code.
EXTRA: dict[str, str] = {}


def _key(lab: str, name: str, settings: dict, seed: int, commit: str) -> str:
    shown = {k: v for k, v in settings.items() if k != "seeds"}
    what = {"lab": lab, "name": name, "settings": shown, "seed": seed, "commit": commit,
            **precision.cache_key(settings),  # "auto" as it resolved on this CPU
            **train.device_key(settings.get("device", "auto"))}  # a GPU's step (env), the card and its share
    if EXTRA:
        what["extra"] = dict(EXTRA)
    blob = json.dumps(what, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _clean_commit() -> str | None:
    from ..results import git_commit

    commit = git_commit()
    return commit if commit and not commit.endswith("+dirty") else None


def run(lab: str, name: str, settings: dict, seeds: list[int], one: Callable[[int], dict]) -> list[dict]:
    """``[one(seed) for seed in seeds]``, each seed's result read back from ``runs/seeds`` where an earlier
    run of the same settings and clean commit saved it."""
    import os

    commit = _clean_commit()
    earlier = os.environ.get("LABKIT_SEEDS_FROM") or None
    folder = _settings.runs_dir() / "seeds" / lab / name
    out, took = [], []  # took: the seconds of each seed computed here
    for seed in _progress.bar(seeds, desc=f"{name}: seeds", unit="seeds"):
        path = folder / f"seed{seed}-{_key(lab, name, settings, seed, commit)}.json" if commit else None
        old = folder / f"seed{seed}-{_key(lab, name, settings, seed, earlier)}.json" if earlier else None
        found = next((p for p in (path, old) if p is not None and p.is_file()), None)
        if found is not None:
            print(f"seed {seed}: numbers from {found.name} (saved by an earlier run"
                  + (" of this commit)" if found == path else f" at {earlier[:12]}, LABKIT_SEEDS_FROM)"), flush=True)
            out.append({**json.loads(found.read_text()), "measured_at": commit if found == path else earlier})
            continue
        _stop_if_late(lab, name, seed, max(took, default=None), len(out), kept=commit is not None)
        began = time.monotonic()
        result = {**one(seed), "measured_at": commit}
        took.append(time.monotonic() - began)
        if path is not None:
            from ..results import jsonable

            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(jsonable(result)))
            tmp.replace(path)  # a seed cut off mid-way leaves nothing under the real name
            result = json.loads(path.read_text())  # the same types whether computed now or read back
        out.append(result)
    return out


def _stop_if_late(lab: str, name: str, seed: int, need: float | None, finished: int, kept: bool = True) -> None:
    """Raise ``SeedsStopped`` where ``seed``, expected to take ``need`` seconds, would not end before
    ``LABKIT_SEEDS_DEADLINE`` (``need`` None: no seed computed yet in this run, so it starts)."""
    deadline = _settings.env_number(DEADLINE_ENV, "Unix times in seconds (> 0), or unset")
    if deadline is None or need is None:
        return
    left = deadline - time.time()
    if need > left:
        where = ("are kept in runs/seeds, so running the notebook again resumes there" if kept else
                 "are not kept (a tree with uncommitted changes saves no seed)")
        raise SeedsStopped(f"{lab}/{name}: {STOPPED} {seed} at {DEADLINE_ENV}: a seed took up to {need:.0f} s here "
                           f"and {max(left, 0):.0f} s are left; the {finished} seed(s) before it {where}")
