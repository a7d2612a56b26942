"""House rules the tree keeps: history lives in git, in results JSON and in the narrative docs, not in code."""
import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())  # wherever tests/ nests it
# a hex word of 7-40 characters with a letter and a digit (a commit), not part of a number like 1.17e-38
COMMIT = re.compile(r"(?<![.\w])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w.])")
ISSUE = re.compile(r"\b(issue|session)s? #?\d+", re.IGNORECASE)
SOURCE = (".py", ".sh", ".cu", ".cuh", ".cpp", ".h")
# every line of these: the library, notebook sources, tools, benchmark scripts (not their JSON, which names its
# commit, nor benchmarks/README.md and MXINT8_NOTES.md, which may tell how a number moved) and the CUDA sources
CODE = ("labkit", "notebooks/src", "tools", "benchmarks", "csrc")


def _sources(folder: str):
    for path in sorted((ROOT / folder).rglob("*")):
        if path.suffix in SOURCE and path.is_file() and "__pycache__" not in path.parts:
            yield path


def _history(lines, where: str, first: int = 1) -> list[str]:
    return [f"{where}:{i}: {line.strip()[:100]}" for i, line in enumerate(lines, first)
            if COMMIT.search(line) or ISSUE.search(line)]


def _prose(source: str):
    """(line, text) of a Python file's comments and docstrings: a test's strings may be made-up commits (the
    fixtures of provenance tests), its prose may not name real ones."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            doc = node.body[0]
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
                yield doc.lineno, doc.value.value
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string


def test_no_commit_hashes_or_issue_numbers_in_code():
    found = []
    for folder in CODE:
        for path in _sources(folder):
            found += _history(path.read_text().splitlines(), path.relative_to(ROOT))
    assert not found, found


def test_no_commit_hashes_or_issue_numbers_in_the_tests_prose():
    found = []
    for path in _sources("tests"):
        if path.suffix != ".py" or path == Path(__file__).resolve():  # this file's own examples below
            continue
        for line, text in _prose(path.read_text()):
            found += _history(text.splitlines(), path.relative_to(ROOT), line)
    assert not found, found


def test_the_rule_catches_what_it_means():
    assert COMMIT.search("measured at 2d1f34a on an H100") and COMMIT.search("(commit d213c6d67d5e)")
    assert not COMMIT.search("sub = a < 1.1754943508222875e-38") and not COMMIT.search("x = 8388736.0")
    assert ISSUE.search("see issue 22") and not ISSUE.search("an issue with the mask")
    prose = dict(_prose('"""Module (issue 7)."""\nsha = "2d1f34a"  # measured at 0b1e956\n\n\ndef f():\n'
                        '    """At 46250f0."""\n'))
    assert prose == {1: "Module (issue 7).", 2: "# measured at 0b1e956", 6: "At 46250f0."}  # not the string


def test_the_rule_covers_the_edges():
    """The scanned folders hold what they should: benchmark scripts, the CUDA headers, the test files."""
    scanned = {p.relative_to(ROOT).as_posix() for folder in CODE for p in _sources(folder)}
    assert "benchmarks/mxint8/fused_linear.py" in scanned and "csrc/mxint8_dequant.cuh" in scanned
    assert not any(p.endswith((".json", ".md")) for p in scanned)
    assert Path(__file__).resolve() in set(_sources("tests"))


def test_readme_is_short_and_holds_no_history():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150, "README over 150 lines: move the detail to docs/ and link it"
    found = [line for line in text.splitlines() if COMMIT.search(line) or ISSUE.search(line)]
    assert not found, found
