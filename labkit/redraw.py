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
from dataclasses import dataclass, field
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
    figures: dict[str, str] = field(default_factory=dict)  # figure name -> "module:function" (payloads) -> (fig, drawn)
    # answers that read more than the JSON (Lab 0: which graph files exist): "module:function" (profile) -> (path, text)
    render_file: str | None = None


def _fn(target: str) -> Callable:
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


NOTEBOOKS: dict[str, Notebook] = {
    "lab0_graphs_lora": Notebook("lab0", ("accuracy",), "answers.md", "labkit.answers.lab0:render",
                                 {"accuracy": "labkit.redraw:_lab0_accuracy"}, "labkit.answers.lab0:render_lab0"),
    "lab1_quantize": Notebook("lab1", ("quantization",), "quantize_answers.md", "labkit.answers.lab1:render_quantize",
                              {"quantization": "labkit.redraw:_lab1_quantization"}),
    "lab1_prune": Notebook("lab1", ("pruning",), "prune_answers.md", "labkit.answers.lab1:render_prune",
                           {"pruning": "labkit.redraw:_lab1_pruning"}),
    "lab2_search": Notebook("lab2", ("samplers", "compression_aware", "remeasured"), "answers.md", "labkit.answers.lab2:render",
                            {"samplers": "labkit.redraw:_lab2_samplers",
                             "compression_aware": "labkit.redraw:_lab2_compression"}),
    "lab3_formats": Notebook("lab3", ("formats", "weight_snr"), "formats_answers.md", "labkit.answers.lab3_formats:render",
                             {"formats": "labkit.redraw:_lab3_formats", "weight_snr": "labkit.redraw:_lab3_snr"},
                             "labkit.answers.lab3_formats:render_lab3_formats"),
    "lab3_search": Notebook("lab3", ("search_integer", "search_formats", "search_pareto", "search_remeasured"), "search_answers.md",
                            "labkit.answers.lab3:render",
                            {"search_integer": "labkit.redraw:_lab3_integer", "search_formats": "labkit.redraw:_lab3_search_formats",
                             "search_pareto": "labkit.redraw:_lab3_pareto"}),
    "lab4_perf": Notebook("lab4", ("compile_cpu", "compile_cuda", "sdpa_cpu", "sdpa_cuda"), "perf_answers.md",
                          "labkit.answers.lab4_perf:render",
                          {f"{study}_{dev}": f"labkit.redraw:_lab4_{study}_{dev}"
                           for study in ("compile", "sdpa") for dev in ("cpu", "cuda")}),
    "lab4_mxint8": Notebook("lab4", ("mxint8_format", "mxint8_tiling", "mxint8_bandwidth_plot", "mxint8_memory",
                                     "mxint8_accuracy"), "mxint8_answers.md", "labkit.answers.lab4_mxint8:render",
                            {"mxint8_tiling": "labkit.redraw:_lab4_tiling", "mxint8_memory": "labkit.redraw:_lab4_memory",
                             "mxint8_bandwidth_plot": "labkit.redraw:_lab4_bandwidth",
                             "mxint8_accuracy": "labkit.redraw:_lab4_accuracy"}),
}


# --- how each figure is drawn from its notebook's stored payloads -----------------------------------------

def _lab0_accuracy(payloads):
    from .plots.lab0_graphs_lora import plot_accuracy
    return plot_accuracy(payloads["accuracy"]["numbers"], payloads["accuracy"]["settings"]), dict(FROM)


def _lab1_quantization(payloads):
    from .plots.lab1 import plot_quantization
    return plot_quantization(payloads["quantization"]["numbers"], payloads["quantization"]["settings"]), dict(FROM)


def _lab1_pruning(payloads):
    from .plots.lab1 import plot_pruning
    return plot_pruning(payloads["pruning"]["numbers"], payloads["pruning"]["settings"]), dict(FROM)


def _lab2_samplers(payloads):
    from .plots.lab2_search import plot_samplers
    return plot_samplers(payloads["samplers"]["numbers"], payloads["samplers"]["settings"]), dict(FROM)


def _lab2_compression(payloads):
    from .plots.lab2_search import plot_compression_aware
    p = payloads["compression_aware"]
    return plot_compression_aware(p["numbers"], p["settings"]), dict(FROM)


