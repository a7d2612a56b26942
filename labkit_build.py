"""The MXINT8 CUDA extension for setup.py: ``mxint8_extension()`` returns its ``CUDAExtension``.

setup.py calls this only where torch with CUDA and nvcc are present; elsewhere labkit builds the same
sources lazily on first use (``labkit.kernels.extension``). Importing this module raises ImportError
(after printing why) when the CUTLASS headers or the sources are missing, which setup.py takes as
"install pure Python". Paths and flags live in
``labkit/kernels/build_config.py``, loaded here by path so that setup does not import labkit.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

_ROOT = Path(__file__).resolve().parent


def _build_config():
    spec = importlib.util.spec_from_file_location("_labkit_build_config",
                                                  _ROOT / "labkit" / "kernels" / "build_config.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CFG = _build_config()
_MISSING = ([_CFG.cutlass_missing_reason()] if _CFG.cutlass_include_dir() is None else []) + \
    [f"CUDA source missing: {p}" for p in _CFG.missing_sources()]
if _MISSING:
    # setup.py treats ImportError as "install pure Python": say why, loudly, then let it.
    import sys

    print(f"labkit_build: not building the MXINT8 extension: {'; '.join(_MISSING)}", file=sys.stderr)
    raise ImportError("; ".join(_MISSING))


def mxint8_extension():
    """``labkit._mxint8_cuda``: the op ``torch.ops.labkit_mxint8.dequantize`` (CuTe kernels, sm_90)."""
    from torch.utils.cpp_extension import CUDAExtension

    cfg = _CFG
    include = cfg.cutlass_include_dir()
    return CUDAExtension(
        name="labkit._mxint8_cuda",
        # setuptools wants paths relative to setup.py
        sources=[str(p.relative_to(_ROOT)) for p in cfg.source_paths()],
        include_dirs=[str(include), str(cfg.CSRC)],
        extra_compile_args={"cxx": list(cfg.CXX_FLAGS), "nvcc": list(cfg.NVCC_FLAGS)},
    )
