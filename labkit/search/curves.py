"""Best-so-far curves of studies, and their mean and spread over seeds."""
from __future__ import annotations

import numpy as np
import optuna
from optuna.trial import TrialState


def best_so_far(study: optuna.Study, key: str | None = None, limit: int | None = None) -> list[float]:
    """Best value (or user attribute ``key``) after each completed trial, in trial order; the first
    ``limit`` completed trials only (concurrent workers can finish a few more than asked)."""
    best, out = float("-inf"), []
    trials = sorted(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=lambda t: t.number)
    for t in trials[:limit]:
        value = t.value if key is None else t.user_attrs.get(key)
        if value is not None:
            best = max(best, value)
        out.append(best)
    return out


def band(curves: list[list[float]]) -> dict:
    """Mean, min and max over curves at each trial (curves cut to the shortest), and the standard
    error of the mean of the final values."""
    if not curves:
        raise ValueError("band: no curves")
    n = min(len(c) for c in curves)
    arr = np.array([c[:n] for c in curves], dtype=float)
    final = arr[:, -1]
    sem = float(final.std(ddof=1) / np.sqrt(len(final))) if len(final) > 1 else float("nan")
    return {"mean": arr.mean(0).tolist(), "min": arr.min(0).tolist(), "max": arr.max(0).tolist(),
            "final": final.tolist(), "final_mean": float(final.mean()), "final_sem": sem, "trials": n}


def bands(curves: dict[str, list[list[float]]]) -> dict[str, dict]:
    """``band`` of each group's curves, all cut to the shortest curve of any group: samplers compared at
    equal budget even when one search finished short."""
    n = min(len(c) for cs in curves.values() for c in cs)
    return {name: band([c[:n] for c in cs]) for name, cs in curves.items()}


def trial_provenance(studies) -> dict:
    """Which code, machines and worker processes ran the completed trials of ``studies`` (a resumed study
    can mix them), and their per-trial wall time: the figure's own provenance names only the process that
    drew it. ``processes``: distinct (host, boot, pid) of the trials' worker records; ``boots``: distinct
    (host, boot) (fresh machines may share a host name); ``worker_ids``: the distinct worker ids;
    ``unclaimed``: trials without a worker record; ``sm_counts``: how many trials saw each count of the GPU's
    multiprocessors (an MPS share shows fewer, and a trial's bits follow it), where trials recorded one."""
    from .storage import WORKER_ATTR

    commits, hosts, devices, sm_counts, seconds = {}, {}, {}, {}, []
    processes, worker_ids, unclaimed = set(), set(), 0
    for study in studies:
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            who = t.user_attrs.get(WORKER_ATTR) or {}
            for tally, key in ((commits, "commit"), (hosts, "host"), (devices, "device")):
                tally[who.get(key) or "unrecorded"] = tally.get(who.get(key) or "unrecorded", 0) + 1
            if who.get("pid") is not None:  # one process: a pid alone repeats across boots and hosts
                processes.add((who.get("host"), who.get("boot"), who["pid"]))
            else:
                unclaimed += 1
            if who.get("worker") is not None:
                worker_ids.add(who["worker"])
            if t.user_attrs.get("gpu_sm_count") is not None:
                sm_counts[t.user_attrs["gpu_sm_count"]] = sm_counts.get(t.user_attrs["gpu_sm_count"], 0) + 1
            if t.datetime_start and t.datetime_complete:
                seconds.append((t.datetime_complete - t.datetime_start).total_seconds())
    return {"commits": commits, "hosts": hosts, "devices": devices, "trials": len(seconds),
            "processes": len(processes), "boots": len({(h, b) for h, b, _ in processes}),
            "worker_ids": sorted(worker_ids), "unclaimed": unclaimed, "sm_counts": dict(sorted(sm_counts.items())),
            "trial_seconds_mean": float(np.mean(seconds)) if seconds else None}
