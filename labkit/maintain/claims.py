"""The labs' claims, checked against stored result JSON (``figures/<lab>/<name>.json``) through readings.

Per notebook, ``from_readings`` recomputes its readings (``labkit.readings``) from the stored numbers: the
readings stored beside them must be those (none missing, none stale), and every reading that states a claim
(``Reading.expect``) must hold. Across notebooks: one SFT accuracy per seed within one regeneration
(``same_sft``), and enough training seeds behind every trained-model verdict (``seeded``). Nothing here reads
rendered text: the tests check that each notebook's prose states its readings.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .. import records
from ..readings import seeds as _seeds


@dataclass(frozen=True)
class Claim:
    lab: str
    name: str
    holds: bool
    detail: str


def same_sft(payloads: dict[str, dict]) -> list[Claim]:
    """One SFT model per training seed, one accuracy: the labs that report it (``{name: (numbers' SFT dict or
    value holder, provenance)}`` as per-seed lists) agree to the review where one regeneration made them (same
    commit); runs from different commits may differ, so each commit's results are compared among themselves."""
    by_commit: dict[str, dict] = {}
    for name, (accs, prov) in payloads.items():
        if prov.get("git_commit"):
            by_commit.setdefault(prov["git_commit"], {})[name] = tuple(accs) if isinstance(accs, (list, tuple)) else (accs,)
    out = []
    for commit, accs in sorted(by_commit.items()):
        if len(accs) < 2:
            continue
        common = min(len(v) for v in accs.values())  # compare the seeds every lab ran
        spread = max(max(v[i] for v in accs.values()) - min(v[i] for v in accs.values()) for i in range(common))
        out.append(Claim("all", "the SFT model scores the same in every lab of one regeneration", spread < 1e-9,
                         f"at {commit[:7]}: " + ", ".join(f"{k} {'/'.join(f'{a:.5f}' for a in v)}"
                                                          for k, v in accs.items())))
    return out


MIN_SEEDS = 3


def seeded(figures: Path) -> list[Claim]:
    """The full-profile results whose verdicts compare trained models (each record's ``seeded``) rest on at
    least ``MIN_SEEDS`` training seeds (a one-seed result cannot say how much of a difference is the seed)."""
    counts = {f"{r.lab}/{name}": _seeds.count(n) for r in records.records().values() for name in r.seeded
              if (n := _numbers(Path(figures) / r.lab / f"{name}.json")) is not None}
    few = {k: v for k, v in counts.items() if v < MIN_SEEDS}
    return [Claim("all", f"trained-model verdicts rest on >= {MIN_SEEDS} training seeds", not few,
                  f"fewer: {few}" if few else ", ".join(f"{k} {v}" for k, v in counts.items()))] if counts else []


def _numbers(path: Path) -> dict | None:
    return json.loads(path.read_text())["numbers"] if path.is_file() else None


def _payload(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def notebook_payloads(figures: Path, notebook: str) -> dict[str, dict | None]:
    """``{result: stored payload or None}`` of ``notebook`` under ``figures`` (``<lab>/<result>.json``)."""
    nb = records.get(notebook)
    return {name: _payload(Path(figures) / nb.lab / f"{name}.json") for name in nb.results}


def from_readings(figures: Path) -> list[Claim]:
    """Per notebook with stored results: its stored readings are the readings of its stored numbers (none
    missing, none stale), and every reading that states a claim (``Reading.expect``) holds."""
    from .. import readings

    out = []
    for notebook, nb in records.records().items():
        payloads = notebook_payloads(figures, notebook)
        if all(p is None for p in payloads.values()):
            continue
        found = readings.compute(notebook, payloads)
        if not found:
            continue
        off = readings.mismatches(found, payloads)
        out.append(Claim(nb.lab, f"{notebook}: the stored readings are its numbers' readings", not off,
                         "; ".join(off[:4]) + (f" (+{len(off) - 4} more)" if len(off) > 4 else "")
                         if off else f"{len(found)} readings"))
        out += [Claim(nb.lab, f"{notebook}: {r.key}", r.holds, f"{r.verdict} (expected {'/'.join(r.expect)}): {r.says}")
                for r in found if r.expect]
        out += [Claim(nb.lab, f"{notebook}: {key}", False, f"claimed {'/'.join(want)}, but its numbers give no "
                      f"reading {key!r}: re-word the finding from what they give")
                for key, want in readings.unread_claims(notebook, found, payloads).items()]
    return out


def bit_exact_benchmark(figures: Path) -> list[Claim]:
    """The bandwidth benchmark's rows (``python -m labkit.kernels.bandwidth``: every group size, not one
    notebook's sweep) are bit-exact against the reference."""
    path = Path(figures) / "lab4" / "mxint8_bandwidth.json"
    if not path.is_file():
        return []
    rows = json.loads(path.read_text())["rows"]
    bad = [r for r in rows if not r.get("bit_exact")]
    return [Claim("lab4", "every MXINT8 dequantization the bandwidth benchmark measured is bit-exact", not bad,
                  f"{len(rows)} rows" + (f", {len(bad)} not bit-exact" if bad else ""))]


def check_all(figures: Path) -> list[Claim]:
    """Every check whose full-profile results exist under ``figures``."""
    figures = Path(figures)
    out = from_readings(figures)
    sft = {}
    for r in records.records().values():
        if r.sft is None:
            continue
        name, where, key = r.sft
        path = figures / r.lab / f"{name}.json"
        if path.is_file():
            d = json.loads(path.read_text())
            holder = d["numbers"][where] if where else d["numbers"]
            sft[f"{r.lab}/{name}"] = (_seeds.values(holder, key, _seeds.count(d["numbers"])), d.get("provenance") or {})
    out += same_sft(sft)
    out += seeded(figures)
    for r in records.records().values():  # each notebook's own checks
        for check in r.claims:
            out += records.resolve(check)(figures)
    return out


def main(argv=None) -> int:
    """``python -m labkit.maintain.claims [FIGURES]``: print every claim's verdict; exit 1 if one fails."""
    import sys

    from .. import settings

    args = sys.argv[1:] if argv is None else argv
    figures = Path(args[0]) if args else settings.figures_dir()
    found = check_all(figures)
    for c in found:
        print(f"{'ok  ' if c.holds else 'FAIL'} {c.lab}: {c.name} ({c.detail})")
    if not found:  # nothing checked is not a pass
        print(f"FAIL no claim found: {figures} holds no stored results with readings (the teaching staff's "
              "checkout has them in figures/)")
        return 1
    return 0 if all(c.holds for c in found) else 1


if __name__ == "__main__":
    raise SystemExit(main())
