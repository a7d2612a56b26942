"""What Lab 2's notebook says while it runs: where the studies are and how their trials ran, what the run cost,
the searches that stopped short, the best architecture, the remeasured bests (the answers are
``labkit.answers.lab2_search``)."""
from __future__ import annotations

from ..records.lab2_search import restrict
from ..report import table
from .runs import how_trials_ran


def shortfall(done: dict[str, int], planned: int) -> str:
    """A sentence naming the studies that finished fewer than ``planned`` trials ('' when none did): their
    curves are cut, and comparisons at equal budget use the shortest."""
    short = {name: n for name, n in done.items() if n < planned}
    if not short:
        return ""
    return ("Not every search finished its " + f"{planned} trials: " + ", ".join(f"{name} {n}" for name, n in
                                                                               sorted(short.items()))
            + f" completed; curves compared at equal budget stop at {min(done.values())} trials. ")


def studies_header(storage: str, tag: str, prov: dict, s: dict) -> str:
    """The answers' opening line: where the studies are, the plan (trials per search, seeds, space) and
    how their trials ran (``how_trials_ran`` of ``search.trial_provenance`` over every study)."""
    space = ("Search space: the lab's full space." if s["space"] is None else
             f"Search space narrowed by this profile to {restrict(s['space'])}.")
    return (f"Studies in `{storage}` (tag `{tag}`); {s['trials']} trials per sampler and seed, seeds {s['seeds']}. "
            f"{space} {how_trials_ran(prov)}")


def best_architecture(study: str, trial) -> str:
    """A sentence naming Task 1's best trial (an Optuna trial): its study, accuracy, size, the four sizes and how
    many Linear layers it replaced by Identity."""
    sizes = {k: v for k, v in trial.params.items() if "." not in k}
    identity = sum(v == "identity" for k, v in trial.params.items() if "." in k)
    return (f"Best architecture overall: {study} trial {trial.number}, accuracy {trial.value:.4f}, "
            f"{trial.user_attrs['parameters']:,} parameters: `{sizes}`, {identity} Linear layers replaced by Identity.")


def run_header(facts: dict, s: dict) -> str:
    """Where the studies are, their plan and how their trials ran (``labs.lab2_tasks.run_facts``: the trials' own
    records of worker processes, hosts and devices, not this process's count)."""
    return (studies_header(facts["storage"], facts["tag"], facts["provenance"], s)
            + (" Workers ran under CUDA MPS in this run." if s["mps"] and not s["report_only"] else ""))


def run_cost(facts: dict, s: dict) -> str:
    """What the two tasks cost here, and how many trials reused a cached result."""
    cached, trials = facts["cached"], facts["trials"]
    if s["report_only"]:
        return (f"- **Cost.** Drawn from stored studies (no trial ran here): a trial took "
                f"{facts['trial_seconds_mean']['task1']:.0f} s on average in Task 1 and "
                f"{facts['trial_seconds_mean']['task2']:.0f} s in Task 2 with the workers sharing the device; "
                f"{cached} of {trials} trials reused a cached result.")
    return (f"- **Cost.** Task 1 took {facts['seconds']['task1'] / 60:.1f} min and Task 2 "
            f"{facts['seconds']['task2'] / 60:.1f} min here (a resumed run counts only what was left; the header says "
            f"which workers ran the trials); {cached} of {trials} trials reused a cached result.")


def remeasured_table(numbers: dict | None) -> str:
    """``labs.lab2_remeasure.in_notebook``: each side's accuracy per fresh seed (None: a report-only run, which
    retrains nothing)."""
    if numbers is None:
        return ("Report only: nothing is retrained here; the answers read the stored `remeasured.json` where there "
                "is one.")
    pairs = [("Task 1", numbers.get("task1"))] + list(numbers["task2"].items())
    return table([{"comparison": what, "side": side, "trial": e[side]["trial"], "in the search": e[side]["value"],
                   **{f"seed {seed}": a for seed, a in zip(numbers["seeds"], e[side]["accuracy"])}}
                  for what, e in pairs if e for side in e if side != "mode"])
