"""A private CUDA MPS daemon for the workers of one search (optional).

Without MPS, kernels of different processes take turns on the GPU; a small BERT's kernels fill a few of
its multiprocessors, so the turns leave most of it idle. Under MPS the workers' kernels run side by side.
The daemon here uses its own pipe folder, so only this search's workers connect to it, and it is
stopped when the search ends. It changes no GPU setting (compute mode, clocks) and needs
``nvidia-cuda-mps-control`` on the PATH; where that is missing, asking for MPS is an error.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

CONTROL = "nvidia-cuda-mps-control"


@contextlib.contextmanager
def daemon(folder: Path, enabled: bool = True):
    """Yields the environment variables workers need (empty when not ``enabled``)."""
    if not enabled:
        yield {}
        return
    if shutil.which(CONTROL) is None:
        raise RuntimeError(f"mps=True but {CONTROL} is not on the PATH (it ships with the CUDA driver "
                           "tools); run with mps=False")
    folder = Path(folder)
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(folder / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(folder / "log")}
    for path in env.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    full = {**os.environ, **env}
    subprocess.run([CONTROL, "-d"], env=full, check=True, timeout=30)
    print(f"[labkit] CUDA MPS daemon started for the workers (pipe {env['CUDA_MPS_PIPE_DIRECTORY']})", flush=True)
    try:
        yield env
    finally:
        subprocess.run([CONTROL], input=b"quit\n", env=full, timeout=60, check=False)
