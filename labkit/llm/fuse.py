"""One Linear for several that read the same input: their weights stacked along ``out_features``, so a decode step
launches one GEMM (and reads one longer weight) where it launched two or three (q, k, v; gate, up).

``concat_linears`` stacks ``nn.Linear`` weights or ``MXINT8Linear``'s packed buffers (groups run along
``in_features``, so rows stack without re-quantizing: the same bits). The result is a copy, made once: build it
after any conversion of the layers it stacks.
"""
from __future__ import annotations

import torch
from torch import nn

from ..kernels.packed_linear import MXINT8Linear


def concat_linears(layers) -> nn.Module:
    """One layer whose output is ``torch.cat([l(x) for l in layers], -1)``: an ``nn.Linear`` for ``nn.Linear``s, an
    ``MXINT8Linear`` (same group size, backend and impl) for ``MXINT8Linear``s."""
    layers = list(layers)
    if not layers:
        raise ValueError("concat_linears needs at least one layer")
    kinds = {type(m) for m in layers}
    if len(kinds) != 1 or kinds.pop() not in (nn.Linear, MXINT8Linear):
        raise TypeError(f"concat_linears stacks layers of one kind, nn.Linear or MXINT8Linear; got "
                        f"{', '.join(type(m).__name__ for m in layers)}")
    first = layers[0]
    widths = {m.in_features for m in layers}
    if len(widths) != 1:
        raise ValueError(f"concat_linears: the layers read inputs of different widths {sorted(widths)}; they "
                         f"must read the same input")
    if len({m.bias is None for m in layers}) != 1:
        raise ValueError("concat_linears: some layers have a bias and some do not")
    out = sum(m.out_features for m in layers)
    bias = None if first.bias is None else torch.cat([m.bias.detach() for m in layers])
    if isinstance(first, nn.Linear):
        w = torch.cat([m.weight.detach() for m in layers])
        fused = nn.Linear(first.in_features, out, bias is not None, device=w.device, dtype=w.dtype)
        fused.weight.data.copy_(w)
    else:
        settings = {(m.group_size, m.backend, m.impl) for m in layers}
        if len(settings) != 1:
            raise ValueError(f"concat_linears: MXINT8Linear layers differ in (group_size, backend, impl): "
                             f"{sorted(settings)}")
        m0 = first.mantissa
        fused = MXINT8Linear(first.in_features, out, bias is not None, first.group_size, device=m0.device,
                             dtype=bias.dtype if bias is not None else torch.float32, backend=first.backend,
                             impl=first.impl)
        fused.mantissa.copy_(torch.cat([m.mantissa for m in layers]))
        fused.exponent.copy_(torch.cat([m.exponent for m in layers]))
    if bias is not None:
        fused.bias.data.copy_(bias)
    return fused.requires_grad_(False)
