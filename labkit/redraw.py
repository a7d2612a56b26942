"""Redraw every lab's figures and re-render every lab's answers from the stored JSON; nothing is measured and
no GPU is needed. One entry per notebook: the results it stores, how each figure is drawn from them
(``labkit.plots.<notebook>``), and its answers file (``render(payloads) -> markdown`` of
``labkit.answers``).

    python -m labkit.redraw all                     # every notebook's figures and answers (full profile)
    python -m labkit.redraw lab1 --answers          # Lab 1's two notebooks, answers only
    python -m labkit.redraw lab3_search --figures --profile quick
    python -m labkit.redraw lab0 --answers --stdout

``all`` with answers also writes ``docs/results.md`` and the closing answers of the executed notebooks
(``labkit.executed``).

A redrawn figure's JSON keeps its numbers, settings and the provenance of the run that measured them and
gains a ``drawn`` block (this commit, date, machine; what was drawn from what): ``results.redraw_figure``.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from . import records, settings
from .results import load_results, redraw_figure, result_dir

BY = "python -m labkit.redraw"
FROM = {"from": "numbers and settings of this file"}


# --- the tool ---------------------------------------------------------------------------------------------

def payloads_of(notebook: str, profile: str = "full", from_full: bool = False) -> dict[str, dict | None]:
    """``{result: stored payload or None}`` of ``notebook``'s results under ``profile``. ``from_full``: a result
    the record reads from the full profile when this profile has none (``Notebook.from_full``)."""
    rec = records.get(notebook)
    out = {name: load_results(rec.lab, name, profile) for name in rec.results}
    if from_full and profile != "full":
        out.update({n: load_results(rec.lab, n, "full") for n in rec.from_full if out.get(n) is None})
    return out


def render_answers(notebook: str, profile: str = "full") -> tuple[Path, str]:
    """``(answers file, text)`` of ``notebook`` from its stored results: ``labkit.answers.<notebook>.render
    (payloads, folder)``, the one answers signature."""
    rec = records.get(notebook)
    folder = result_dir(rec.lab, profile)
    render = importlib.import_module(f"labkit.answers.{notebook}").render
    text = render(payloads_of(notebook, profile, from_full=True), folder)
    return folder / rec.answers, text if text.endswith("\n") else text + "\n"


def plot(notebook: str, figure: str, payload: dict):
    """``figure`` of ``notebook`` drawn from ``payload`` (``{"numbers", "settings", "provenance"}``, a stored
    result's shape) by ``labkit.plots.<notebook>.plot_<figure>``: the one plot signature. A plot may set
    ``fig.labkit_drawn`` (a dict) to say more of what it drew from."""
    module = importlib.import_module(f"labkit.plots.{notebook}")
    return getattr(module, f"plot_{figure}")(payload)


def show(notebook: str, figure: str, numbers: dict, settings: dict) -> None:
    """Draw ``figure`` of ``notebook`` from the numbers a notebook just measured and save it with its JSON
    (``results.save_figure``). What a notebook calls to store and draw a result: the figure shows when the
    cell ends (matplotlib's inline backend), and returning None keeps the cell from printing more."""
    from .results import provenance, save_figure

    payload = {"numbers": numbers, "settings": settings, "provenance": provenance()}
    save_figure(plot(notebook, figure, payload), records.get(notebook).lab, figure, numbers, settings)


def close(notebook: str, settings: dict) -> None:
    """A notebook's closing call: store its readings, write its answers from them and show them (returning None,
    so the cell shows them once)."""
    from .report import say

    _, text = write_answers(notebook, settings["profile"])
    say(text.split("\n\n", 2)[-1])  # as answers_body: below the title and the line saying how the file was made


def store_readings(notebook: str, profile: str = "full") -> list:
    """Compute ``notebook``'s readings from its stored numbers and store them in its result JSON (each
    reading in the result it reads, ``Reading.source``); returns them."""
    from . import readings
    from .results import store_readings as _store

    payloads = payloads_of(notebook, profile)
    found = readings.compute(notebook, payloads)
    for name, rows in readings.by_source(found).items():
        if payloads.get(name) is None:
            raise ValueError(f"{notebook}: reading(s) {[r['key'] for r in rows]} belong to {name}.json, which is "
                             f"not stored ({profile}); allowed sources: {[n for n, p in payloads.items() if p]}")
        _store(records.get(notebook).lab, name, rows, profile)
    return found


def write_answers(notebook: str, profile: str = "full") -> tuple[Path, str]:
    """Store ``notebook``'s readings, then render and write its answers from them (what a notebook's closing
    cell and ``python -m labkit.redraw <notebook> --answers`` do)."""
    store_readings(notebook, profile)
    path, text = render_answers(notebook, profile)
    path.write_text(text)
    return path, text


def answers_body(notebook: str) -> str:
    """What a notebook's closing cell shows: its answers file below the title and the line saying how it was made."""
    return render_answers(notebook)[1].split("\n\n", 2)[-1]


def redraw_figures(notebook: str, profile: str = "full", only: list[str] | None = None) -> list[Path]:
    """Redraw ``notebook``'s stored figures (``only``: some of them); returns the files written. A figure whose
    JSON is not stored is skipped and said so."""
    rec = records.get(notebook)
    payloads = payloads_of(notebook, profile)
    written = []
    for name in rec.figures:
        if only and name not in only:
            continue
        if payloads.get(name) is None:
            print(f"{notebook}: {name}.json is not stored ({profile}): not redrawn", flush=True)
            continue
        fig = plot(notebook, name, payloads[name])
        drawn = {"by": f"{BY} {notebook}", **FROM, **getattr(fig, "labkit_drawn", {})}
        written += list(redraw_figure(fig, rec.lab, name, drawn, profile).values())
        import matplotlib.pyplot as plt

        plt.close(fig)
    return written


def select(what: str) -> list[str]:
    """Notebooks named by ``what``: ``all``, a lab (``lab1``) or a notebook."""
    keys = records.records()
    chosen = [key for key in keys if what in ("all", key, key.split("_")[0])]
    if not chosen:
        raise ValueError(f"{what!r}: allowed values are 'all', a lab ({', '.join(sorted({k.split('_')[0] for k in keys}))}) "
                         f"or a notebook ({', '.join(keys)})")
    return chosen


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m labkit.redraw", description=__doc__.split("\n\n")[0])
    ap.add_argument("what", help="all, a lab (lab0 ... lab4) or a notebook")
    ap.add_argument("--profile", default="full", choices=("smoke", "quick", "full"))
    ap.add_argument("--figures", action="store_true", help="figures only")
    ap.add_argument("--answers", action="store_true", help="answers only")
    ap.add_argument("--only", action="append", help="a figure name (repeatable)")
    ap.add_argument("--stdout", action="store_true", help="print the answers instead of writing them")
    args = ap.parse_args(argv)
    try:
        notebooks = select(args.what)
    except ValueError as err:
        ap.error(str(err))
    do_figures, do_answers = (not args.answers or args.figures), (not args.figures or args.answers)
    for nb in notebooks:
        rec = records.get(nb)
        if not any((result_dir(rec.lab, args.profile) / f"{name}.json").is_file() for name in rec.results):
            print(f"{nb}: no results stored ({args.profile}): nothing to redraw", flush=True)
            continue
        if do_figures and not args.stdout:
            for path in redraw_figures(nb, args.profile, args.only):
                print(path, flush=True)
        if do_answers:
            if args.stdout:
                sys.stdout.write(render_answers(nb, args.profile)[1])
            else:
                path, _ = write_answers(nb, args.profile)
                print(path, flush=True)
    if do_answers and args.what == "all" and args.profile == "full" and not args.stdout:
        from . import executed
        from .readings import page  # every notebook's readings: the results page is theirs

        print(page.write(records.records()), flush=True)
        if settings.figures_dir() == settings.REPO_ROOT / "figures":  # the committed results, not a copy's
            for path in executed.refresh(answers_body):  # the executed notebooks' closing answers, as worded now
                print(path, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
