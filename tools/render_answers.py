"""Re-render a lab's answers file from its stored result JSON; nothing is measured.

    python tools/render_answers.py lab4            # both Lab 4 notebooks
    python tools/render_answers.py lab0            # figures/lab0/answers.md
    python tools/render_answers.py lab3_formats    # figures/lab3/formats_answers.md
    python tools/render_answers.py lab1_prune --profile quick --stdout
    python tools/render_answers.py all
"""
import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from labkit.answers import lab0, lab1, lab3_formats, lab4_mxint8, lab4_perf  # noqa: E402
from labkit.answers.measured import shown_path  # noqa: E402
from labkit.results import load_results, result_dir  # noqa: E402

# notebook -> (module with NAMES and render(payloads), results folder, answers file stem)
_BY_PAYLOADS = {
    "lab1_quantize": (SimpleNamespace(NAMES=lab1.QUANTIZE_NAMES, render=lab1.render_quantize), "lab1", "quantize"),
    "lab1_prune": (SimpleNamespace(NAMES=lab1.PRUNE_NAMES, render=lab1.render_prune), "lab1", "prune"),
    "lab4_perf": (lab4_perf, "lab4", "perf"),
    "lab4_mxint8": (lab4_mxint8, "lab4", "mxint8"),
}


def _by_payloads(notebook):
    module, lab, stem = _BY_PAYLOADS[notebook]

    def render(profile):
        text = module.render({n: load_results(lab, n, profile) for n in module.NAMES})
        return result_dir(lab, profile) / f"{stem}_answers.md", text
    return render


# notebook -> render(profile) -> (answers file, text)
RENDERERS = {"lab0_graphs_lora": lab0.render_lab0, "lab3_formats": lab3_formats.render_lab3_formats,
             **{nb: _by_payloads(nb) for nb in _BY_PAYLOADS}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lab", help=f"all, a lab (lab0, lab1, lab3, lab4) or a notebook ({', '.join(RENDERERS)})")
    ap.add_argument("--profile", default="full")
    ap.add_argument("--stdout", action="store_true", help="print instead of writing the answers file")
    args = ap.parse_args(argv)
    notebooks = [k for k in RENDERERS if args.lab in ("all", k, k.split("_")[0])]
    if not notebooks:
        ap.error(f"no renderer for {args.lab!r}; known: {', '.join(RENDERERS)}")
    for nb in notebooks:
        path, text = RENDERERS[nb](args.profile)
        text = text if text.endswith("\n") else text + "\n"
        if args.stdout:
            sys.stdout.write(text)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(shown_path(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
