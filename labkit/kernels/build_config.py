"""Where the MXINT8 extension's sources and the CUTLASS headers are, and how nvcc compiles them.

Shared by the setup.py build (``labkit_build.py`` loads this file by path, without importing labkit) and
the lazy JIT build (``labkit.kernels.extension``), so both compile the same thing the same way.
Imports nothing beyond the standard library.
"""
from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
# the checkout's csrc/, or the copy a student release installs inside the package (labkit/csrc/)
CSRC = next((p for p in (REPO_ROOT / "csrc", REPO_ROOT / "labkit" / "csrc") if p.is_dir()), REPO_ROOT / "csrc")
SOURCES = ("mxint8_torch.cpp", "mxint8_kernels.cu")
HEADERS = ("mxint8_dequant.cuh", "mxint8_launch.h")
CUTLASS_PACKAGE = "nvidia-cutlass"
CUTLASS_PIN = "nvidia-cutlass==4.2.0.0"

# Hopper (sm_90) machine code plus compute_90 PTX, which newer GPUs can JIT-compile. No fast math:
# the decode's `out - bias` produces float32 subnormals for small exponents (the header refuses it).
NVCC_FLAGS = (
    "-O3",
    "--expt-relaxed-constexpr",  # CuTe calls constexpr host functions from device code
    "-lineinfo",                 # source lines for compute-sanitizer and ncu, no slowdown
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
)
CXX_FLAGS = ("-O3",)


def cutlass_include_dir() -> Path | None:
    """The folder holding ``cute/`` and ``cutlass/``: ``$CUTLASS_INCLUDE``, else the nvidia-cutlass wheel.

    The wheel (PyPI ``nvidia-cutlass``) ships the headers under ``cutlass_library/source/include``.
    """
    env = os.environ.get("CUTLASS_INCLUDE")
    if env:
        path = Path(env).expanduser()
        return path if (path / "cute" / "tensor.hpp").is_file() else None
    try:
        dist = metadata.distribution(CUTLASS_PACKAGE)
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if str(f).replace("\\", "/").endswith("include/cute/tensor.hpp"):
            return Path(dist.locate_file(f)).resolve().parent.parent
    return None


def cutlass_missing_reason() -> str:
    env = os.environ.get("CUTLASS_INCLUDE")
    if env:
        return f"CUTLASS_INCLUDE={env} has no cute/tensor.hpp"
    return f"CUTLASS headers not found: pip install {CUTLASS_PIN} (or set CUTLASS_INCLUDE)"


def source_paths() -> list[Path]:
    return [CSRC / name for name in SOURCES]


def missing_sources() -> list[str]:
    return [str(CSRC / n) for n in SOURCES + HEADERS if not (CSRC / n).is_file()]