def _lab3_formats(payloads):
    from .plots.lab3_formats import plot_formats
    return plot_formats(payloads["formats"]["numbers"], payloads["formats"]["settings"]), dict(FROM)


def _lab3_snr(payloads):
    from .plots.lab3_formats import plot_snr
    from .quant import study

    p = payloads["weight_snr"]
    rows, s = p["numbers"]["rows"], p["settings"]
    names = [n for n in study.STUDY_ORDER if any(r["format"] == n for r in rows)]
    widths = sorted(set(s["snr_widths"]) | {s["format_width"]})
    return plot_snr(rows, names, s, widths), dict(FROM)


def _lab3_integer(payloads):
    from .plots.lab3_search import plot_integer

    p, pareto = payloads["search_integer"], payloads.get("search_pareto")
    uniform = next((u["accuracy"] for u in (pareto or {}).get("numbers", {}).get("uniform", [])
                    if u["format"] == "integer"), None)
    drawn = dict(FROM)
    if "uniform_int8" not in p["numbers"] and uniform is not None:
        drawn["from"] += "; the uniform int8 line from search_pareto.json's uniform points"
    return plot_integer(p["numbers"], p["settings"], uniform_int8=uniform), drawn


def _lab3_search_formats(payloads):
    from .plots.lab3_search import plot_formats
    return plot_formats(payloads["search_formats"]["numbers"], payloads["search_formats"]["settings"]), dict(FROM)


def _lab3_pareto(payloads):
    from .plots.lab3_search import plot_pareto

    p = payloads["search_pareto"]
    drawn = dict(FROM)
    if not p["numbers"].get("cloud"):
        drawn["note"] = "this file stores no cloud of every configuration measured: drawn without it"
    return plot_pareto(p["numbers"], p["settings"]), drawn


def _perf(name):
    def draw(payloads):
        from .plots import lab4_perf
        plot = lab4_perf.plot_compile if name.startswith("compile") else lab4_perf.plot_sdpa
        return plot(payloads[name]["numbers"]), {"from": "numbers of this file"}
    return draw


_lab4_compile_cpu, _lab4_compile_cuda = _perf("compile_cpu"), _perf("compile_cuda")
_lab4_sdpa_cpu, _lab4_sdpa_cuda = _perf("sdpa_cpu"), _perf("sdpa_cuda")


def _lab4_tiling(payloads):
    from .kernels import tiling
    from .plots import lab4_mxint8

    p = payloads["mxint8_tiling"]
    return lab4_mxint8.plot_tiling(p["numbers"]), {
        "from": "numbers.constants and numbers.drawn of this file (layout arithmetic)",
        "constants_match_current_header": p["numbers"]["constants"] == tiling.kernel_constants()}


def _lab4_memory(payloads):
    from .plots import lab4_mxint8

    p = payloads["mxint8_memory"]
    return lab4_mxint8.plot_memory(p["numbers"]["measured"], device=p["provenance"]["device"]), {
        "from": "numbers.measured of this file"}


def _lab4_bandwidth(payloads):
    from .plots import lab4_mxint8

    p = payloads["mxint8_bandwidth_plot"]
    g = p["numbers"].get("group_size") or p["settings"]["group_size"]
    rows = p["numbers"].get("rows")
    if not rows:
        raise ValueError("mxint8_bandwidth_plot.json stores no rows to draw from (a run before the notebook stored "
                         "them): run the notebook on a GPU")
    label = lab4_mxint8.run_label(p["numbers"].get("source", ""), p["provenance"].get("created"))
    return lab4_mxint8.plot_bandwidth(rows, g, device=p["provenance"]["device"], source=label), {
        "from": "numbers.rows of this file"}


def _lab4_accuracy(payloads):
    from .plots import lab4_mxint8
    p = payloads["mxint8_accuracy"]
    return lab4_mxint8.plot_accuracy(p["numbers"], p["settings"]), dict(FROM)


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
    for name, target in nb.figures.items():
        if only and name not in only:
            continue
        if payloads.get(name) is None:
            print(f"{notebook}: {name}.json is not stored ({profile}): not redrawn", flush=True)
            continue
        fig, drawn = _fn(target)(payloads)
        written += list(redraw_figure(fig, nb.lab, name, {"by": f"{BY} {notebook}", **drawn}, profile).values())
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
