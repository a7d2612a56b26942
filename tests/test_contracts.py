"""One contract per kind, over every record: readings hold every verdict, answers only word them, lab modules compute
numbers (no prose: narrate words them) without reaching into another lab, plots draw payloads. Read from the code's
own imports (``ast``), so a leak fails here with the module and the name that leaked."""
import ast
import importlib
from pathlib import Path

import pytest

from labkit import readings, records
from labkit.readings import VERDICTS, Reading
from labkit.results import load_results

PKG = Path(__file__).resolve().parents[1] / "labkit"
# what an answers module may take from the statistics: the rule in words, never a function that decides
WORDS_OF_STATS = {"IN_WORDS"}
# functions that decide a verdict: only readings call them
DECIDES = {"within_noise", "at_chance", "difference", "welch", "compare", "check", "noisy"}


def imports(path: Path) -> list[tuple[str, set[str]]]:
    """(absolute module, names taken from it) of every import in ``path``, functions' own imports included."""
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    package = parts[:-1] if parts[-1] != "__init__" else parts
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, set()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            out.append((module, {a.name for a in node.names}))
    return out


def modules(kind: str) -> list[Path]:
    return sorted(p for p in (PKG / kind).glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", modules("answers"), ids=lambda p: p.stem)
def test_an_answers_module_imports_no_lab_and_no_deciding_statistics(path):
    for module, names in imports(path):
        assert not module.startswith("labkit.labs"), f"{path.name} imports {module}: answers word readings"
        if module == "labkit.readings.stats":
            assert names <= WORDS_OF_STATS, f"{path.name} takes {names - WORDS_OF_STATS} from the statistics"
        assert not names & DECIDES, f"{path.name} imports {names & DECIDES} from {module}: readings decide"


@pytest.mark.parametrize("path", modules("narrate"), ids=lambda p: p.stem)
def test_what_a_notebook_says_while_running_needs_no_lab_no_key_and_no_deciding_statistics(path):
    """narrate ships to students with the notebooks: it may not reach the answers (the key) nor decide."""
    for module, names in imports(path):
        assert not module.startswith(("labkit.labs", "labkit.answers")), f"{path.name} imports {module}"
        assert module != "labkit.readings.stats" and not names & DECIDES, f"{path.name} takes {names} from {module}"


@pytest.mark.parametrize("path", modules("labs"), ids=lambda p: p.stem)
def test_a_lab_module_imports_no_other_labs_module_nor_answers(path):
    lab = path.stem.split("_")[0]
    for module, _ in imports(path):
        assert not module.startswith("labkit.answers"), f"{path.name} imports {module}: labs compute, answers word"
        if module.startswith("labkit.labs."):
            other = module.split(".")[2].split("_")[0]
            assert other in (lab, "per"), f"{path.name} imports {module}: another lab's code (share it via a package)"


# what a lab module may not define or take: words (a notebook's are labkit.narrate's, the answers' labkit.answers')
WORDING_SUFFIXES = ("_text", "_line", "_lines", "_table", "_tables", "_sentence", "_words")
WORDING_TOOLS = {"table", "say"}  # labkit.report's: draw a table, show Markdown
# a string with one of these is prose, not a key, a label, a list or a path: markup, a line break, a sentence's
# punctuation
PROSE_MARKS = ("**", "`", "\n", ". ", ": ", "; ")
# prose a lab stores in its payload, which the answers quote from the stored JSON: module.name -> where it is kept
STORED_WORDS = {"lab3_remeasure.TRAINING_SEED": "search_remeasured.json's training_seed"}


def _literal_text(node: ast.AST) -> list[str]:
    """Every literal piece of text under ``node`` (an f-string's constant parts included), an error's message
    aside (what a raise says is no return value)."""
    if isinstance(node, (ast.Raise, ast.Assert)):
        return []
    own = [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []
    return own + [text for child in ast.iter_child_nodes(node) for text in _literal_text(child)]


def _is_prose(text: str) -> bool:
    return any(mark in text for mark in PROSE_MARKS)


def _str_returned(ann: ast.AST | None) -> bool:
    """Whether a return annotation gives back a ``str``: ``str``, ``str | None``, ``Optional[str]``, a tuple with a
    ``str`` (a ``dict[str, ...]``'s keys are no return value)."""
    if isinstance(ann, ast.Name):
        return ann.id == "str"
    if isinstance(ann, ast.BinOp):
        return _str_returned(ann.left) or _str_returned(ann.right)
    if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id in ("tuple", "Optional",
                                                                                              "Union"):
        inner = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        return any(_str_returned(e) for e in inner)
    return False


def prose_in_lab(source: str, module: str = "") -> list[str]:
    """What a lab module's ``source`` holds of prose, each named: a function named as wording, labkit.report's
    ``table`` or ``say`` taken, a module-level string that is prose, a function that returns prose (a prose
    literal in its return, or anywhere in the body of one annotated to return ``str``, its docstring aside)."""
    tree, found = ast.parse(source), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("report"):
            found += [f"imports {a.name} from report" for a in node.names if a.name in WORDING_TOOLS]
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if node.name.endswith(WORDING_SUFFIXES):
            found.append(f"{node.name}(): named as wording")
            continue
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        returned = [s.value for b in body for s in ast.walk(b) if isinstance(s, ast.Return) and s.value is not None]
        scanned = body if _str_returned(node.returns) else returned
        prose = [text for b in scanned for text in _literal_text(b) if _is_prose(text)]
        if prose:
            found.append(f"{node.name}(): returns prose ({prose[0]!r})")
    for node in tree.body:  # the module's constants
        names = [ast.unparse(x) for x in node.targets] if isinstance(node, ast.Assign) else []
        if names and isinstance(node.value, (ast.Constant, ast.JoinedStr, ast.BinOp)) and not any(
                f"{module}.{n}" in STORED_WORDS for n in names):
            prose = [text for text in _literal_text(node.value) if _is_prose(text)]
            if prose:
                found.append(f"{', '.join(names)}: a prose constant ({prose[0]!r})")
    return found


@pytest.mark.parametrize("path", modules("labs"), ids=lambda p: p.stem)
def test_a_lab_module_returns_numbers_not_prose(path):
    """A notebook's words are labkit.narrate's (shipped with the notebooks), the answers' labkit.answers': a lab
    returns numbers, rows, keys and labels, so a wording changes without touching what is measured."""
    found = prose_in_lab(path.read_text(), path.stem)
    assert not found, f"{path.name}: " + "; ".join(found) + " (move the wording to labkit.narrate)"


def test_the_prose_contract_catches_prose_and_passes_keys():
    """It fails on each kind of prose a lab once held, and passes the keys, labels, paths and errors labs have."""
    prose = prose_in_lab('''
from ..report import table
NO_GPU = ("**No GPU.** " "none here")
def dot_text(d): return f"{d}"
def merge_check(m) -> str:
    gap = 1.0
    return f"layer 0: max |a - b| = {gap:.1e}"
def passes(m) -> tuple[dict, str]:
    lines = [f"count {m}"]  # a tuple's str: prose in the body counts
    return {}, "\\n".join(lines)
def note(n):
    return {"n": n, "said": f"{n} trials; none cached"}
''')
    assert [f.split(":")[0].split(" (")[0] for f in prose] == [
        "imports table from report", "dot_text()", "merge_check()", "passes()", "note()", "NO_GPU"]
    assert prose_in_lab('''
def study_tag(s) -> str:
    """A key: its docstring may say anything: like this."""
    return f"{s['seed']}-{s['profile']}"
def label(name, params) -> str:
    if not params:
        raise ValueError(f"{name}: no parameters. Give some.")
    return " ".join([name, *(f"{k} {params[k]}" for k in params)])
def error(e) -> str | None:
    return str(e)
def plan(names) -> tuple[dict[str, dict], list[dict]]:
    print(f"planning: {names}")  # progress, not returned: a dict[str, ...] gives back no str
    return {n: {} for n in names}, []
def row(counts):
    return {"formats": ", ".join(f"{k} x{v}" for k, v in counts.items())}
PATH = "figures/lab2/studies.journal.xz"
''') == []


@pytest.mark.parametrize("path", modules("plots"), ids=lambda p: p.stem)
def test_a_plot_module_draws_payloads_without_lab_code(path):
    for module, _ in imports(path):
        assert not module.startswith(("labkit.labs", "labkit.answers")), f"{path.name} imports {module}"


@pytest.mark.parametrize("path", modules("readings"), ids=lambda p: p.stem)
def test_a_readings_module_imports_neither_labs_nor_answers_nor_plots(path):
    for module, _ in imports(path):
        assert not module.startswith(("labkit.labs", "labkit.answers", "labkit.plots")), f"{path.name} imports {module}"


@pytest.mark.parametrize("notebook", list(records.records()))
def test_every_records_readings_are_readings_with_unique_keys_and_known_verdicts(notebook):
    rec = records.get(notebook)
    payloads = {name: load_results(rec.lab, name) for name in rec.results}
    if readings.of_notebook(notebook) is None:
        pytest.fail(f"{notebook} has no readings module (labkit.readings.{notebook})")
    found = readings.compute(notebook, payloads)
    assert all(isinstance(r, Reading) for r in found)
    keys = [r.key for r in found]
    assert len(keys) == len(set(keys)), f"{notebook}: repeated keys {sorted({k for k in keys if keys.count(k) > 1})}"
    assert {r.verdict for r in found} <= set(VERDICTS)
    assert {r.source for r in found} <= set(rec.results), f"{notebook}: a reading names a result it does not store"


@pytest.mark.parametrize("notebook", list(records.records()))
def test_every_record_has_its_answers_and_plots_modules(notebook):
    rec = records.get(notebook)
    assert callable(importlib.import_module(f"labkit.answers.{notebook}").render)
    if rec.figures:
        plots = importlib.import_module(f"labkit.plots.{notebook}")
        missing = [f for f in rec.figures if not callable(getattr(plots, f"plot_{f}", None))]
        assert not missing, f"labkit.plots.{notebook} draws no {missing}"


def test_the_contract_reads_imports_right():
    """The reader of imports resolves relative imports: a leak would not hide behind ``..``."""
    found = dict((m, n) for m, n in imports(PKG / "answers" / "lab2_search.py"))
    assert "labkit.readings.tables" in found and "sampler_rows" in found["labkit.readings.tables"]
