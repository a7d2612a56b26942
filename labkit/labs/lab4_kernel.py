"""Lab 4 part 3's kernel steps: which MXINT8 path runs here, the kernel's bandwidth (this run's sweep on a GPU,
else the stored GPU one) and the tiling the figure draws, each as the numbers the notebook stores."""
from __future__ import annotations

import json

import torch

from ..kernels import bench, dequantize, extension, tiling
from ..results import result_dir

TILING_VIEW = (32, 80)  # a (32, 80) view: tiles of 32 groups in k, the third one ragged


def ready() -> bool:
    """Whether the CUDA kernel runs here: on a GPU this builds the extension (once, cached)."""
    return extension.available() if torch.cuda.is_available() else False


def cuda_decode(m: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """labkit's CUDA kernel on (int8, uint8) columns at group size 1, back on the CPU: the decode check's kernel."""
    return dequantize(m.cuda(), e.cuda(), 1, backend="cuda").cpu()


def _bandwidth_numbers(bw: dict, source: str, group_size: int) -> dict:
    """What the bandwidth figure draws and the answers read: the sweep's rows at ``group_size`` (or its first
    group size when it has no rows there), with the device that measured them."""
    summary = bench.summary_table(bw)
    g_plot = group_size if any(r["g"] == group_size for r in summary) else summary[0]["g"]
    return {"source": source, "group_size": g_plot, "rows": bw["rows"], "copy": bw["copy"], "summary": summary,
            "device": bw["device"]}


def measured_bandwidth(settings: dict) -> dict:
    """This run's sweep of the kernel's bandwidth (needs the CUDA extension)."""
    bw = bench.sweep(settings["bench_sizes"], settings["bench_groups"], compile=settings["bench_compile"],
                     reps=settings["bench_reps"], progress=False)
    bw["device"] = torch.cuda.get_device_name(0)
    source = f"measured in this run on {bw['device']} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    return _bandwidth_numbers(bw, source, settings["group_size"])


def stored_bandwidth(group_size: int) -> dict | None:
    """The stored GPU sweep (``python -m labkit.kernels.bandwidth``'s full-profile JSON), None when none is stored."""
    path = result_dir("lab4", "full") / "mxint8_bandwidth.json"
    if not path.is_file():
        return None
    bw = json.loads(path.read_text())
    v = bw.get("versions", {})
    source = (f"stored GPU results from `{path.relative_to(result_dir('lab4', 'full').parent.parent)}`: "
              f"{bw['device']}, torch {v.get('torch')}, CUDA {v.get('cuda')}, "
              f"{bw.get('provenance', {}).get('created', 'date unknown')}; not measured here ({extension.reason()})")
    return _bandwidth_numbers(bw, source, group_size)


def tiling_numbers() -> dict:
    """The kernel's constants (read out of ``csrc/mxint8_dequant.cuh``) and the view the tiling figure draws."""
    constants = tiling.kernel_constants()
    header = tuple(constants[k] for k in ("kVecElems", "kVecThreads", "kVecUnroll", "kTileElems", "kTileThreads"))
    python = (tiling.VEC_ELEMS, tiling.VEC_THREADS, tiling.VEC_UNROLL, tiling.TILE_ELEMS, tiling.TILE_THREADS)
    if header != python:
        raise RuntimeError(f"csrc/mxint8_dequant.cuh's constants {header} differ from labkit.kernels.tiling's {python}")
    g_draw, groups_draw = TILING_VIEW
    tm = tiling.lab_tile_map(g_draw, groups_draw)
    return {"constants": constants, "drawn": {"group_size": g_draw, "num_groups": groups_draw,
                                             **{k: tm[k] for k in ("BLK_M", "BLK_K", "THR_M", "THR_K")}}}
