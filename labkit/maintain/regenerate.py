"""One full-profile regeneration of every lab, in calls that each fit a time limit, resumable.

A GPU lent for at most ~10 minutes a call cannot run every lab at once. ``regenerate`` runs the plan's
notebooks in order until its deadline and records what finished in a state file; the next call (this
session or a later one) skips finished steps, resumes searches through their Optuna journals, and starts
a step only where its expected time fits what is left (searches start whenever a few minutes remain: their
trials are kept). Everything the next call needs lives under ``runs/`` (the state, ``runs/optuna``), which
``tools/gpu_run.sh regen`` packs and restores.

    labkit regenerate --budget 540            # run what fits in 540 s (or python -m labkit.maintain.regenerate)
    labkit regenerate --status                # what is done, what is left
    labkit regenerate --fresh --budget 540    # start a new regeneration: every step pending again

A machine with no state of its own resumes from the committed record of the last landed call
(``COMMITTED_STATE``). ``--fresh`` starts over instead: the new state keeps the record it replaces, whole,
under ``history``, runs every step again (measured times from the history still decide what fits a call)
and starts the searches from nothing: their journals here are set aside, and no committed studies seed them.
Only the first call of a regeneration passes ``--fresh``; later calls resume from its state.

Notebooks that train one model per training seed keep each finished seed (``labkit.labs.per_seed``, under
``runs/seeds``): they too resume where a call's deadline stopped them, so they start whenever a slot is worth
it rather than only when their whole expected time fits.

On a host with several GPUs (``--gpus``, default: all visible) the steps run in lanes, one per GPU (each
notebook sees its lane's GPU alone), longest expected first; each lane takes the next step that fits.

The SFT models are trained once per machine and seed, and cached (``LABKIT_CACHE_DIR``, kept while the
machine stays warm between calls). Training is deterministic (``labkit.training.determinism``), so another call or
machine retrains the same weights; each call's digests are recorded, and a differing one is warned about.
"""
from __future__ import annotations

import argparse
import json
import lzma
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .. import records
from .. import settings as _settings
from ..records import Step, notebook_seconds


# The plan: every record's steps (labkit.records), in their order: the four notebooks on the 512-token SFT models
# first (one training per seed serves them all in one call), then Lab 3 on its 256-token SFT models, then Lab
# 4's timings (the GPU to themselves), then Lab 2's search, which resumes from the committed studies. Estimates:
# seconds on one H100 for the full profile's three seeds (measured times of earlier settings, scaled to today's
# trial and epoch counts).
PLAN = records.steps()
_STATE_LOCK = threading.Lock()
MIN_SEARCH_SLOT = 240  # seconds: less would go on start-up (the SFT model, tokenising, workers)
PACK_MARGIN = 20       # seconds kept after the last step for packing
SEARCH_DRAW_S = 60     # seconds a search step keeps after its workers stop (see deadline_env)
SEEDS_FINISH_S = 30    # seconds a per-seed step keeps after its last seed, for its figures (see deadline_env)
PARALLEL_MPS_ENV = "LABKIT_REGEN_MPS"  # --parallel's notebooks under a CUDA MPS daemon: auto (default), on, off


def state_path() -> Path:
    return _settings.runs_dir() / "regen" / "state.json"


# the committed record of the last landed call (tools/land_gpu_call.py): a new session resumes from it
COMMITTED_STATE = _settings.REPO_ROOT / "notebooks" / "executed" / "full" / "regen_state.json"


def state_file(path: Path | None = None) -> Path | None:
    """The state file a call resumes from: this machine's, else (a fresh machine, nothing carried) the
    committed one; None if neither exists."""
    for candidate in (path or state_path(), None if path else COMMITTED_STATE):
        if candidate is not None and candidate.is_file():
            return candidate
    return None


def load_state(path: Path | None = None) -> dict:
    found = state_file(path)
    return json.loads(found.read_text()) if found else {"steps": {}, "calls": [], "sft": {}}


def _shown(path: Path | None) -> str | None:
    """A state file as the user reads it: relative to the checkout where it lies inside it."""
    if path is None:
        return None
    try:
        return str(path.resolve().relative_to(_settings.REPO_ROOT))
    except ValueError:
        return str(path)


