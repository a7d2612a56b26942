"""Retrain Lab 2's searched bests and their comparators with fresh training seeds, paired per seed.

A searched best is the best of N trials, each trained once on the search's seed, so its lead over its start (or
over the next architecture) is biased upwards. This retrains, with each of ``k`` fresh seeds (never the search's),
both sides of every comparison the answers make:

- Task 1's best architecture and its runner-up (the best trial of another architecture), plain objective;
- each Task 2 search's best and its start (Task 1's best), under that search's objective (``mode``); a search
  whose best is its start has nothing to retrain.

Both sides train with the same seed (same initialisation draw and batch order), so the difference is read per
seed (``labkit.readings.lab2_search``). The settings, trials and parameters come from the stored results
(``samplers.json``, ``compression_aware.json``; the Task 2 trials' parameters from the studies' storage where the
JSON does not hold them), so a retrain is the search's trial with the seed replaced, though not with its bits: the
search's workers ran at an MPS share of the SMs, the retrains by default with every SM, and the share changes the
weights (``determinism.gpu_identity``). Both sides of a comparison retrain alike. Saved as
``figures/lab2[/profile]/remeasured.json``.

    python -m labkit.labs.lab2_remeasure --profile full --seeds 3
"""
from __future__ import annotations

import argparse
import sys
import time

import optuna

from .. import settings as _paths
from ..results import load_results, save_results
from .lab2 import MODES, full_params

LAB, NAME = "lab2", "remeasured"
# the committed full-profile studies (a trial's parameters, where compression_aware.json does not hold them)
COMMITTED_JOURNAL = "figures/lab2/studies.journal.xz"
# stored trial_seconds ran with many workers sharing one H100; alone, a trial took about a third as long
# (2 x 128 x 512: 18.3 s shared in figures/lab2/samplers.json, 5.8 s alone in
# benchmarks/training/lab2_trial_profile.json)
SHARED_SLOWDOWN = 3.2


def fresh_seeds(search_seed: int, k: int) -> list[int]:
    """``k`` training seeds other than the search's own."""
    return [search_seed + i for i in range(1, k + 1)]


def _trial_params(label: str, trial: dict, tag: str, profile: str, storage: str | None) -> dict:
    """A Task 2 trial's parameters: stored with the trial, else read from its study in ``storage``."""
    if "params" in trial:
        return trial["params"]
    from ..search.study_storage import open_storage

    url = storage or (f"journal:{_paths.REPO_ROOT / COMMITTED_JOURNAL}" if profile == "full" else None)
    if url is None:
        from .lab2 import default_storage

        url = default_storage({"profile": profile})
    study = optuna.load_study(study_name=f"lab2-{profile}-cas-{MODES[label]}-{tag}", storage=open_storage(url))
    return next(t.params for t in study.get_trials(deepcopy=False) if t.number == trial["number"])


def plan(samplers: dict, compression: dict | None, storage: str | None = None) -> list[dict]:
    """The comparisons to retrain: ``{"what", "mode", "sides": {side: {"params", "trial", "study",
    "trial_seconds"}}}``; Task 1's from ``samplers`` (a stored payload), Task 2's from ``compression``."""
    from ..readings.lab2_search import runner_up, start_of

    num = samplers["numbers"]
    best = num["best"]
    tag = best["study"].rsplit("-", 1)[1]
    mine = next(t for t in num["trials"][best["study"]] if t["number"] == best["trial"])
    jobs = []
    ru = runner_up(best, num["trials"])
    if ru is not None:
        jobs.append({"what": "task1", "mode": "none", "sides": {
            "best": {"params": best["params"], "trial": best["trial"], "study": best["study"],
                     "value": best["value"], "trial_seconds": mine.get("trial_seconds")},
            "runner_up": {"params": ru[1]["params"], "trial": ru[1]["number"], "study": ru[0],
                          "value": ru[1]["value"], "trial_seconds": ru[1].get("trial_seconds")}}})
    if compression is None:
        return jobs
    profile = compression["settings"]["profile"]
    for label, ts in compression["numbers"]["trials"].items():
        start = start_of(ts)
        top = max(ts, key=lambda t: t["value"]) if ts else None
        if start is None or top is None or top is start or top["value"] <= start["value"]:
            continue  # nothing beat the start: nothing to retrain
        jobs.append({"what": label, "mode": MODES[label], "sides": {
            side: {"params": _trial_params(label, t, tag, profile, storage), "trial": t["number"],
                   "value": t["value"], "trial_seconds": t.get("trial_seconds")}
            for side, t in (("best", top), ("start", start))}})
    return jobs


