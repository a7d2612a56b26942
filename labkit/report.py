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


def show(fig) -> None:
    """Show a matplotlib Figure made outside pyplot (e.g. by labkit.plots.lab4_mxint8) in a notebook, as a PNG,
    whatever the backend; elsewhere do nothing (scripts save figures instead)."""
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        return
    if get_ipython() is not None:
        import io

        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        display(Image(buf.getvalue()))


def table(rows: list[dict], columns: list[str] | None = None, floatfmt: str = ".4f") -> str:
    """A Markdown table of ``rows`` (for ``say``)."""
    if not rows:
        return "(no rows)"
    columns = columns or list(rows[0])

    def fmt(v):
        return format(v, floatfmt) if isinstance(v, float) else str(v)

    head = "| " + " | ".join(columns) + " |\n| " + " | ".join("---" for _ in columns) + " |\n"
    return head + "\n".join("| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows)


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters for prose, never mid-word: it ends at the last whole
    sentence that fits when that keeps at least half, else at the last whole word, with an ellipsis."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    sentence = max(head.rfind(". "), head.rfind("; "))
    if sentence >= limit // 2:  # keep a full stop, drop a semicolon
        return head[:sentence + (head[sentence] == ".")] + " …"
    space = head.rfind(" ")
    cut = head[:space] if space > 0 else head
    return cut.rstrip(" ,;:-(") + "…"