def fresh_state(previous: dict, source: Path | None) -> dict:
    """A new regeneration, every step pending; ``previous`` (read from ``source``) is kept whole as the last
    entry of ``history`` (after its own history), and ``fresh`` says what it superseded."""
    earlier = {k: v for k, v in previous.items() if k != "history"}
    history = list(previous.get("history", [])) + ([earlier] if earlier.get("calls") else [])
    shown = _shown(source)
    done = sorted(name for name, e in earlier.get("steps", {}).items() if e.get("status") == "done")
    return {"steps": {}, "calls": [], "sft": {}, "history": history,
            "fresh": {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "supersedes": shown,
                      "superseded_calls": len(earlier.get("calls", [])), "superseded_done": done}}


def _set_aside_journals(stamp: str) -> list[str]:
    """A fresh regeneration's searches start from nothing: this machine's journals of the plan's searches
    are renamed (kept), not resumed."""
    moved = []
    for step in PLAN:
        src = _settings.runs_dir() / "optuna" / f"{step.search}.journal"
        if step.search and src.is_file():
            src.replace(src.with_name(f"{src.name}.before-fresh-{stamp}"))
            moved.append(src.name)
    return moved


def save_state(state: dict, path: Path | None = None) -> None:
    path = path or state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    tmp.replace(path)


def expected_seconds(step: Step, state: dict) -> float:
    """The time this step took in this regeneration, once finished; else the larger of the plan's estimate and
    what it took in the newest superseded regeneration that finished it (``history``: maybe other settings,
    e.g. fewer seeds, so only a floor). What a step took: a resumable one (a search, a notebook that keeps its
    seeds) every call's run until it finished, summed (each call carried on from the last); any other its
    longest finishing run."""
    def done(rec: dict) -> list[float]:
        runs = rec["steps"].get(step.notebook, {}).get("runs", [])
        if step.resumable:
            return [sum(r["seconds"] for r in runs)] if any(r["status"] == "done" for r in runs) else []
        return [r["seconds"] for r in runs if r["status"] == "done"]

    if now := done(state):
        return max(now)
    last = next((t for t in map(done, reversed(state.get("history", []))) if t), [])  # the newest that ran it
    return max([step.estimate] + last)


def pending(state: dict, only: list[str] | None = None) -> list[Step]:
    steps = [s for s in PLAN if only is None or s.notebook in only]
    return [s for s in steps if state["steps"].get(s.notebook, {}).get("status") != "done"]


def should_start(step: Step, state: dict, remaining: float) -> tuple[bool, str]:
    """Whether ``step`` starts with ``remaining`` seconds left, and why not."""
    need = (step.min_slot or MIN_SEARCH_SLOT) if step.resumable else expected_seconds(step, state)
    if remaining >= need:
        return True, ""
    kind = "a search slot" if step.resumable else "its expected time"
    return False, f"{remaining:.0f} s left < {need:.0f} s ({kind})"


def check_only(only: list[str] | None) -> list[str] | None:
    if only is None:
        return None
    names = [s.notebook for s in PLAN]
    unknown = [n for n in only if n not in names]
    if unknown:
        raise ValueError(f"--only {unknown}: allowed notebooks are {', '.join(names)}")
    return only


def _seed_journal(step: Step) -> None:
    """A search with committed studies resumes from them when this machine has none of its own."""
    if not step.seed_journal:
        return
    here = _settings.runs_dir() / "optuna" / f"{step.search}.journal"
    seed = _settings.REPO_ROOT / step.seed_journal
    if not here.is_file() and seed.is_file():
        from ..search.storage import unpacked_journal  # the search package imports torch: only when seeding

        here.parent.mkdir(parents=True, exist_ok=True)
        here.write_bytes(unpacked_journal(seed).read_bytes())
        print(f"[regen] {step.notebook}: resuming from the committed studies {step.seed_journal}", flush=True)


def _publish_journal(step: Step) -> None:
    """A finished search's studies go beside its figures, xz-compressed (committed: anyone can redraw them;
    Lab 3's journal was 6.6 MB, 0.15 MB compressed)."""
    src = _settings.runs_dir() / "optuna" / f"{step.search}.journal"
    if src.is_file():
        dest = _settings.figures_dir() / step.search / "studies.journal.xz"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(lzma.compress(src.read_bytes()))


