"""Re-render a lab's answers file from its stored result JSON; nothing is measured.

    python tools/render_answers.py lab4            # both Lab 4 notebooks
    python tools/render_answers.py lab4_perf --profile quick --stdout
"""
import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from labkit.answers import lab1, lab4_mxint8, lab4_perf  # noqa: E402
from labkit.results import load_results, save_answers  # noqa: E402

# notebook -> (renderer, results folder, answers file stem)
RENDERERS = {
    "lab1_quantize": (SimpleNamespace(NAMES=lab1.QUANTIZE_NAMES, render=lab1.render_quantize), "lab1", "quantize"),
    "lab1_prune": (SimpleNamespace(NAMES=lab1.PRUNE_NAMES, render=lab1.render_prune), "lab1", "prune"),
    "lab4_perf": (lab4_perf, "lab4", "perf"), "lab4_mxint8": (lab4_mxint8, "lab4", "mxint8")}


def render(notebook: str, profile: str = "full") -> tuple[str, str, str]:
    module, lab, stem = RENDERERS[notebook]
    return lab, stem, module.render({n: load_results(lab, n, profile) for n in module.NAMES})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lab", help=f"a lab ({', '.join(sorted({k.split('_')[0] for k in RENDERERS}))}) or a notebook "
                                f"({', '.join(RENDERERS)})")
    ap.add_argument("--profile", default="full")
    ap.add_argument("--stdout", action="store_true", help="print instead of writing <stem>_answers.md")
    args = ap.parse_args(argv)
    notebooks = [k for k in RENDERERS if args.lab in (k, k.split("_")[0])]
    if not notebooks:
        ap.error(f"no renderer for {args.lab!r}; known: {', '.join(RENDERERS)}")
    for nb in notebooks:
        lab, stem, text = render(nb, args.profile)
        if args.stdout:
            sys.stdout.write(text)
        else:
            print(save_answers(lab, stem, text, args.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
