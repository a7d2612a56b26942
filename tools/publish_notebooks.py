"""Copy executed notebooks into notebooks/executed/<profile>/ for reading on a laptop or a code host:
outputs kept, PNG images re-encoded at most MAX_WIDTH pixels wide with a small palette (a figure's
full-resolution PNG/SVG stays in figures/), widget state dropped. stderr streams (warnings) are kept without
their progress bars; machine paths (the checkout, site-packages, the extension cache, /tmp) are written as
what they are, in every output.

    python tools/publish_notebooks.py runs/full/lab0_graphs_lora.ipynb ... [--profile full]
"""
import argparse
import base64
import io
import re
import sys
from pathlib import Path

import nbformat
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
MAX_WIDTH = 900
COLOURS = 128  # matplotlib figures have few colours: a palette keeps them sharp at a fraction of the bytes
PROGRESS = re.compile(r"\d+%\||\d+it \[|it/s\]|s/it\]")  # a tqdm bar: redrawn in place, noise once published
MACHINE = ((re.compile(r"(?:/[\w.+-]+)+/(site-packages|dist-packages)/"), r"<\1>/"),
           (re.compile(r"(?:/[\w.+-]+)*/labkit-cache/"), "$LABKIT_CACHE_DIR/"),
           (re.compile(r"(?:/[\w.+-]+)+/torch_extensions/"), "<torch extensions cache>/"),
           (re.compile(r"/tmp/[\w.+-]+"), "<tmp>"))


def stderr_text(text: str) -> str:
    """A stderr stream as a reader wants it: the warnings, without progress bars (each ``\\r`` redraw keeps only
    its last state, and bars themselves are dropped)."""
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    return "\n".join(line for line in lines if not PROGRESS.search(line)).strip("\n")


def no_machine_paths(text: str) -> str:
    """``text`` with folders of the machine that ran it replaced by what they are."""
    for pattern, shown in MACHINE:
        text = pattern.sub(shown, text)
    return text


def small_png(data: str) -> str:
    img = Image.open(io.BytesIO(base64.b64decode(data)))
    if img.width > MAX_WIDTH:
        img = img.resize((MAX_WIDTH, round(img.height * MAX_WIDTH / img.width)), Image.LANCZOS)
    img = img.convert("RGB").quantize(COLOURS, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    img.save(out, format="PNG", optimize=True)
    smaller = base64.b64encode(out.getvalue()).decode()
    return smaller if len(smaller) < len(data) else data


def publish(path: Path, dest_dir: Path) -> tuple[Path, int, int]:
    nb = nbformat.read(path, as_version=4)
    before = path.stat().st_size
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                out["text"] = stderr_text(out.get("text", ""))
                if not out["text"].strip():
                    continue  # only progress bars: nothing for a reader
                out["text"] += "\n"
            data = out.get("data", {})
            if "image/png" in data:
                data["image/png"] = small_png(data["image/png"])
                data.pop("image/svg+xml", None)
            kept.append(out)
        cell.outputs = kept
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / path.name
    # paths as the reader's checkout has them: the machine that ran it had the repository somewhere else
    ran_in = Path(nb.metadata.get("papermill", {}).get("input_path", str(ROOT / "notebooks" / "x"))).parent.parent
    text = nbformat.writes(nb)
    for root in {str(ran_in), str(ROOT)}:
        text = text.replace(root + "/", "")
    text = no_machine_paths(text)
    dest.write_text(text)
    return dest, before, dest.stat().st_size


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--profile", default="full")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        if not path.is_file():
            parser.error(f"{path}: no such executed notebook")
        dest, before, after = publish(path, ROOT / "notebooks" / "executed" / args.profile)
        print(f"{dest.relative_to(ROOT)}: {before / 1e3:.0f} kB -> {after / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