def estimate_seconds(jobs: list[dict], k: int, workers: int = 1) -> float:
    """Wall time on one H100 from the trials' stored ``trial_seconds`` (shared by the search's workers, so
    divided by ``SHARED_SLOWDOWN``), ``k`` seeds, ``workers`` processes side by side (at best)."""
    one = sum((side.get("trial_seconds") or 0.0) for job in jobs for side in job["sides"].values())
    retrains = k * sum(len(job["sides"]) for job in jobs)
    return one * k / SHARED_SLOWDOWN / max(1, min(workers, retrains))


def retrain(params: dict, settings: dict, seed: int, mode: str, quant=None, prune=None) -> dict:
    """One trial of ``params`` under ``mode`` with the training ``seed`` replaced (no cache): its value and
    what it recorded."""
    from .. import recipes
    from .lab2_objectives import NASObjective

    s = {**settings, "seed": seed}
    objective = NASObjective(recipes.shared_loaders(s), s, mode=mode, quant=quant if mode != "none" else None,
                             prune=prune if mode != "none" else None, space=s.get("space"), use_cache=False)
    trial = optuna.trial.FixedTrial(full_params(params))
    value = objective(trial)
    return {"value": value, **{k: v for k, v in trial.user_attrs.items()
                               if k.startswith("accuracy_") or k in ("trial_seconds", "n_test")}}


def _one_retrain(args) -> tuple:
    """One side of one job trained with one seed (what a worker process runs): ``(seed, what, side, result)``."""
    (what, mode, side, t), settings, seed, quant, prune, device = args
    s = {**settings, "device": device or settings["device"]}
    start = time.perf_counter()
    r = retrain(t["params"], s, seed, mode, quant, prune)
    print(f"  seed {seed}: {what} {side} (trial {t['trial']}) {r['value']:.4f} in {time.perf_counter() - start:.1f} s",
          flush=True)
    return seed, what, side, r


def remeasure(samplers: dict, compression: dict | None, k: int = 3, storage: str | None = None,
              workers: int = 1, device: str | None = None, mps="off") -> dict:
    """Retrain every comparison of ``plan`` with ``k`` fresh seeds; the numbers of remeasured.json. ``mps``
    (``labkit.search.mps`` modes, Lab 2's ``mps`` setting): worker processes under a private CUDA MPS daemon, so
    their small kernels run side by side instead of taking turns on the GPU (the numbers are the same: each
    process trains deterministically)."""
    jobs = plan(samplers, compression, storage)
    s1 = samplers["settings"]
    s2 = compression["settings"] if compression else s1
    seeds = fresh_seeds(s1["seed"], k)
    num2 = compression["numbers"] if compression else {}
    quant, prune = num2.get("quant"), num2.get("prune")
    print(f"Lab 2 remeasure: {len(jobs)} comparisons x 2 sides x {k} seeds {seeds}; estimated "
          f"{estimate_seconds(jobs, k, workers) / 60:.1f} min on one H100 (from the stored trial times)", flush=True)
    start = time.perf_counter()
    # one task per retraining (not per seed): the search's GPU runs them all side by side
    tasks = [((job["what"], job["mode"], side, t), s1 if job["what"] == "task1" else s2, seed, quant, prune, device)
             for seed in seeds for job in jobs for side, t in job["sides"].items()]
    under_mps, parallel = False, workers > 1 and len(tasks) > 1
    if parallel:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        from .. import recipes

        for seed in seeds:  # tokenised once here, so the worker processes only read the cache
            for s in {id(s1): s1, id(s2): s2}.values():
                recipes.prepare_data({**s, "seed": seed})

        from ..search import mps as _mps

        with _mps.daemon(_paths.runs_dir() / "lab2-remeasure" / "mps", mps, share=100,
                         clients="remeasure workers") as env, _paths.environ(env):
            under_mps = bool(env)
            with ProcessPoolExecutor(min(workers, len(tasks)), mp_context=mp.get_context("spawn")) as pool:
                done = list(pool.map(_one_retrain, tasks))
    else:
        done = [_one_retrain(t) for t in tasks]
    by_seed = {seed: {} for seed in seeds}
    for seed, what, side, r in done:
        by_seed[seed][(what, side)] = r
    numbers = {"seeds": seeds, "search_seed": s1["seed"], "task2": {}, "seconds": time.perf_counter() - start,
               "workers": min(workers, len(tasks)) if parallel else 1,
               "workers_under_mps": under_mps}
    for job in jobs:
        entry = {"mode": job["mode"], **{side: {**{k_: v for k_, v in t.items() if k_ != "trial_seconds"},
                                                "accuracy": [by_seed[s][(job["what"], side)]["value"] for s in seeds],
                                                "runs": [by_seed[s][(job["what"], side)] for s in seeds]}
                                         for side, t in job["sides"].items()}}
        n = next((r["n_test"] for s in seeds for r in by_seed[s].values() if "n_test" in r), None)
        numbers["n_test"] = n
        if job["what"] == "task1":
            numbers["task1"] = entry
        else:
            numbers["task2"][job["what"]] = entry
    print(f"Lab 2 remeasure: {numbers['seconds']:.0f} s", flush=True)
    return numbers