def _log_says(log: Path, text: str) -> bool:
    """Whether the end of a step's log holds ``text`` (how a notebook's process tells why it stopped)."""
    try:
        return text in log.read_text(errors="replace")[-20000:]
    except OSError:
        return False


def _stopped_between_seeds(log: Path) -> bool:
    from ..labs.per_seed import STOPPED

    return _log_says(log, f"{STOPPED} ")


def _measured_on_other_sft(log: Path) -> bool:
    return _log_says(log, "measured on another SFT model")


def _set_aside(step: Step, call: str) -> Path:
    src = _settings.runs_dir() / "optuna" / f"{step.search}.journal"
    dest = src.with_name(f"{step.search}.journal.other-sft-{call}")
    src.replace(dest)
    return dest


def deadline_env(step: Step, timeout: float) -> dict:
    """Where a step stops on its own before its timeout, leaving the notebook time to save and fail with a
    resumable stop: a search's workers stop between trials SEARCH_DRAW_S before it (labkit.search.worker's
    DEADLINE_ENV), a per-seed notebook between seeds SEEDS_FINISH_S before it (labkit.labs.per_seed's)."""
    if step.search:
        from ..search.worker import DEADLINE_ENV

        return {DEADLINE_ENV: f"{time.time() + timeout - SEARCH_DRAW_S:.0f}"}
    if step.per_seed:
        from ..labs.per_seed import DEADLINE_ENV

        return {DEADLINE_ENV: f"{time.time() + timeout - SEEDS_FINISH_S:.0f}"}
    return {}


def notebook_code(step: Step) -> str:
    """The Python a notebook step's process runs: the notebook under the full profile (``labkit.run.runner``)."""
    path = _settings.REPO_ROOT / "notebooks" / (step.notebook + ".ipynb")
    return (f"from pathlib import Path; from labkit.run import runner; "
            f"runner.run_notebook(Path({str(path)!r}), 'full', progress=False)")


def _run_notebook(step: Step, timeout: float, log: Path, gpu: int | None = None,
                  env: dict | None = None) -> tuple[str, float]:
    """Run one notebook in its own process group under ``timeout`` (on GPU ``gpu`` alone, where given; with
    ``env`` added to its environment); ("done" | "timeout" | "failed", s)."""
    argv = [sys.executable, *step.script] if step.script else [sys.executable, "-c", notebook_code(step)]
    start = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as fh:
        env = {**os.environ, **(env or {}), **({} if gpu is None else {"CUDA_VISIBLE_DEVICES": _lane_device(gpu)}),
               **deadline_env(step, timeout)}
        # its own group: a timeout stops its kernel and workers
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=_settings.REPO_ROOT,
                                start_new_session=True, env=env)
        deadline = start + timeout
        status = None
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        while status is None:
            chunk = proc.stdout.read()
            if chunk:
                fh.write(chunk)
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
            if proc.poll() is not None:
                rest = proc.stdout.read() or b""
                fh.write(rest)
                sys.stdout.buffer.write(rest)
                status = "done" if proc.returncode == 0 else "failed"
            elif time.monotonic() > deadline:
                _stop_group(proc)
                status = "timeout"
            else:
                time.sleep(0.5)
    return status, time.monotonic() - start


def _lane_device(gpu: int) -> str:
    """The device lane ``gpu`` pins a notebook to, counted among the devices this process was given."""
    given = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return given[gpu] if given else str(gpu)


def _stop_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def record_sft(state: dict, call: str) -> list[str]:
    """Record this call's SFT checkpoints' digests; returns warnings for a checkpoint whose digest differs
    from an earlier call's (the training did not reproduce the same weights)."""
    from ..recipes import checkpoint_digest

    warnings = []
    folder = _settings.cache_dir() / "checkpoints"
    for path in sorted(folder.glob("sft-*.pt")) if folder.is_dir() else []:
        digest = checkpoint_digest(path)
        seen = state["sft"].setdefault(path.name, {})
        if call not in seen:
            others = {d for d in seen.values()}
            seen[call] = digest
            if others and digest not in others:
                warnings.append(f"{path.name}: this call's SFT weights (sha256 {digest[:12]}) differ from an earlier "
                                f"call's ({', '.join(sorted(d[:12] for d in others))}); labs that ran in different "
                                "calls started from different SFT models")
    return warnings


