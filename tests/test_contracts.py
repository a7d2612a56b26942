"""One contract per kind, over every record: readings hold every verdict, answers only word them, lab modules
compute without reaching into another lab, plots draw payloads. Read from the code's own imports (``ast``), so a
leak fails here with the module and the name that leaked."""
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
