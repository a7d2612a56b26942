"""The MXINT8 CUDA extension: found prebuilt, or built once with nvcc on first use, or absent for a reason.

``load()`` tries, once per process: the setup.py build (``labkit._mxint8_cuda``), then a JIT build of
``csrc/`` with ``torch.utils.cpp_extension.load`` (cached under ``.cache/torch_extensions``, keyed by the
sources, flags and torch/CUDA versions). ``describe()`` says which path is in use and why;
``available()`` is ``load()``'s answer. Set ``LABKIT_MXINT8_EXT=0`` to refuse the extension (the
reference then runs, and says so).

The op is ``torch.ops.labkit_mxint8.dequantize(mantissa, exponent, group_size, impl=0)``, registered
with TORCH_LIBRARY in C++; its fake implementation (for torch.compile) is registered here.
"""
from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import time

import torch

from . import build_config

_STATE: dict = {"tried": False, "ok": False, "how": None, "reason": None}
_FAKE_REGISTERED = False


def _blocker() -> str | None:
    """Why the extension cannot be used here at all (before trying to build), or None."""
    if os.environ.get("LABKIT_MXINT8_EXT", "auto") == "0":
        return "disabled by LABKIT_MXINT8_EXT=0"
    if torch.version.cuda is None:
        return f"no CUDA: torch {torch.__version__} is a CPU build"
    if not torch.cuda.is_available():
        return "no CUDA: torch.cuda.is_available() is False (no GPU or driver)"
    return None


def _build_blocker() -> str | None:
    """Why a JIT build cannot start (no compiler, headers or sources), or None."""
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME is None or not (shutil.which("nvcc") or os.path.isfile(os.path.join(CUDA_HOME, "bin", "nvcc"))):
        return "no nvcc: CUDA_HOME not found (install the CUDA toolkit or set CUDA_HOME)"
    if build_config.cutlass_include_dir() is None:
        return build_config.cutlass_missing_reason()
    missing = build_config.missing_sources()
    if missing:
        return f"CUDA sources missing: {missing}"
    return None


def _build_key() -> str:
    """Hash of everything that changes the binary: sources, headers, flags, torch and CUDA versions."""
    h = hashlib.sha256()
    for name in build_config.SOURCES + build_config.HEADERS:
        h.update((build_config.CSRC / name).read_bytes())
    h.update(repr((build_config.NVCC_FLAGS, build_config.CXX_FLAGS, torch.__version__, torch.version.cuda,
                   str(build_config.cutlass_include_dir()))).encode())
    return h.hexdigest()[:12]


def _build_dir():
    from .. import settings

    return settings.cache_dir() / "torch_extensions" / f"labkit_mxint8_{_build_key()}"


def _register_fake() -> None:
    global _FAKE_REGISTERED
    if _FAKE_REGISTERED:
        return

    @torch.library.register_fake("labkit_mxint8::dequantize")
    def _fake(mantissa, exponent, group_size, impl=0):
        torch._check(mantissa.dtype == torch.int8, lambda: "mantissa must be torch.int8")
        torch._check(exponent.dtype == torch.uint8, lambda: "exponent must be torch.uint8")
        return mantissa.new_empty(mantissa.shape, dtype=torch.bfloat16)

    _FAKE_REGISTERED = True


def _jit_build(verbose: bool) -> str:
    from torch.utils.cpp_extension import load as cpp_load

    build_dir = _build_dir()
    build_dir.mkdir(parents=True, exist_ok=True)
    cached = any(build_dir.glob("*.so"))
    start = time.perf_counter()
    name = build_dir.name
    cpp_load(name=name, sources=[str(p) for p in build_config.source_paths()],
             extra_include_paths=[str(build_config.cutlass_include_dir()), str(build_config.CSRC)],
             extra_cflags=list(build_config.CXX_FLAGS), extra_cuda_cflags=list(build_config.NVCC_FLAGS),
             build_directory=str(build_dir), is_python_module=False, verbose=verbose)
    seconds = time.perf_counter() - start
    what = "loaded from cache" if cached else f"built in {seconds:.0f} s"
    return f"JIT ({what}) in {build_dir}"


def load(verbose: bool = False) -> bool:
    """Make ``torch.ops.labkit_mxint8.dequantize`` available; True on success. Tries once per process."""
    if _STATE["tried"]:
        return _STATE["ok"]
    _STATE["tried"] = True
    reason = _blocker()
    if reason is None:
        try:
            module = importlib.import_module("labkit._mxint8_cuda")
            _STATE.update(ok=True, how=f"prebuilt by setup.py ({module.__file__})")
        except ImportError:
            reason = _build_blocker()
            if reason is None:
                try:
                    _STATE.update(ok=True, how=_jit_build(verbose))
                except Exception as err:  # a compiler error is a reason to report, not to crash on
                    lines = [l for l in str(err).strip().splitlines() if l.strip()]
                    reason = f"build failed: {type(err).__name__}: {' | '.join(lines[-3:])[:400]}"
    if _STATE["ok"]:
        _register_fake()
    else:
        _STATE["reason"] = reason
    return _STATE["ok"]


def available() -> bool:
    """Whether the CUDA extension can be used (builds it on first call where it can be built)."""
    return load()


def reason() -> str | None:
    """Why the extension is not in use (after ``load()``), or None when it is."""
    return None if _STATE["ok"] else (_STATE["reason"] or _blocker() or "not loaded yet")


def describe() -> str:
    """One line naming the path MXINT8 dequantization takes here, without building anything."""
    if _STATE["ok"]:
        gpu = torch.cuda.get_device_name(0)
        return (f"MXINT8 dequantization: CUDA extension ({_STATE['how']}; torch {torch.__version__}, "
                f"CUDA {torch.version.cuda}, {gpu})")
    if _STATE["tried"]:
        return f"MXINT8 dequantization: pure-PyTorch reference (reason: {_STATE['reason']})"
    blocked = _blocker() or _build_blocker()
    if blocked:
        return f"MXINT8 dequantization: pure-PyTorch reference (reason: {blocked})"
    return ("MXINT8 dequantization: CUDA extension not loaded yet (builds with nvcc on first use or with "
            "`labkit ext build`); until then nothing has run")


def _reset_for_tests() -> None:
    """Forget the outcome of ``load()`` (tests simulate environments); never unloads a loaded library."""
    if not _STATE["ok"]:
        _STATE.update(tried=False, reason=None, how=None)
