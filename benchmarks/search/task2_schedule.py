"""Lab 2 Task 2's search time under two ways of sharing workers between its three studies, simulated from
measured trial times: even shares (every study priority 0) against longest first (``lab2.PRIORITY``).

A discrete-event simulation: W workers, each free worker takes a trial of the plan that
``labkit.search.worker.pick`` chooses (the workers' own rule), and a trial lasts a time drawn from the
measured ``trial_seconds`` of that mode's finished trials (the committed full-profile journal, and any
``--journal`` given). The draws are the same for both rules in each repetition. It measures the schedule
only: trial times are taken as measured under 14 busy workers, not re-timed for the concurrency a schedule
makes. The search's time on a GPU is measured by the regeneration (`regen_state.json`).

    python benchmarks/search/task2_schedule.py [--workers 14] [--repeats 500] [--journal PATH ...]
        [--out benchmarks/search/task2_schedule.json]
"""
from __future__ import annotations

import argparse
import dataclasses
import heapq
import random
import statistics
from pathlib import Path

import optuna

from labkit.run import profiles
from labkit.labs import lab2
from labkit.results import write_json
from labkit.search import make_storage
from labkit.search.worker import pick

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "figures" / "lab2" / "studies.journal.xz"


def measured_seconds(paths: list[Path]) -> dict[str, list[float]]:
    """``trial_seconds`` of every finished Task 2 trial in the journals (plain or ``.xz``), by mode."""
    out: dict[str, list[float]] = {mode: [] for mode in lab2.MODES.values()}
    for path in paths:
        storage = make_storage(f"journal:{path}")
        for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
            study = optuna.load_study(study_name=summary.study_name, storage=storage)
            mode = study.user_attrs.get("plan", {}).get("options", {}).get("mode")
            if mode in out:  # Task 2's studies (Task 1's have no mode)
                out[mode] += [float(t.user_attrs["trial_seconds"]) for t in study.trials
                              if t.state.name == "COMPLETE" and "trial_seconds" in t.user_attrs]
    return out


def makespan(plans, durations: dict[str, list[float]], workers: int) -> float:
    """When the last trial ends, free workers choosing by ``pick``; ``durations``: each mode's trial times in
    the order its trials start."""
    left = {p.name: list(durations[p.options["mode"]]) for p in plans}
    running = {p.name: 0 for p in plans}
    events, now, free = [], 0.0, workers
    while True:
        while free:
            room = [(running[p.name], i, p) for i, p in enumerate(plans) if left[p.name]]
            if not room:
                break
            plan = pick(room)
            running[plan.name] += 1
            free -= 1
            heapq.heappush(events, (now + left[plan.name].pop(0), plan.name))
        if not events:
            return now
        now, name = heapq.heappop(events)
        running[name] -= 1
        free += 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=14, help="the full profile's worker count on an H100")
    parser.add_argument("--repeats", type=int, default=500)
    parser.add_argument("--journal", type=Path, action="append", default=[],
                        help="more journals with Task 2 trials (plain or .xz)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("task2_schedule.json"))
    args = parser.parse_args(argv)
    if args.workers < 1 or args.repeats < 1:
        parser.error("--workers and --repeats must be >= 1")
    journals = [COMMITTED, *args.journal]
    seconds = measured_seconds(journals)
    empty = [m for m, v in seconds.items() if not v]
    if empty:
        raise SystemExit(f"no finished Task 2 trials of mode(s) {empty} in {[str(j) for j in journals]}")
    s = profiles.lab_settings("lab2_search", "full")
    longest_first = lab2.task2_plans(s, {"num_hidden_layers": 2})
    even = [dataclasses.replace(p, priority=0) for p in longest_first]
    rng = random.Random(0)
    spans = {"even": [], "longest first": []}
    for _ in range(args.repeats):
        draw = {m: [rng.choice(v) for _ in range(s["compression_trials"])] for m, v in seconds.items()}
        spans["even"].append(makespan(even, draw, args.workers))
        spans["longest first"].append(makespan(longest_first, draw, args.workers))
    ratio = [a / b for a, b in zip(spans["longest first"], spans["even"])]
    numbers = {
        "workers": args.workers, "repeats": args.repeats, "trials_per_mode": s["compression_trials"],
        "measured_trials": {m: len(v) for m, v in seconds.items()},
        "median_trial_seconds": {m: round(statistics.median(v), 1) for m, v in seconds.items()},
        "lower_bound_seconds": round(sum(statistics.mean(v) for v in seconds.values()) * s["compression_trials"]
                                     / args.workers, 1),
        "makespan_seconds": {k: {"mean": round(statistics.mean(v), 1), "median": round(statistics.median(v), 1),
                                 "min": round(min(v), 1), "max": round(max(v), 1)} for k, v in spans.items()},
        "longest_first_over_even": {"median": round(statistics.median(ratio), 3),
                                    "worse_in": sum(r > 1 for r in ratio)},
        "journals": [str(j.relative_to(ROOT)) if j.is_relative_to(ROOT) else str(j) for j in journals],
    }
    write_json(args.out, {"numbers": numbers})
    for k, v in numbers["makespan_seconds"].items():
        print(f"{k:>14}: mean {v['mean']:.0f} s, median {v['median']:.0f} s ({v['min']:.0f}-{v['max']:.0f})")
    print(f"longest first / even: median {numbers['longest_first_over_even']['median']:.3f}, worse in "
          f"{numbers['longest_first_over_even']['worse_in']} of {args.repeats}; lower bound (work / workers) "
          f"{numbers['lower_bound_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