def regenerate(budget: float, only: list[str] | None = None, commit: str | None = None,
               log_dir: Path | None = None, runner=None, parallel: bool = False, fresh: bool = False,
               gpus: int | None = None) -> dict:
    """Run pending steps until ``budget`` seconds are spent; returns the state. ``fresh``: start a new
    regeneration (see the module's docstring). ``gpus``: lanes, one per GPU (default: every visible GPU).
    ``runner(step, timeout, log[, gpu=i])`` replaces the notebook runner (tests)."""
    from .. import results

    only = check_only(only)
    if parallel:
        parallel_mps_mode()  # a bad value refuses the call before it is recorded
    runner = runner or _run_notebook
    start = time.monotonic()
    deadline = start + budget - PACK_MARGIN
    state = load_state()
    if fresh:
        state = fresh_state(state, state_file())
        state["fresh"]["set_aside"] = _set_aside_journals(time.strftime("%Y%m%dT%H%M%S", time.gmtime()))
    call = f"call{len(state['calls']) + 1}"
    commit = commit or results.git_commit()
    state["calls"].append({"call": call, "commit": commit, "device": results.device_name(),
                           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "budget_s": budget})
    save_state(state)
    log_dir = log_dir or _settings.runs_dir() / "regen" / "logs"
    gpus = len(_settings.visible_gpus()) if gpus is None else gpus
    if gpus > 1:
        state["calls"][-1]["gpus"] = gpus
        _run_lanes(state, pending(state, only), call, commit, deadline, runner, log_dir, gpus)
    elif parallel:
        _run_parallel(state, pending(state, only), call, commit, deadline, runner, log_dir)
    for step in pending(state, only) if gpus <= 1 else []:
        remaining = deadline - time.monotonic()
        go, why = should_start(step, state, remaining)
        if not go:
            print(f"[regen] {step.notebook}: left for the next call ({why})", flush=True)
            continue
        _run_step(state, step, call, commit, deadline, runner, log_dir)
    state["calls"][-1]["seconds"] = round(time.monotonic() - start, 1)
    save_state(state)
    print(status_text(state), flush=True)
    return state


def _run_parallel(state, steps, call, commit, deadline, runner, log_dir) -> None:
    """Every untimed notebook that fits, at once on the one GPU, under a private CUDA MPS daemon where there is
    one (``PARALLEL_MPS_ENV``): a small model's training and evaluation leave the GPU mostly idle, and under MPS
    the notebooks' kernels run side by side instead of taking turns (their own timings stretch: their results name
    the others, ``_shared_with``). Timed steps (Lab 4), searches (their workers run under a daemon of their own) and steps that do not
    fit are left to the sequential pass. The group's wall time is the call's ``side_by_side_s``: notebook time
    counts it once (``notebook_seconds``)."""
    from concurrent.futures import ThreadPoolExecutor

    from ..search import mps

    remaining = deadline - time.monotonic()
    chosen = [s for s in steps if not s.timed and not s.search and should_start(s, state, remaining)[0]]
    if len(chosen) < 2:
        return
    mode = parallel_mps_mode()
    began = time.monotonic()
    # every SM for each notebook: the last one left running keeps the whole GPU
    with mps.daemon(_settings.runs_dir() / "regen" / "mps", mode, share=100, clients="notebooks") as env:
        print(f"[regen] side by side{' under MPS' if env else ''}: {', '.join(s.notebook for s in chosen)}",
              flush=True)
        with ThreadPoolExecutor(len(chosen)) as pool:
            for future in [pool.submit(_run_step, state, s, call, commit, deadline, runner, log_dir, True,
                                       env={**env, **_shared_with(s, chosen)}) for s in chosen]:
                future.result()
    with _STATE_LOCK:
        entry = state["calls"][-1]
        entry["side_by_side_s"] = round(entry.get("side_by_side_s", 0.0) + time.monotonic() - began, 1)
        entry["side_by_side_mps"] = bool(env)
        save_state(state)


def _shared_with(step: Step, group: list[Step]) -> dict:
    """The others of ``group`` in ``step``'s environment: its results' provenance names them (``gpu_shared_with``),
    so its own timings are not read as if it had the GPU alone."""
    from ..results import SHARED_GPU_ENV

    return {SHARED_GPU_ENV: ",".join(s.notebook for s in group if s is not step)}


