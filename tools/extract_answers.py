"""Collect the prose an executed notebook rendered (labkit.report.say outputs) into a Markdown report.

    python tools/extract_answers.py runs/full/lab1_quantize.ipynb > figures/lab1/quantize_answers.md
"""
import sys

import nbformat


def answers(path: str) -> str:
    nb = nbformat.read(path, as_version=4)
    title = next((c.source.splitlines()[0] for c in nb.cells if c.cell_type == "markdown"), path)
    parts = [title, f"\n_Rendered from the executed notebook `{path.split('/')[-1]}`._\n"]
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "display_data" and "text/markdown" in out.get("data", {}):
                parts.append(out["data"]["text/markdown"])
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.stdout.write(answers(sys.argv[1]))
