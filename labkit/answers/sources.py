"""Where stored numbers come from, from their JSON provenance: the line every answers file starts with."""
from __future__ import annotations

from ..report import table
from . import measured as _measured


def commit(provenance: dict) -> str:
    """The commit cell of a header table (one wording with ``measured.commit``, which the bullets use)."""
    text = _measured.commit(provenance)
    return text[len("commit "):] if text.startswith("commit `") else "not recorded"


def label(payload: dict | None, name: str = "") -> str:
    """One line: device, profile, torch, commit and date of a stored result (``save_results``' JSON)."""
    if payload is None:
        return f"no stored result `{name}`" if name else "no stored result"
    p, s = payload["provenance"], payload.get("settings") or {}
    return (f"{p['device']}, profile `{s.get('profile', '?')}`, torch {p['versions'].get('torch')}, "
            f"commit {commit(p)}, {p['created']}")


def header(title: str, payloads: dict[str, dict | None], notebook: str) -> str:
    """The top of an answers file: what measured each set of numbers, and how the prose was made."""
    rows = [{"numbers": f"`{name}.json`", "device": p["provenance"]["device"],
             "profile": (p.get("settings") or {}).get("profile", "?"), "commit": commit(p["provenance"]),
             "created": p["provenance"]["created"], "torch": p["provenance"]["versions"].get("torch")}
            for name, p in payloads.items() if p is not None]
    missing = [name for name, p in payloads.items() if p is None]
    return (f"# {title}\n\n_Rendered by `labkit.answers` from the stored numbers below (the JSON beside this "
            f"file), not measured while rendering (`python -m labkit.redraw`); `{notebook}` writes this file the "
            f"same way from the numbers of its run._\n\n"
            + table(rows) + (f"\n\nNot stored: {', '.join(f'`{m}`' for m in missing)}." if missing else "")
            + (f"\n\n{note}" if (note := _measured.notes({f"{k}.json": v for k, v in payloads.items()})) else ""))


# --- how a search's trials ran (``search.trial_provenance``) ------------------------------------------------