def parallel_mps_mode() -> str:
    """``LABKIT_REGEN_MPS`` (default ``auto``); another value is an error naming the allowed ones."""
    from ..search.mps import NAMED_MODES

    mode = os.environ.get(PARALLEL_MPS_ENV, "auto")
    if mode not in NAMED_MODES:
        raise ValueError(f"{PARALLEL_MPS_ENV}={mode!r}: allowed values are {', '.join(map(repr, NAMED_MODES))}")
    return mode


def _run_lanes(state, steps, call, commit, deadline, runner, log_dir, gpus: int) -> None:
    """One lane per GPU: each takes the longest pending step that fits what is left (expected time, or a
    resumable step's slot) and runs it on its GPU alone, until nothing fits."""
    queue = sorted(steps, key=lambda s: -expected_seconds(s, state))
    lock = threading.Lock()

    def lane(gpu: int) -> None:
        while True:
            with lock:
                remaining = deadline - time.monotonic()
                step = next((s for s in queue if should_start(s, state, remaining)[0]), None)
                if step is None:
                    return
                queue.remove(step)
            _run_step(state, step, call, commit, deadline, runner, log_dir, gpu=gpu)

    print(f"[regen] {gpus} lanes, one per GPU: {', '.join(s.notebook for s in queue)}", flush=True)
    threads = [threading.Thread(target=lane, args=(g,)) for g in range(gpus)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for step in queue:
        print(f"[regen] {step.notebook}: left for the next call "
              f"({should_start(step, state, deadline - time.monotonic())[1]})", flush=True)


def _run_step(state, step, call, commit, deadline, runner, log_dir, parallel=False, gpu: int | None = None,
              env: dict | None = None) -> None:
    remaining = deadline - time.monotonic()
    if step.search and "fresh" not in state:  # a fresh regeneration's searches start from nothing
        _seed_journal(step)
    where = f" on GPU {gpu}" if gpu is not None else ""
    print(f"[regen] {step.notebook}: starting with {remaining:.0f} s left{where}", flush=True)
    log = log_dir / f"{call}-{step.notebook}.log"
    began = time.time()  # file mtimes may keep whole seconds: written_since gets a second's slack
    extra = {**({} if gpu is None else {"gpu": gpu}), **({} if env is None else {"env": env})}
    status, seconds = runner(step, remaining, log, **extra)
    if status == "failed" and step.search and _measured_on_other_sft(log):
        # this call's SFT model is not the one the stored trials were measured on: start that search over
        moved = _set_aside(step, call)
        print(f"[regen] {step.notebook}: its stored trials were measured on another SFT model; moved them to "
              f"{moved} and starting over", flush=True)
        with _STATE_LOCK:
            state.setdefault("warnings", []).append(f"{call}: {step.notebook} restarted (stored trials from another "
                                                    f"SFT model, moved to {moved.name})")
        more, spent = runner(step, deadline - time.monotonic(), log, **extra)
        status, seconds = more, seconds + spent
    if status == "done" and step.search:
        _publish_journal(step)
    with _STATE_LOCK:  # side-by-side steps share the state: never one saving while another changes it
        entry = state["steps"].setdefault(step.notebook, {"runs": []})
        # what a step alone in the call wrote, so a lander can take it while another step of the same
        # figures folder is unfinished (steps side by side or in lanes overlap: none recorded)
        alone = status == "done" and not parallel and gpu is None
        entry["runs"].append({"call": call, "status": status, "seconds": round(seconds, 1), "commit": commit,
                              **({"side_by_side": True} if parallel else {}),
                              **({"gpu": gpu} if gpu is not None else {}),
                              **({"files": written_since(_settings.figures_dir(), began - 1)} if alone else {})})
        # a stopped search or per-seed notebook kept what it finished; a per-seed notebook that failed did not
        partial = step.resumable and (step.search is not None or status == "timeout"
                                      or (status == "failed" and _stopped_between_seeds(log)))
        entry["status"] = status if status == "done" else ("partial" if partial else status)
        for warning in record_sft(state, call):
            print(f"[regen] WARNING: {warning}", flush=True)
            state.setdefault("warnings", []).append(warning)
        save_state(state)
    print(f"[regen] {step.notebook}: {status} in {seconds:.0f} s", flush=True)


def written_since(root: Path, since: float) -> list[str]:
    """Files under ``root`` (its quick and smoke folders left out) modified at or after ``since``, relative to
    it."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and not {"quick", "smoke"} & set(p.relative_to(root).parts)
                  and p.stat().st_mtime >= since)


def status_heading(state: dict, source: str | None = None) -> str:
    """What the plan below it shows: the record of a regeneration (``source``: where it was read) with its
    calls so far, or what a fresh regeneration would start with."""
    fresh = state.get("fresh")
    replaced = (f"superseding {fresh['supersedes'] or 'no record'}: {fresh['superseded_calls']} call(s), "
                f"{len(fresh['superseded_done'])} step(s) done there" if fresh else "")
    if fresh and not state["calls"]:
        return f"[regen] the plan a fresh regeneration starts with ({replaced}); nothing has run:"
    where = f" in {source}" if source else ""
    started = f"; started fresh at {fresh['started']}, {replaced}" if fresh else ""
    return f"[regen] the regeneration recorded{where}: {len(state['calls'])} call(s) so far{started}; its plan:"


def status_text(state: dict, source: str | None = None) -> str:
    lines = [status_heading(state, source)]
    # what a call must leave room for, per unfinished step (measured where a call did)
    left = {s.notebook: expected_seconds(s, state) for s in pending(state)}
    for step in PLAN:
        entry = state["steps"].get(step.notebook, {})
        runs = entry.get("runs", [])
        spent = sum(r["seconds"] for r in runs)
        calls = ", ".join(f"{r['call']} {r['status']} {r['seconds']:.0f} s" for r in runs) or "not started"
        if step.notebook in left:
            calls += f"; expected {left[step.notebook]:.0f} s"
        lines.append(f"  {step.notebook:18s} {entry.get('status', 'pending'):8s} {spent:6.0f} s  ({calls})")
    total = notebook_seconds(state)
    lines.append(f"  notebook time so far {total:.0f} s over {len(state['calls'])} call(s); "
                 + (f"left: {', '.join(left)} (expected {sum(left.values()):.0f} s)" if left
                    else "every step is done"))
    if state["calls"]:
        from .regen_results import summary

        lines.append(summary(state))
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``labkit regenerate`` and ``python -m labkit.maintain.regenerate``."""
    parser.add_argument("--budget", type=float, default=540, help="seconds this call may spend (default 540)")
    parser.add_argument("--only", nargs="+", help="run only these notebooks (stems), still in plan order")
    parser.add_argument("--parallel", action="store_true",
                        help="first run the untimed notebooks that fit side by side on the one GPU, under a CUDA MPS "
                             "daemon where there is one (LABKIT_REGEN_MPS=auto|on|off)")
    parser.add_argument("--gpus", type=int, default=None,
                        help="lanes, one per GPU (default: every visible GPU; 1 runs the steps one by one)")
    parser.add_argument("--fresh", action="store_true",
                        help="start a new regeneration (every step pending, searches from nothing) instead of "
                             "resuming; the record it replaces is kept in the new state's history. Only on the "
                             "first call: later calls resume from it")
    parser.add_argument("--status", action="store_true",
                        help="print the plan and exit (with --fresh: the plan a fresh regeneration starts with)")


def run(args) -> int:
    """Run (or, with ``--status``, describe) one call from parsed arguments; 0 when no step is left, 3 when
    work is left for another call. Bad arguments raise ValueError."""
    if args.status:
        state, found = load_state(), state_file()
        print(status_text(fresh_state(state, found)) if args.fresh else status_text(state, _shown(found)))
        return 0
    if args.budget <= PACK_MARGIN:
        raise ValueError(f"--budget {args.budget}: must be > {PACK_MARGIN} seconds")
    if args.gpus is not None and args.gpus < 1:
        raise ValueError(f"--gpus {args.gpus}: must be an int >= 1")
    state = regenerate(args.budget, args.only, parallel=args.parallel, fresh=args.fresh, gpus=args.gpus)
    return 0 if not pending(state, args.only) else 3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.maintain.regenerate", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ValueError as err:
        parser.error(str(err))


if __name__ == "__main__":
    sys.exit(main())
