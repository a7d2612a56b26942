"""What Lab 4's MXINT8 notebook says while it runs: the parameter bytes against the theory."""
from __future__ import annotations

from ..kernels.memory import theoretical_saving
from ..report import table


def parameter_table(parameters: list[dict], group_size: int) -> str:
    """The parameter bytes table (``labs.lab4_memory.parameter_rows``) under the theory for a quantized tensor."""
    return (f"Parameter and buffer bytes (theory for a quantized tensor: (32 - {8 + 8 / group_size:g}) / 32 = "
            f"{theoretical_saving(group_size):.1%}):\n\n" + table(parameters, floatfmt=".3f"))
