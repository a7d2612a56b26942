"""Pure-Python install everywhere; the MXINT8 CUDA extension is built only where it can be.

The extension builds when torch with CUDA and nvcc are importable in the build environment (use
``pip install --no-build-isolation -e .`` so the build sees your torch) and LABKIT_BUILD_EXT is not 0.
Elsewhere labkit installs as pure Python and builds the extension lazily on first use, or with
``labkit ext build``; the pure-PyTorch reference always works.
"""
import os

from setuptools import setup


def cuda_extensions():
    if os.environ.get("LABKIT_BUILD_EXT", "auto") == "0":
        return {}, []
    try:
        import torch
        from torch.utils.cpp_extension import CUDA_HOME, BuildExtension
    except ImportError:
        print("labkit setup: torch not importable in the build environment; installing pure Python")
        return {}, []
    if CUDA_HOME is None or torch.version.cuda is None:
        print("labkit setup: no CUDA toolchain or CPU-only torch; installing pure Python")
        return {}, []
    try:
        from labkit_build import mxint8_extension  # noqa: F401  (kept beside setup.py, see csrc/)
    except ImportError:
        return {}, []
    return {"build_ext": BuildExtension}, [mxint8_extension()]


cmdclass, ext_modules = cuda_extensions()
setup(cmdclass=cmdclass, ext_modules=ext_modules)
