"""Notebook prose that cites the numbers the notebook just computed (Markdown rendered from f-strings)."""
from __future__ import annotations


def say(markdown: str) -> None:
    """Render ``markdown`` in a notebook, print it elsewhere (papermill logs, scripts)."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display

        if get_ipython() is not None:
            display(Markdown(markdown))
            return
    except ImportError:
        pass
    print(markdown)


def table(rows: list[dict], columns: list[str] | None = None, floatfmt: str = ".4f") -> str:
    """A Markdown table of ``rows`` (for ``say``)."""
    if not rows:
        return "(no rows)"
    columns = columns or list(rows[0])

    def fmt(v):
        return format(v, floatfmt) if isinstance(v, float) else str(v)

    head = "| " + " | ".join(columns) + " |\n| " + " | ".join("---" for _ in columns) + " |\n"
    return head + "\n".join("| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows)
