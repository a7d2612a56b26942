"""A private CUDA MPS daemon for the workers of one search (optional).

Without MPS, kernels of different processes take turns on the GPU; a small BERT's kernels fill a few of
its multiprocessors, so the turns leave most of it idle. Under MPS the workers' kernels run side by side.
The daemon here uses its own pipe folder, so only this search's workers connect to it, and it is
stopped when the search ends. It changes no GPU setting (compute mode, clocks) and needs
``nvidia-cuda-mps-control`` on the PATH; where that is missing, mps "on" is an error and "auto"
says so and runs without. Measured (benchmarks/search/search_throughput.json, H100, Lab 2 full, 8 workers
with CUDA graphs): 21.7 trials/min without MPS, 31.8 with it, in one run.

Each client may use ``SM_PERCENT`` of the multiprocessors (``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``; the
``LABKIT_MPS_SM_PERCENT`` variable overrides): a worker's larger kernels (its GEMMs) then no longer spread over
every SM while the others' small kernels wait, and more workers share the GPU. Measured (same benchmark
and JSON, 4 trials per worker): 8 workers 32.5 trials/min with all SMs (6 per worker), 34.8 at 25%, 36.2 at 50%;
12 workers at 25% 38.1, 16 at 25% 38.4; so under MPS the launcher starts ``run.WORKERS_PER_GPU_MPS``.
The share changes a trial's bits (a process sees fewer SMs, and kernels' heuristics choose by that count; at 100%
the bits equal a process's without MPS), so CUDA trials' cache keys name the SM count (docs/usage.md).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CONTROL = "nvidia-cuda-mps-control"


NAMED_MODES = ("on", "off", "auto")  # what profiles, environment variables and command lines hold
MODES = (True, False, *NAMED_MODES)
SM_PERCENT = 25  # each client's share of the multiprocessors, in percent (see the module docstring)
SM_PERCENT_ENV = "LABKIT_MPS_SM_PERCENT"


def sm_percent(default: int = SM_PERCENT) -> int | str:
    """The clients' share of the SMs: ``LABKIT_MPS_SM_PERCENT`` (an integer 1..100), else a
    ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` already in the environment (CUDA's own, kept as given), else
    ``default`` (a search's workers: ``SM_PERCENT``)."""
    env = os.environ.get(SM_PERCENT_ENV)
    if env is None:
        return os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", default)
    if not (env.strip().isdigit() and 1 <= int(env) <= 100):
        raise ValueError(f"{SM_PERCENT_ENV}={env!r}: allowed values are integers 1..100 (percent of the GPU's SMs "
                         "each MPS client may use)")
    return int(env)


def wanted(mode) -> bool:
    """Whether to start a daemon for ``mode``: True/"on" (an error where the control binary is missing),
    False/"off", or "auto" (when there is a GPU and the binary; says so when the binary is missing)."""
    if not (isinstance(mode, bool) or isinstance(mode, str) and mode in MODES):
        raise ValueError(f"mps={mode!r}: allowed values are True, False, 'on', 'off', 'auto'")
    if mode in (False, "off"):
        return False
    if mode == "auto":
        import torch

        if not torch.cuda.is_available():
            return False
    if shutil.which(CONTROL) is None:
        if mode == "auto":
            print(f"[labkit] MPS: {CONTROL} is not on the PATH; the workers take turns on the GPU", flush=True)
            return False
        raise RuntimeError(f"mps on but {CONTROL} is not on the PATH (it ships with the CUDA driver "
                           "tools); run with mps off (or auto)")
    return True


# The daemon's sockets live in its pipe folder, and a Unix socket's path holds at most 107 bytes (sun_path): a
# folder deeper than this (a test's temporary one) gets its pipe in a short folder of the system's temp instead,
# named for the folder, so a daemon left on it is found again.
PIPE_PATH_MAX = 80


def pipe_folder(folder: Path) -> Path:
    """Where the daemon of ``folder`` keeps its pipes: ``folder/pipe``, or a short stand-in when that is too long."""
    pipe = Path(folder) / "pipe"
    if len(str(pipe)) <= PIPE_PATH_MAX:
        return pipe
    digest = hashlib.sha256(str(Path(folder).resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"labkit-mps-{digest}"


@contextlib.contextmanager
def daemon(folder: Path, enabled=True, share: int = SM_PERCENT, clients: str = "workers"):
    """Yields the environment variables workers need (empty when not ``enabled``: see ``wanted``); each client
    may use ``share`` percent of the SMs unless the environment says otherwise (``sm_percent``)."""
    if not wanted(enabled):
        yield {}
        return
    folder = Path(folder)
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(pipe_folder(folder)), "CUDA_MPS_LOG_DIRECTORY": str(folder / "log")}
    for path in env.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    share = sm_percent(share)  # checked before the daemon starts
    full = {**os.environ, **env}
    _start(full, folder)
    print(f"[labkit] CUDA MPS daemon started for the {clients} (pipe {env['CUDA_MPS_PIPE_DIRECTORY']}, each "
          f"up to {share}% of the SMs)", flush=True)
    try:
        yield {**env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(share)}
    finally:
        subprocess.run([CONTROL], input=b"quit\n", env=full, timeout=60, check=False)


def _start(env: dict, folder: Path) -> None:
    """Start the daemon on ``env``'s pipe folder. A search stopped before its ``finally`` ran (a notebook killed
    at its time limit) leaves its daemon on that folder, and a second one cannot start there: ask it to quit
    and start once more."""
    try:
        subprocess.run([CONTROL, "-d"], env=env, check=True, timeout=30)
        return
    except subprocess.CalledProcessError:
        subprocess.run([CONTROL], input=b"quit\n", env=env, timeout=60, check=False)
    try:
        subprocess.run([CONTROL, "-d"], env=env, check=True, timeout=30)
    except subprocess.CalledProcessError as err:
        raise RuntimeError(f"the CUDA MPS daemon for {folder} does not start ({CONTROL} -d: exit {err.returncode}), "
                           f"also after asking a daemon left on that pipe folder to quit; see its log in "
                           f"{folder / 'log'}, or run with mps off") from err
