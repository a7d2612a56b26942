"""benchmarks/README.md names the benchmarks there are: every script under benchmarks/ is named on the page,
every script and JSON the page names exists (one written ``<commit>:benchmarks/...`` is a file of git history, a
retired probe, and that commit holds it), there are at most 15 scripts, and each one imports and parses ``--help``
on a CPU."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
BENCH = ROOT / "benchmarks"
README = BENCH / "README.md"
MOST = 15
SCRIPTS = sorted(p.relative_to(BENCH).as_posix() for p in BENCH.rglob("*.py") if "__pycache__" not in p.parts)
AREAS = sorted(p.name for p in BENCH.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
# a file under an area, written from benchmarks/ or from the root; a "<hex>:" before it names a commit
NAMED = re.compile(r"(?<![\w/.-])((?:[0-9a-f]{7,40}:)?(?:benchmarks/)?(?:" + "|".join(AREAS)
                   + r")/[\w.-]+\.(?:py|json))")


def named() -> tuple[set[str], set[str]]:
    """(files the page names in the tree, relative to benchmarks/; files it names at a commit)."""
    here, history = set(), set()
    for token in NAMED.findall(README.read_text()):
        commit, _, path = token.rpartition(":")
        (history if commit else here).add(path.removeprefix("benchmarks/"))
    return here, history


def test_every_script_is_named_on_the_page():
    here, _ = named()
    assert SCRIPTS and not set(SCRIPTS) - here, f"not in benchmarks/README.md: {sorted(set(SCRIPTS) - here)}"


def test_every_script_and_json_the_page_names_exists():
    here, history = named()
    missing = sorted(p for p in here if not (BENCH / p).is_file())
    assert not missing, f"benchmarks/README.md names files that are not in benchmarks/: {missing}"
    assert not history & set(SCRIPTS), f"named as retired but still here: {sorted(history & set(SCRIPTS))}"


def test_every_retired_file_the_page_cites_is_at_its_commit():
    """A probe's script or JSON named ``<commit>:benchmarks/...`` can be read back from git (a full clone)."""
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True)
    if shallow.returncode or shallow.stdout.strip() != "false":
        pytest.skip("not a full git clone: the cited commits may be absent")
    cited = {t for t in NAMED.findall(README.read_text()) if ":" in t}
    assert cited
    blobs = {t: "{}:benchmarks/{}".format(*t.split(":", 1)).replace("benchmarks/benchmarks/", "benchmarks/")
             for t in cited}
    gone = sorted(t for t, blob in blobs.items()
                  if subprocess.run(["git", "cat-file", "-e", blob], cwd=ROOT, capture_output=True).returncode)
    assert not gone, f"benchmarks/README.md cites files their commits do not hold: {gone}"


def test_at_most_15_scripts():
    assert len(SCRIPTS) <= MOST, f"{len(SCRIPTS)} scripts under benchmarks/ (at most {MOST}): {SCRIPTS}"


def test_the_pattern_reads_what_the_page_writes():
    text = ("`search/a.py --x`, `benchmarks/mxint8/b.json`, `8f565db:benchmarks/training/c.py`, "
            "figures/lab4/d.json, labkit/search/e.py")
    found = set(NAMED.findall(text))
    assert found == {"search/a.py", "benchmarks/mxint8/b.json", "8f565db:benchmarks/training/c.py"}, found


# each script run as __main__ with --help, in one fresh interpreter (torch imported once): its exit code and output
HELP = r"""
import contextlib, io, json, runpy, sys
out = {}
for script in sys.argv[1:]:
    sys.argv, buf, code = [script, "--help"], io.StringIO(), None
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        code = stop.code
    except BaseException as err:
        code = f"{type(err).__name__}: {err}"
    out[script] = [code, buf.getvalue()[:1500]]
print("HELP " + json.dumps(out))
"""


def test_each_script_parses_help_on_a_cpu():
    done = subprocess.run([sys.executable, "-c", HELP, *(str(BENCH / s) for s in SCRIPTS)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.split("HELP ", 1)[1])
    bad = {s: r for s, r in results.items() if r[0] not in (0, None) or "usage:" not in r[1]}
    assert len(results) == len(SCRIPTS) and not bad, bad
