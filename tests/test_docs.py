"""The README and CONTRIBUTING stay true to the tree: the quick start is the two Makefile commands a fresh machine
runs, each reader has a short walk linking to docs/, every relative link resolves, the layout table names every
package of labkit/, the README states no timings, and every path and command the two files name exists."""
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
README = ROOT / "README.md"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
READERS = ("For students", "For teaching staff", "For maintainers")
ADDING = ("A new exercise", "A new number format", "A new lab", "A new benchmark")
# a duration: 30 s, 24.2 min, 2,644 seconds, 1 h (not "2 CPU cores", "Lab 3 search", "int8")
TIMING = re.compile(r"\b\d[\d,.]*\s?(?:ms|s|secs?|seconds?|min|mins|minutes?|h|hours?)\b")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^ *```[^\n]*\n(.*?)^ *```", re.S | re.M)
SPAN = re.compile(r"`([^`]+)`")
REPO_DIRS = ("labkit", "tests", "notebooks", "docs", "tools", "benchmarks", "csrc", "figures", ".ci")
NUMBERS = {2: "two", 3: "three", 4: "four"}


def sections(text: str) -> dict[str, str]:
    """``## heading`` -> the text under it, up to the next one."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def fenced_commands(text: str) -> list[str]:
    """The command lines of the fenced code blocks in ``text``, comments dropped."""
    lines = (line.split("#")[0].strip() for block in FENCE.findall(text) for line in block.splitlines())
    return [line for line in lines if line]


def code(text: str) -> list[str]:
    """What ``text`` writes as code: each fenced command line and each inline code span."""
    return fenced_commands(text) + SPAN.findall(FENCE.sub("", text))


def makefile_targets() -> dict[str, str]:
    """Each Makefile target -> its recipe."""
    targets, current = {}, None
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"([A-Za-z][\w-]*):(?!=)", line)
        if m:
            current = m[1]
            targets[current] = ""
        elif line.startswith("\t") and current:
            targets[current] += line.strip() + "\n"
        else:
            current = None
    return targets


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a markdown file."""
    text = FENCE.sub("", path.read_text())
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def exists(path: str) -> bool:
    """A repository path, where ``<...>`` and ``*`` stand for any name: at least one file or folder matches."""
    pattern = re.sub(r"<[^>]*>", "*", path.rstrip("/"))
    pattern = "/".join(s if s == "**" else re.sub(r"\*+", "*", s) for s in pattern.split("/"))
    found = list(ROOT.glob(pattern)) if "*" in pattern else [ROOT / pattern]
    return any(p.is_dir() if path.endswith("/") else p.exists() for p in found)


def named_paths(text: str) -> set[str]:
    """Every path of the repository that ``text`` names as code (first folder one of ``REPO_DIRS``)."""
    found = set()
    for snippet in code(text):
        for token in re.split(r"[\s\"'(),;=]+", snippet):
            token = token.rstrip(".:")
            if "/" in token and token.split("/")[0] in REPO_DIRS and "{" not in token:
                found.add(token)
    return found


# --- the README -----------------------------------------------------------------------------------------------

def test_the_quick_start_is_two_commands_a_fresh_machine_runs():
    """One command regenerates the figures on the offline default, one runs the tests (the ones CI runs)."""
    commands = fenced_commands(sections(README.read_text())["Quick start"])
    assert len(commands) == 2, commands
    targets = makefile_targets()
    run = [re.fullmatch(r"make ([\w-]+)", c) for c in commands]
    assert all(m and m[1] in targets for m in run), (commands, sorted(targets))
    run = {m[1] for m in run}
    figures = {t for t, recipe in targets.items() if re.search(r"labkit run --all\b", recipe)}
    ci = set(re.findall(r"^make ([\w-]+)$", (ROOT / ".ci" / "run").read_text(), re.M))
    assert run & figures and run & ci and run & figures != run & ci, (run, figures, ci)
    assert re.search(r"^export HF_HUB_OFFLINE \?= 1$", (ROOT / "Makefile").read_text(), re.M), "not offline"


@pytest.mark.parametrize("reader", READERS)
def test_each_reader_has_a_short_walk_that_links_to_the_detail(reader):
    body = sections(README.read_text())[reader]
    steps = re.findall(r"^\d+\. ", body, re.M)
    assert 3 <= len(steps) <= 7, f"{reader}: {len(steps)} steps"
    links = LINK.findall(body)
    assert any(link.startswith(("docs/", "CONTRIBUTING.md")) for link in links), (reader, links)


def test_every_labkit_package_is_in_the_layout_table_and_each_path_there_exists():
    """A row's first path is from the root; the short ones after it are its siblings (`labkit/readings/`,
    `answers/`)."""
    named, missing = set(), []
    for row in sections(README.read_text())["Layout"].splitlines():
        if not row.startswith("| `"):
            continue
        base = None
        for token in SPAN.findall(row.split("|")[1]):
            path = token if base is None else f"{base}/{token}".lstrip("./")
            base = base if base is not None else (Path(token.rstrip("/")).parent.as_posix())
            if not exists(path):
                missing.append(path)
            named.add(path.rstrip("/"))
    packages = {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "labkit").glob("*/__init__.py")}
    assert packages and not packages - named, f"not in the layout table: {sorted(packages - named)}"
    assert not missing, missing


