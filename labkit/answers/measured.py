"""What the answers files of Lab 0 and Lab 3 (formats) share: where stored numbers came from (their JSON
provenance), paths shown relative to the project, and one test-set standard error per comparison."""
from __future__ import annotations

from pathlib import Path

from .. import settings as _settings
from ..readings.tables import test_set_se


def shown_path(path: str | Path) -> str:
    """``path`` as a reader of the project can find it: relative to the repository root, else to the
    figures folder (``$LABKIT_FIGURES_DIR/...``), else its bare name; never an absolute machine path."""
    p = Path(path).resolve()
    for base, prefix in ((_settings.REPO_ROOT, ""), (_settings.figures_dir(), "$LABKIT_FIGURES_DIR/")):
        try:
            return prefix + p.relative_to(Path(base).resolve()).as_posix()
        except ValueError:
            continue
    return p.name


def pair_se(a: float, b: float, n: int) -> float:
    """One test-set standard error for comparing accuracies ``a`` and ``b`` on the same ``n`` reviews:
    sqrt(p (1 - p) / n) at whichever of the two lies nearer 0.5 (the larger of their two errors)."""
    return max(test_set_se(a, n), test_set_se(b, n))


def compare(a: float, b: float, n: int) -> dict:
    """``a - b`` against one standard error: ``diff``, ``se``, ``ses`` (diff / se) and ``tie`` (within 2 SE)."""
    se = pair_se(a, b, n)
    diff = a - b
    return {"diff": diff, "se": se, "ses": diff / se if se > 0 else float("inf"), "tie": abs(diff) <= 2 * se}


def commit(prov: dict) -> str:
    """The measuring commit as the JSON records it (a missing one says so; ``notes`` quotes why)."""
    c = prov.get("git_commit")
    if c and c != "HEAD":
        return f"commit `{c[:12]}`" + (" with uncommitted changes" if c.endswith("+dirty") else "")
    return "commit not recorded (`git_commit` is null" + ("" if prov.get("commit_note") else ", and no note says why") + ")"


def source_line(path: str, payload: dict) -> str:
    """One bullet: which device, profile, library versions, commit and date produced a stored JSON."""
    p, s = payload["provenance"], payload.get("settings") or {}
    v = p.get("versions") or {}
    cuda = f" + CUDA {v['cuda']}" if v.get("cuda") and "cpu" not in str(p.get("device", "")).lower() else ""
    return (f"- `{path}`: measured on {p.get('device', 'an unrecorded device')}, profile `{s.get('profile', '?')}`, "
            f"torch {v.get('torch', '?')}{cuda}, created {p.get('created', '?')}; {commit(p)}.")


def notes(sources: dict[str, dict | None]) -> str:
    """The JSONs' ``commit_note``s, quoted once each (with the files that carry it when they differ)."""
    by_note: dict[str, list[str]] = {}
    for path, payload in sources.items():
        note = ((payload or {}).get("provenance") or {}).get("commit_note")
        if note:
            by_note.setdefault(note, []).append(path)
    if not by_note:
        return ""
    if len(by_note) == 1:
        note, paths = next(iter(by_note.items()))
        return f"`commit_note` of {', '.join(f'`{p}`' for p in paths)}: \"{note}\""
    return "`commit_note`s:\n\n" + "\n".join(f"- {', '.join(f'`{p}`' for p in paths)}: \"{note}\""
                                                   for note, paths in by_note.items())


def header(title: str, sources: dict[str, dict | None], how: str) -> str:
    """The top of an answers file: ``sources`` maps a shown JSON path to its payload (None: not stored)."""
    lines = [source_line(path, payload) for path, payload in sources.items() if payload is not None]
    missing = [path for path, payload in sources.items() if payload is None]
    if missing:
        lines.append("- not stored: " + ", ".join(f"`{m}`" for m in missing))
    note = notes(sources)
    return (f"# {title}\n\n_{how}_\n\nThe numbers and where they were measured:\n\n" + "\n".join(lines)
            + (f"\n\n{note}" if note else ""))


STORED = ("The prose below was re-rendered from the stored numbers listed here by `{module}` "
          "(`python -m labkit.redraw {lab} --answers`); nothing was measured while rendering it.")