def run(profile: str = "full", k: int = 3, storage: str | None = None, workers: int = 1,
        device: str | None = None, mps="off") -> tuple:
    """Read the stored ``samplers`` and ``compression_aware`` of ``profile``, retrain, save remeasured.json."""
    samplers, compression = load_results(LAB, "samplers", profile), load_results(LAB, "compression_aware", profile)
    if samplers is None:
        raise FileNotFoundError(f"no stored samplers.json for profile {profile!r}: run the lab2_search notebook first")
    numbers = remeasure(samplers, compression, k, storage, workers, device, mps)
    settings = {**(compression or samplers)["settings"], "fresh_seeds": numbers["seeds"], "workers": workers}
    if device:
        settings["device"] = device
    return save_results(LAB, NAME, numbers, settings), numbers


def in_notebook(s: dict, k: int = 3, storage: str | None = None) -> dict | None:
    """The notebook's remeasure: ``run`` with a worker per retraining on a GPU (one on a CPU; under MPS as the settings'
    ``mps`` says), and its numbers (``narrate.lab2_search.remeasured_table`` draws them); None in a report-only
    run, where nothing is retrained."""
    if s["report_only"]:
        return None
    import torch

    from ..search.run import WORKERS_PER_GPU_MPS

    # on a GPU a worker per retraining (the search's worker count at most: the search's trials ran so many at once)
    _, numbers = run(s["profile"], k=k, storage=storage, workers=WORKERS_PER_GPU_MPS if torch.cuda.is_available() else 1,
                     mps=s.get("mps", "off"))
    return numbers


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m labkit.labs.lab2_remeasure", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="full", choices=("smoke", "quick", "full"))
    ap.add_argument("--seeds", type=int, default=3, help="fresh training seeds per side (>= 3 for a verdict)")
    ap.add_argument("--storage", help="the studies' storage, for Task 2 trials stored without their parameters "
                                      f"(default: {COMMITTED_JOURNAL} for full, the lab's default storage otherwise)")
    ap.add_argument("--workers", type=int, default=1, help="processes side by side, one seed each")
    ap.add_argument("--device", help="override the stored settings' device (auto, cpu, cuda)")
    from ..search.mps import NAMED_MODES

    ap.add_argument("--mps", default="off", choices=NAMED_MODES,
                    help="the worker processes under a private CUDA MPS daemon (default off)")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error("--seeds: at least 1 (3 or more for a verdict)")
    path, _ = run(args.profile, args.seeds, args.storage, args.workers, args.device, args.mps)
    print(path, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
