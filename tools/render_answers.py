"""Re-render a lab's answers file from its stored result JSON; nothing is measured.

    python tools/render_answers.py lab0                  # figures/lab0/answers.md
    python tools/render_answers.py lab3_formats          # figures/lab3/formats_answers.md
    python tools/render_answers.py lab0 --profile quick --stdout

Each entry of RENDERERS maps a name to a function ``(profile) -> (answers file, text)`` that reads only
the stored JSON of that profile.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from labkit.answers import lab0, lab3_formats  # noqa: E402
from labkit.answers.measured import shown_path  # noqa: E402

RENDERERS = {
    "lab0": lab0.render_lab0,
    "lab3_formats": lab3_formats.render_lab3_formats,
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lab", choices=sorted(RENDERERS))
    ap.add_argument("--profile", default="full")
    ap.add_argument("--stdout", action="store_true", help="print the text instead of writing the answers file")
    args = ap.parse_args(argv)
    path, text = RENDERERS[args.lab](args.profile)
    if args.stdout:
        sys.stdout.write(text)
    else:
        path.write_text(text)
        print(shown_path(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
