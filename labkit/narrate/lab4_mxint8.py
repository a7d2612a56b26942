"""What Lab 4's MXINT8 notebook says while it runs: which MXINT8 path runs here and why the kernel did not, the
group dot product, the parameter bytes against the theory and where the peak memory numbers come from."""
from __future__ import annotations

from ..kernels import extension
from ..kernels.memory import theoretical_saving
from ..readings.tables import memory_rows
from ..report import table
from ..results import portable

NO_GPU = "**Peak memory numbers** need a GPU (`torch.cuda.max_memory_allocated`): none here."


def path_text() -> str:
    """The kernel's own description of the path it takes here (``kernels.extension.describe``)."""
    return f"**Which MXINT8 path runs here:** {portable(extension.describe())}"  # the cache folder as $LABKIT_CACHE_DIR


def not_run_text() -> str:
    return f"(The CUDA kernel did not run here: {extension.reason()}.)"


def cannot_run_text() -> str:
    return f"**Bandwidth numbers:** the kernel cannot run here ({extension.reason()})."


def none_stored_text() -> str:
    return f"**Bandwidth numbers:** no GPU results stored yet and no kernel here ({extension.reason()})."


def dot_text(dot: dict) -> str:
    """``labs.lab4_checks.group_dot``'s two results, said side by side."""
    return (f"Group {dot['group_size']}: the dot product through integer mantissas `{dot['dot_int']!r}`, through the "
            f"dequantized floats `{dot['dot_float']!r}`; equal: **{dot['equal']}**.")


def parameter_table(parameters: list[dict], group_size: int) -> str:
    """The parameter bytes table (``labs.lab4_memory.parameter_rows``) under the theory for a quantized tensor."""
    return (f"Parameter and buffer bytes (theory for a quantized tensor: (32 - {8 + 8 / group_size:g}) / 32 = "
            f"{theoretical_saving(group_size):.1%}):\n\n" + table(parameters, floatfmt=".3f"))


def measured_text(measured: dict, how: str) -> str:
    """Where the peak memory numbers come from (``how``), and their table (``labs.lab4_memory.measure``'s)."""
    return f"**Peak memory numbers:** {how}\n\n" + table(memory_rows(measured), floatfmt=".1f")


def here_text(measured: dict, device: str) -> str:
    """This run's peak memory numbers, measured on ``device`` (the GPU's name)."""
    return measured_text(measured, f"measured in this run on {device}.")


def stored_text(stored: dict | None) -> str:
    """The stored full-profile GPU result (``load_results``' payload), shown where no GPU measures."""
    if not stored:
        return "**Peak memory numbers:** no GPU here and none stored."
    how = (f"stored full-profile GPU results ({stored['provenance']['device']}, {stored['provenance']['created']}); "
           "no GPU here.")
    measured = stored["numbers"]["measured"]
    return measured_text(measured, how) if measured else f"**Peak memory numbers:** {how}"
