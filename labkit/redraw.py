"""Redraw every lab's figures and re-render every lab's answers from the stored JSON; nothing is measured and
no GPU is needed. One entry per notebook: the results it stores, how each figure is drawn from them
(``labkit.plots.<notebook>``), and its answers file (``render(payloads) -> markdown`` of
``labkit.answers``).

    python -m labkit.redraw all                     # every notebook's figures and answers (full profile)
    python -m labkit.redraw lab1 --answers          # Lab 1's two notebooks, answers only
    python -m labkit.redraw lab3_search --figures --profile quick
    python -m labkit.redraw lab0 --answers --stdout

A redrawn figure's JSON keeps its numbers, settings and the provenance of the run that measured them and
gains a ``drawn`` block (this commit, date, machine; what was drawn from what): ``results.redraw_figure``.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .results import load_results, redraw_figure, result_dir

BY = "python -m labkit.redraw"
FROM = {"from": "numbers and settings of this file"}


@dataclass(frozen=True)
class Notebook:
    lab: str                       # figures/<lab>/
    names: tuple[str, ...]         # the stored results its answers and figures read
    answers: str                   # its answers file in figures/<lab>/
    render: str                    # "module:function": {name: payload} -> markdown
    figures: tuple[str, ...] = ()  # drawn by labkit.plots.<notebook>.plot_<figure>(payload)
    # answers that read more than the JSON (Lab 0: which graph files exist): "module:function" (profile) -> (path, text)
    render_file: str | None = None


def _fn(target: str) -> Callable:
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


NOTEBOOKS: dict[str, Notebook] = {
    "lab0_graphs_lora": Notebook("lab0", ("accuracy",), "answers.md", "labkit.answers.lab0:render",
                                 ("accuracy",), "labkit.answers.lab0:render_lab0"),
    "lab1_quantize": Notebook("lab1", ("quantization",), "quantize_answers.md", "labkit.answers.lab1:render_quantize",
                              ("quantization",)),
    "lab1_prune": Notebook("lab1", ("pruning",), "prune_answers.md", "labkit.answers.lab1:render_prune",
                           ("pruning",)),
    "lab2_search": Notebook("lab2", ("samplers", "compression_aware", "remeasured"), "answers.md", "labkit.answers.lab2:render",
                            ("samplers", "compression_aware")),
    "lab3_formats": Notebook("lab3", ("formats", "weight_snr"), "formats_answers.md", "labkit.answers.lab3_formats:render",
                             ("formats", "weight_snr"),
                             "labkit.answers.lab3_formats:render_lab3_formats"),
    "lab3_search": Notebook("lab3", ("search_integer", "search_formats", "search_pareto", "search_remeasured"), "search_answers.md",
                            "labkit.answers.lab3:render",
                            ("search_integer", "search_formats", "search_pareto")),
    "lab4_perf": Notebook("lab4", ("compile_cpu", "compile_cuda", "sdpa_cpu", "sdpa_cuda"), "perf_answers.md",
                          "labkit.answers.lab4_perf:render",
                          ("compile_cpu", "compile_cuda", "sdpa_cpu", "sdpa_cuda")),
    "lab4_mxint8": Notebook("lab4", ("mxint8_format", "mxint8_tiling", "mxint8_bandwidth_plot", "mxint8_memory",
                                     "mxint8_accuracy"), "mxint8_answers.md", "labkit.answers.lab4_mxint8:render",
                            ("mxint8_tiling", "mxint8_memory", "mxint8_bandwidth_plot", "mxint8_accuracy")),
}


# --- the tool ---------------------------------------------------------------------------------------------

def payloads_of(notebook: str, profile: str = "full") -> dict[str, dict | None]:
    nb = NOTEBOOKS[notebook]
    return {name: load_results(nb.lab, name, profile) for name in nb.names}


def render_answers(notebook: str, profile: str = "full") -> tuple[Path, str]:
    """``(answers file, text)`` of ``notebook`` from its stored results."""
    nb = NOTEBOOKS[notebook]
    if nb.render_file:
        path, text = _fn(nb.render_file)(profile)
    else:
        path, text = result_dir(nb.lab, profile) / nb.answers, _fn(nb.render)(payloads_of(notebook, profile))
    return path, text if text.endswith("\n") else text + "\n"


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
    save_figure(plot(notebook, figure, payload), NOTEBOOKS[notebook].lab, figure, numbers, settings)


def close(notebook: str, settings: dict) -> str:
    """A notebook's closing call: store its readings, write its answers from them and show them; returns the
    answers' text."""
    from .report import say

    _, text = write_answers(notebook, settings["profile"])
    say(text.split("\n\n", 2)[-1])
    return text


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
        _store(NOTEBOOKS[notebook].lab, name, rows, profile)
    return found


def write_answers(notebook: str, profile: str = "full") -> tuple[Path, str]:
    """Store ``notebook``'s readings, then render and write its answers from them (what a notebook's closing
    cell and ``python -m labkit.redraw <notebook> --answers`` do)."""
    store_readings(notebook, profile)
    path, text = render_answers(notebook, profile)
    path.write_text(text)
    return path, text


def redraw_figures(notebook: str, profile: str = "full", only: list[str] | None = None) -> list[Path]:
    """Redraw ``notebook``'s stored figures (``only``: some of them); returns the files written. A figure whose
    JSON is not stored is skipped and said so."""
    nb = NOTEBOOKS[notebook]
    payloads = payloads_of(notebook, profile)
    written = []
    for name in nb.figures:
        if only and name not in only:
            continue
        if payloads.get(name) is None:
            print(f"{notebook}: {name}.json is not stored ({profile}): not redrawn", flush=True)
            continue
        fig = plot(notebook, name, payloads[name])
        drawn = {"by": f"{BY} {notebook}", **FROM, **getattr(fig, "labkit_drawn", {})}
        written += list(redraw_figure(fig, nb.lab, name, drawn, profile).values())
        import matplotlib.pyplot as plt

        plt.close(fig)
    return written


def select(what: str) -> list[str]:
    """Notebooks named by ``what``: ``all``, a lab (``lab1``) or a notebook."""
    chosen = [nb for nb in NOTEBOOKS if what in ("all", nb, nb.split("_")[0])]
    if not chosen:
        raise ValueError(f"{what!r}: allowed values are 'all', a lab ({', '.join(sorted({n.split('_')[0] for n in NOTEBOOKS}))}) "
                         f"or a notebook ({', '.join(NOTEBOOKS)})")
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
        from .readings import page  # every notebook's readings: the results page is theirs

        print(page.write(NOTEBOOKS), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
