"""Lab 2 Task 2's search time on this machine under one schedule: longest first (``lab2.PRIORITY``, the default)
or even shares (every study priority 0). One run per call; each appends a row to ``--out``.

Task 2 runs as the notebook runs it (its three studies, the profile's workers, MPS as the profile says) from
Task 1's best architecture, into a new journal: no cached trial, so all of its trials train. The start is
the best of the committed full-profile journal's Task 1 (``figures/lab2/studies.journal.xz``); other profiles
start from a seeded sample of their space. The row records the wall time, the trials that ran out of GPU
memory and ran again, and each mode's median trial time. ``benchmarks/search/task2_schedule.py`` predicts
the ratio from trial times; this measures it.

    python benchmarks/search/task2_wall.py --schedule longest|even [--profile full] [--workers auto]
        [--start committed|last-row] [--out benchmarks/search/task2_wall.json]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path

import optuna

from labkit.labs import lab2
from labkit.labs.lab2_space import sample_architecture
from labkit.run.profiles import lab_settings
from labkit.labs.lab2_objectives import compressed_path
from labkit.results import load_results, provenance, write_json
from labkit.search import run_studies

ROOT = Path(__file__).resolve().parents[2]
COMMITTED_ROWS = Path(__file__).with_name("task2_wall.json")
SCHEDULES = ("longest", "even")


def start_params(s: dict, start: str = "committed") -> dict:
    """``start`` "committed": Task 1's best in the committed results (full profile: ``figures/lab2/samplers.json``),
    "last-row": the start of the committed ``task2_wall.json``'s last row (a run comparable with it); else a seeded
    sample of the profile's space."""
    if start == "last-row":
        return json.loads(COMMITTED_ROWS.read_text())["rows"][-1]["start"]
    if s["profile"] == "full":
        return load_results("lab2", "samplers")["numbers"]["best"]["params"]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    while True:
        trial = study.ask()
        try:
            sample_architecture(trial, True, s["space"])
            return trial.params
        except optuna.TrialPruned:  # an invalid combination: draw again
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedule", required=True, choices=SCHEDULES)
    parser.add_argument("--profile", default="full")
    parser.add_argument("--workers", default=None, help="trial processes (default: the profile's)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("task2_wall.json"))
    parser.add_argument("--start", choices=("committed", "last-row"), default="committed",
                        help="Task 1's best in the committed results, or the start of the committed rows' last")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    over = {} if args.workers is None else {"workers": args.workers if args.workers == "auto" else int(args.workers)}
    s = lab_settings("lab2_search", args.profile, **over)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        start = start_params(s, args.start)
        # best models saved beside the journal, not over the notebook's (runs/lab2)
        plans = [dataclasses.replace(p, options={**p.options, "best_dir": str(tmp / "best" / p.options["mode"])},
                                     priority=p.priority if args.schedule == "longest" else 0)
                 for p in lab2.task2_plans(s, start)]
        t0 = time.perf_counter()
        studies = run_studies(plans, storage=f"journal:{tmp / 'task2.journal'}", workers=s["workers"],
                              progress="lines", desc=f"Lab 2 task 2 ({args.schedule})", mps=s["mps"],
                              log_dir=tmp / "logs")
        wall = time.perf_counter() - t0
        modes = {p.name: p.options["mode"] for p in plans}
        trials = {modes[n]: st.get_trials() for n, st in studies.items()}  # read before the journal goes
    done = {m: [t for t in ts if t.state.name == "COMPLETE"] for m, ts in trials.items()}
    row = {
        "schedule": args.schedule, "profile": args.profile, "workers": s["workers"], "mps": s["mps"],
        "wall_seconds": round(wall, 1),
        "priorities": {modes[p.name]: p.priority for p in plans},
        "completed": {m: len(v) for m, v in done.items()},
        "out_of_memory_retries": sum("out of memory" in str(t.user_attrs.get("failed_because", ""))
                                     for ts in trials.values() for t in ts),
        "median_trial_seconds": {m: round(statistics.median(t.user_attrs["trial_seconds"] for t in v), 1)
                                 for m, v in done.items() if v},
        "max_gpu_peak_gib": max((t.user_attrs["gpu_peak_gib"] for v in done.values() for t in v
                                 if "gpu_peak_gib" in t.user_attrs), default=None),  # CUDA only
        # the enqueued start (Task 1's best) as each mode scored it: the one architecture every run shares
        "start_values": {m: next((t.value for t in v if t.params == lab2.full_params(start)), None)
                         for m, v in done.items()},
        "compressed_path": compressed_path(s),
        "start": start, "provenance": provenance(),
    }
    rows = json.loads(args.out.read_text())["rows"] if args.out.is_file() else []
    # each row names its own provenance; the file's is the latest run's
    write_json(args.out, {"rows": rows + [row], "provenance": row["provenance"]})
    print(f"Task 2, {args.schedule}: {wall:.0f} s wall, {row['completed']} trials, "
          f"{row['out_of_memory_retries']} out-of-memory retries; median trial s {row['median_trial_seconds']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
