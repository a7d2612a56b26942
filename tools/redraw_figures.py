"""Re-draw a lab's stored figures from their stored JSON; nothing is measured.

    python tools/redraw_figures.py lab1                  # quantization, pruning
    python tools/redraw_figures.py lab4                  # mxint8_tiling, mxint8_memory, mxint8_bandwidth_plot
    python tools/redraw_figures.py lab4 --only mxint8_memory --profile quick

The images (PNG, SVG) are replaced; each figure's JSON keeps its numbers, settings and the provenance of the
run that measured them, and gains a "drawn" block (this commit, date, machine, and what was drawn from
what): see labkit.results.redraw_figure.
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from labkit import compression_figures  # noqa: E402
from labkit.kernels import figures, tiling  # noqa: E402
from labkit.results import load_results, redraw_figure, result_dir  # noqa: E402

BY = "tools/redraw_figures.py"


def _stored(lab: str, name: str, profile: str) -> dict:
    payload = load_results(lab, name, profile)
    if payload is None:
        raise SystemExit(f"{result_dir(lab, profile) / (name + '.json')}: not stored, nothing to re-draw")
    return payload


def lab4_tiling(profile: str):
    p = _stored("lab4", "mxint8_tiling", profile)
    same = p["numbers"]["constants"] == tiling.kernel_constants()
    return figures.plot_tiling(p["numbers"]), {
        "by": f"{BY} lab4", "from": "numbers.constants and numbers.drawn of this file (layout arithmetic)",
        "constants_match_current_header": same}


def lab4_memory(profile: str):
    p = _stored("lab4", "mxint8_memory", profile)
    return figures.plot_memory(p["numbers"]["measured"], device=p["provenance"]["device"]), {
        "by": f"{BY} lab4", "from": "numbers.measured of this file"}


def lab4_bandwidth(profile: str):
    """The figure's own rows when its JSON stores them (the notebook does since this script exists); the
    older payloads hold only a summary of the notebook's short sweep, so the stored benchmark rows
    (mxint8_bandwidth.json, every size measured) are drawn instead, and the "drawn" block says so."""
    p = _stored("lab4", "mxint8_bandwidth_plot", profile)
    g = p["numbers"].get("group_size") or p["settings"]["group_size"]
    if p["numbers"].get("rows"):
        rows, device = p["numbers"]["rows"], p["provenance"]["device"]
        drawn = {"from": "numbers.rows of this file"}
    else:
        path = result_dir("lab4", profile) / "mxint8_bandwidth.json"
        if not path.is_file():
            raise SystemExit(f"{path}: needed to re-draw mxint8_bandwidth_plot (its JSON stores no rows)")
        bw = json.loads(path.read_text())
        rows, device = bw["rows"], bw["device"]
        prov = bw.get("provenance", {})
        sizes = sorted({r["n"] for r in rows if r["group_size"] == g})
        drawn = {"from": f"rows of {path.relative_to(result_dir('lab4', 'full').parent.parent)} at group size {g} "
                         f"(sizes {', '.join(map(str, sizes))}): that file's benchmark sweep "
                         f"({bw.get('command', 'python -m labkit.kernels.bandwidth')}), measured on "
                         f"{prov.get('device', device)} at {prov.get('created', 'an unrecorded date')}",
                 "note": "numbers.summary of this file is the notebook's own shorter sweep "
                         f"({len({r['n'] for r in p['numbers'].get('summary', [])})} sizes), which the answers "
                         "file quotes; the figure shows every size of the benchmark rows named in 'from'",
                 "from_provenance": prov}
    return figures.plot_bandwidth(rows, g, device=device), {"by": f"{BY} lab4", **drawn}


def lab1(name: str, plot):
    def draw(profile: str):
        p = _stored("lab1", name, profile)
        return plot(p["numbers"], p["settings"]), {"by": f"{BY} lab1", "from": "numbers and settings of this file"}
    return draw


FIGURES = {"lab1": {"quantization": lab1("quantization", compression_figures.plot_quantization),
                    "pruning": lab1("pruning", compression_figures.plot_pruning)},
           "lab4": {"mxint8_tiling": lab4_tiling, "mxint8_memory": lab4_memory,
                    "mxint8_bandwidth_plot": lab4_bandwidth}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lab", choices=sorted(FIGURES))
    ap.add_argument("--profile", default="full")
    ap.add_argument("--only", action="append", help="a figure name (repeatable); default: all of the lab's")
    args = ap.parse_args(argv)
    names = args.only or list(FIGURES[args.lab])
    unknown = [n for n in names if n not in FIGURES[args.lab]]
    if unknown:
        ap.error(f"unknown figure(s) {unknown}; {args.lab} has {', '.join(FIGURES[args.lab])}")
    for name in names:
        fig, drawn = FIGURES[args.lab][name](args.profile)
        for path in redraw_figure(fig, args.lab, name, drawn, args.profile).values():
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
