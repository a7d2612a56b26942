"""House rules the tree keeps: history lives in git and in results JSON, not in code."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a hex word of 7-40 characters with a letter and a digit (a commit), not part of a number like 1.17e-38
COMMIT = re.compile(r"(?<![.\w])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w.])")
ISSUE = re.compile(r"\b(issue|session)s? #?\d+", re.IGNORECASE)


def _code():
    for folder in ("labkit", "notebooks/src", "tools"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".sh", ".cu", ".cpp", ".h") and "__pycache__" not in path.parts:
                yield path


def test_no_commit_hashes_or_issue_numbers_in_code():
    found = []
    for path in _code():
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if COMMIT.search(line) or ISSUE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()[:100]}")
    assert not found, found


def test_the_rule_catches_what_it_means():
    assert COMMIT.search("measured at 2d1f34a on an H100") and COMMIT.search("(commit d213c6d67d5e)")
    assert not COMMIT.search("sub = a < 1.1754943508222875e-38") and not COMMIT.search("x = 8388736.0")
    assert ISSUE.search("see issue 22") and not ISSUE.search("an issue with the mask")


def test_readme_is_short_and_holds_no_history():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200, "README over 200 lines: move measurement narrative to docs/"
    found = [line for line in text.splitlines() if COMMIT.search(line) or ISSUE.search(line)]
    assert not found, found
