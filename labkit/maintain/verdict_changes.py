"""What a regeneration changed in the verdicts: every notebook's readings recomputed from two trees of stored
results (``figures/<lab>/<result>.json``), e.g. the committed results of an earlier commit and the checkout's, and
the readings whose verdict differs, appeared or went. The closing note of a regeneration reads this.

    python -m labkit.maintain.verdict_changes REV      # REV's committed figures/ against the checkout's
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from .. import records
from ..readings import core
from .claims import notebook_payloads

ROOT = Path(__file__).resolve().parents[2]


def changes(old_root: Path, new_root: Path, notebooks=None) -> dict[str, dict]:
    """Per notebook with readings: ``{"readings": n new, "changed": [(key, old verdict or None, new or None)]}``."""
    out = {}
    for nb in notebooks or records.records():
        if core.of_notebook(nb) is None:
            continue
        old = {r.key: r.verdict for r in core.compute(nb, notebook_payloads(Path(old_root) / "figures", nb))}
        new = {r.key: r.verdict for r in core.compute(nb, notebook_payloads(Path(new_root) / "figures", nb))}
        out[nb] = {"readings": len(new),
                   "changed": [(k, old.get(k), new.get(k)) for k in sorted(old.keys() | new.keys())
                               if old.get(k) != new.get(k)]}
    return out


def committed_figures(rev: str, into: Path) -> Path:
    """``rev``'s committed ``figures/`` unpacked under ``into`` (``git archive``); returns ``into``."""
    try:
        blob = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "figures"], check=True,
                              capture_output=True).stdout
    except subprocess.CalledProcessError as err:
        raise SystemExit(f"verdict_changes: git archive {rev!r} failed: {err.stderr.decode().strip()}") from err
    with tempfile.TemporaryFile() as f:
        f.write(blob)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            try:
                tar.extractall(into, filter="data")
            except TypeError:  # Python before 3.10.12 / 3.11.4: no extraction filters (git's own archive)
                tar.extractall(into)
    return into


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev", help="the commit whose committed figures/ are the old side")
    ap.add_argument("--notebooks", nargs="*", help="only these notebooks (default: every one with readings)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        found = changes(committed_figures(args.rev, Path(tmp)), ROOT, args.notebooks)
    for nb, c in found.items():
        print(f"{nb}: {c['readings']} readings, {len(c['changed'])} changed")
        for key, old, new in c["changed"]:
            print(f"    {key}: {old or '(none)'} -> {new or '(none)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
