"""Land what one `tools/gpu_run.sh regen` call brought back, here, so it can be committed at once:

    python tools/land_gpu_call.py /work/.device/3      # the folder holding state.tgz and results.tgz

- state.tgz goes to .carry/ (carry it in the next call) and its state.json to
  notebooks/executed/full/regen_state.json (committed: the next session resumes from it); where state.tgz did
  not come back (too big for a call's return), the call's state.json alone is the record;
- for each step this call finished, the files it wrote that differ from the checkout are copied in: those its
  run lists (``files``, recorded where the step ran alone in the call), else the figures/<lab>/ files modified
  after the call started (the machine's tree copy puts the checkout's own, maybe older, files beside them).
  Where another step of the same folder ran in that call (steps side by side list no files), a notebook lands
  the files its record names (results, figures, answers), so an unfinished one's partial files do not mix in;
  a step without a record is then skipped, with a warning, if a step of its folder is unfinished. Its executed
  notebook is published (tools/publish_notebooks.py).
A call older than the landed state of the same regeneration is refused (it would put older results back).
Nothing is committed; `git status` shows what landed.
"""
import argparse
import filecmp
import json
import shutil
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from labkit.maintain import regenerate  # noqa: E402
from labkit.maintain.regen_results import epoch  # noqa: E402
import publish_notebooks  # noqa: E402

STATE_COPY = ROOT / "notebooks" / "executed" / "full" / "regen_state.json"


def lab_folder(step: str) -> str:
    """figures/<folder> a step writes: lab4_perf -> lab4; the MXINT8 benchmarks -> lab4."""
    return "lab4" if step.startswith("mxint8") else step.split("_", 1)[0]


def record_files(step: str, folder: str) -> set[str] | None:
    """figures/<folder> files the notebook ``step``'s record names: its results' JSON, its figures' images and its
    answers; None for a step without a record (a benchmark)."""
    from labkit import records

    try:
        rec = records.get(step)
    except KeyError:
        return None
    return ({f"{folder}/{r}.json" for r in rec.results} | {f"{folder}/{f}.{ext}" for f in rec.figures
                                                          for ext in ("png", "svg")} | {f"{folder}/{rec.answers}"})


def _refuse_older(state: dict, landed: Path) -> None:
    if not landed.is_file():
        return
    before = json.loads(landed.read_text())
    same = before.get("fresh", {}).get("started") == state.get("fresh", {}).get("started")
    if same and len(before.get("calls", [])) > len(state["calls"]):
        raise SystemExit(f"this call is {state['calls'][-1]['call']}, but {landed} already holds "
                         f"{before['calls'][-1]['call']} of the same regeneration: land calls in order")


def land(call_dir: Path, root: Path = ROOT) -> list[str]:
    notes = []
    state_copy = root / STATE_COPY.relative_to(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if (call_dir / "state.tgz").is_file():
            with tarfile.open(call_dir / "state.tgz") as tar:
                tar.extractall(tmp / "state", filter="data")
        else:  # state.tgz did not come back (over a call's size limit): the record alone, from state.json
            (tmp / "state" / "runs" / "regen").mkdir(parents=True)
            shutil.copy2(call_dir / "state.json", tmp / "state" / "runs" / "regen" / "state.json")
            notes.append("no state.tgz: .carry holds the record only (no journals, no seeds); resume on the same "
                         "warm machine, or from the committed record")
        with tarfile.open(call_dir / "results.tgz") as tar:
            tar.extractall(tmp / "results", filter="data")
        state = json.loads((tmp / "state" / "runs" / "regen" / "state.json").read_text())
        _refuse_older(state, state_copy)
        call = state["calls"][-1]["call"]
        started = epoch(state["calls"][-1]["started"]) - 1  # the stamp has whole seconds
        carry = root / ".carry"
        shutil.rmtree(carry, ignore_errors=True)
        shutil.copytree(tmp / "state", carry)
        state_copy.parent.mkdir(parents=True, exist_ok=True)
        state_copy.write_text(json.dumps(state, indent=1, sort_keys=True))
        runs = {name: next(r for r in e["runs"][::-1] if r["call"] == call)
                for name, e in state["steps"].items() if any(r["call"] == call for r in e["runs"])}
        unfinished = {lab_folder(n) for n, r in runs.items() if r["status"] != "done"}
        shared = {f for f, n in Counter(map(lab_folder, runs)).items() if n > 1}
        figures = tmp / "results" / "figures"
        for name, run in sorted(runs.items()):
            if run["status"] != "done":
                notes.append(f"{name}: {run['status']} in {call}: nothing landed")
                continue
            folder = lab_folder(name)
            if "files" in run:  # the step ran alone: exactly what it wrote (regenerate.written_since)
                wrote = run["files"]
            else:
                wrote = [f"{folder}/{f}" for f in regenerate.written_since(figures / folder, started)]
            if "files" not in run and folder in shared:  # which of the folder's new files are this step's
                named = record_files(name, folder)
                if named is None and folder in unfinished:
                    notes.append(f"{name}: done, but another figures/{folder} step ran unfinished in {call}: "
                                 "copy its files by hand")
                    continue
                wrote = wrote if named is None else [w for w in wrote if w in named]
            copied = []
            for w in sorted(wrote):
                f, dest = figures / w, root / "figures" / w
                if f.is_file() and (not dest.is_file() or not filecmp.cmp(f, dest, shallow=False)):
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, dest)
                    copied.append(dest.name)
            executed = tmp / "results" / "runs" / "full" / f"{name}.ipynb"
            if executed.is_file():
                publish_notebooks.publish(executed, root / "notebooks" / "executed" / "full")
            notes.append(f"{name}: done in {call}; figures: {', '.join(copied) or 'no change'}"
                         + ("; executed notebook published" if executed.is_file() else ""))
    notes.append(regenerate.status_text(state))
    return notes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("call_dir", type=Path)
    args = parser.parse_args(argv)
    if not (args.call_dir / "results.tgz").is_file() or not any(
            (args.call_dir / f).is_file() for f in ("state.tgz", "state.json")):
        parser.error(f"{args.call_dir}: needs results.tgz and state.tgz (or state.json, which gpu_run.sh regen "
                     "also writes): the folder a gpu_run.sh regen call returned")
    print("\n".join(land(args.call_dir)))
    # Lab 0's and Lab 3 formats' notebooks head their answers "written by the notebook"; the tests hold the
    # committed answers to the render of the committed JSON (tests/test_redraw.py)
    print("before committing: python -m labkit.redraw all --answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