def test_the_readme_states_no_timings():
    found = [line for line in README.read_text().splitlines() if TIMING.search(line)]
    assert not found, "timings belong in docs/: " + "; ".join(found)
    assert all(TIMING.search(s) for s in ("every 30 s", "24.2 min", "2,644 s", "(540 seconds)", "1 h"))
    assert not any(TIMING.search(s) for s in ("2 CPU cores", "Lab 3 search", "int8 sums", "lab4_mxint8", "H100"))


def test_the_readme_names_no_benchmark_script_or_gpu_runner_and_links_their_docs():
    text = README.read_text()
    assert not re.findall(r"benchmarks/[\w/]+\.py", text) and not re.findall(r"tools/gpu_\w+\.sh", text)
    links = set(LINK.findall(text))
    assert {"benchmarks/README.md", "docs/gpu-runs.md"} <= links


# --- links, paths and commands --------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [README, CONTRIBUTING, *DOCS], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(path):
    bad = []
    for target in LINK.findall(FENCE.sub("", path.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists() or not dest.is_relative_to(ROOT):
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading for #{anchor}")
    assert not bad, bad


@pytest.mark.parametrize("path", [README, CONTRIBUTING], ids=lambda p: p.name)
def test_every_path_named_exists(path):
    missing = sorted(p for p in named_paths(path.read_text()) if not exists(p))
    assert not missing, missing


def _subcommands() -> set[str]:
    return set(re.findall(r"\bsub\.add_parser\(\s*\"([\w-]+)\"", (ROOT / "labkit/cli/commands.py").read_text()))


def _runnable(module: str) -> bool:
    """``python -m module`` runs something: a labkit module with a ``__main__`` block or package with
    ``__main__.py``; another module (pytest) installed."""
    if module.split(".")[0] != "labkit":
        return importlib.util.find_spec(module) is not None
    path = ROOT / module.replace(".", "/")
    if (path / "__main__.py").is_file():
        return True
    source = path.with_suffix(".py")
    return source.is_file() and re.search(r"^if __name__ == [\"']__main__[\"']:", source.read_text(), re.M) is not None


def bad_commands(text: str) -> list[str]:
    """The commands ``text`` gives as code that name no Makefile target, labkit subcommand or runnable module."""
    targets, subcommands, bad = makefile_targets(), _subcommands(), []
    for snippet in code(text):
        words = snippet.split()
        for i, word in enumerate(words[:-1]):
            following = [w for w in words[i + 1:] if not w.startswith("-")]
            if word == "make" and words[i + 1] not in targets:
                bad.append(f"make {words[i + 1]}: no such Makefile target")
            elif (word == "labkit" or word.endswith("/labkit")) and following:
                if re.fullmatch(r"[a-z][\w-]*", following[0]) and following[0] not in subcommands:
                    bad.append(f"labkit {following[0]}: no such subcommand")
            elif word == "-m" and words[i - 1].endswith("python") and not _runnable(words[i + 1]):
                bad.append(f"python -m {words[i + 1]}: nothing to run")
    return bad


@pytest.mark.parametrize("path", [README, CONTRIBUTING], ids=lambda p: p.name)
def test_every_command_given_is_a_make_target_a_labkit_subcommand_or_a_runnable_module(path):
    assert not bad_commands(path.read_text()), bad_commands(path.read_text())


def test_the_command_check_catches_what_it_means():
    good = ("`make test`, `make lab PROFILE=smoke`, `.venv/bin/labkit grade subs/`, `labkit --debug run lab0`, "
            "`python -m labkit.redraw all`, `python -m labkit`, `.venv/bin/python -m pytest -q`, the `labkit` command")
    assert bad_commands(good) == []
    assert len(bad_commands("`make tests` and\n```bash\nlabkit regen  # a typo\npython -m labkit.redraws\n```\n")) == 3
    assert bad_commands("`python -m labkit.settings`")  # a module without a __main__ block


# --- CONTRIBUTING ----------------------------------------------------------------------------------------------

def test_contributing_has_a_section_for_each_thing_a_maintainer_adds():
    found = sections(CONTRIBUTING.read_text())
    assert set(ADDING) <= found.keys(), sorted(found)
    assert "labkit/exercises/lab<N>.py" in found["A new exercise"] and "pkgutil" in found["A new exercise"]


def test_contributing_states_the_rules_as_the_code_enforces_them():
    """The notebook cap is the smoke tests' constant, and an exercise with one mutant fewer than CONTRIBUTING says
    is refused at registration."""
    import dataclasses

    from labkit.exercises import core, registry

    exercise = sections(CONTRIBUTING.read_text())["A new exercise"]
    lab = sections(CONTRIBUTING.read_text())["A new lab"]
    cap = int(re.search(r"^MAX_CODE_LINES = (\d+)$", (ROOT / "tests/run/test_notebooks.py").read_text(), re.M)[1])
    assert f"at most {cap} code lines" in exercise and f"at most {cap} code lines" in lab
    least = next(n for n, word in NUMBERS.items() if f"At least {word} mutants" in exercise)
    good = next(iter(registry().values()))
    mutants = dict(list(good.mutants.items())[:least])
    core.validate(dataclasses.replace(good, mutants=mutants))
    with pytest.raises(ValueError, match=f"at least {least} mutants"):
        core.validate(dataclasses.replace(good, mutants=dict(list(mutants.items())[:least - 1])))
    for rule in ("At least three public cases", "Hidden cases are required", "call-time seam"):
        assert rule in exercise, rule
