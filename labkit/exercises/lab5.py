"""Lab 5's exercise: group-wise symmetric integer RTN of a weight (notebook ``lab5_llm``)."""
from __future__ import annotations

import torch

from ..llm.group_quant import group_spec
from .core import Case, exercise


def _w(seed: int, rows: int, cols: int, scale: float = 0.05) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=g) * scale


def _cases() -> list[Case]:
    outlier = _w(1, 2, 64)
    outlier[0, 5] = 1.0  # one large weight sets its group's step, not the others'
    zeros = _w(2, 2, 64)
    zeros[1, :32] = 0.0
    ties = torch.tensor([[0.5, 1.5, 2.5, -0.5, 7.0, 3.5, -2.5, 1.0]])  # steps of 1: halves round to even
    return [
        Case("int4, groups of 32 (the lab's first point)", (_w(0, 4, 64), 4, 32),
             hint="per group: s = max|w| / (2^(b-1) - 1), stored as fp16; q = clamp(round(w / s), -2^(b-1), "
                  "2^(b-1) - 1); return q * s"),
        Case("one outlier: only its own group coarsens", (outlier, 4, 32),
             hint="groups run along the last (input) dimension: row r, columns g*G .. g*G+G-1"),
        Case("an all-zero group comes back as zeros", (zeros, 3, 32),
             hint="max|w| = 0 gives s = 0: return zeros for that group, not NaN (0 / 0)"),
        Case("ties round half to even", (ties, 4, 8),
             hint="torch.round rounds half to even (0.5 -> 0, 2.5 -> 2); floor(x + 0.5) does not"),
        Case("the scale is stored in fp16", (_w(3, 3, 96, scale=0.0123), 2, 96),
             hint="round the scale to fp16 (s.half().float()) before dividing: the stored scale is the one used"),
        Case("int8, groups of 64", (_w(4, 2, 128), 8, 64)),
    ]


def _hidden(rng) -> list[Case]:
    out = []
    for i in range(4):
        width, group = rng.choice([2, 3, 4, 8]), rng.choice([8, 16, 32, 64])
        out.append(Case(f"random {i}", (_w(rng.randrange(10 ** 6), rng.randint(1, 4), group * rng.randint(1, 3),
                                           scale=rng.choice([0.01, 0.05, 0.3])), width, group)))
    return out


def _no_fp16(w, width, group_size):
    g = w.reshape(*w.shape[:-1], -1, group_size)
    qmax = 2 ** (width - 1) - 1
    s = g.abs().amax(-1, keepdim=True) / qmax
    s = torch.where(s == 0, torch.ones_like(s), s)
    q = torch.clamp(torch.round(g / s), -qmax - 1, qmax)
    return (q * s * (g.abs().amax(-1, keepdim=True) > 0)).reshape(w.shape)


def _per_row(w, width, group_size):
    return group_spec("integer", width, w.shape[-1]).quantize(w)


def _half_up(w, width, group_size):
    g = w.reshape(*w.shape[:-1], -1, group_size)
    qmax = 2 ** (width - 1) - 1
    s = (g.abs().amax(-1, keepdim=True) / qmax).half().float()
    safe = torch.where(s == 0, torch.ones_like(s), s)
    return (torch.clamp(torch.floor(g / safe + 0.5), -qmax - 1, qmax) * s).reshape(w.shape)


@exercise(
    id="lab5.group_rtn", notebook="lab5_llm", points=3, spans=("width", "group_size"),
    title="group-wise symmetric integer round-to-nearest of a weight (fp16 scale per group)",
    task="Lab 5, PTQ: quantize each Linear's weight in groups of group_size along its input dimension",
    cases=_cases, hidden=_hidden, atol=1e-7, rtol=1e-6,
    mutants={"scale not rounded to fp16": _no_fp16, "one group per row": _per_row, "rounds half up": _half_up},
    hint="g = w.reshape(rows, -1, G); s = (g.abs().amax(-1, keepdim=True) / (2^(b-1) - 1)).half().float(); "
         "q = clamp(round(g / s), -2^(b-1), 2^(b-1) - 1) (0 where s is 0); return (q * s).reshape(w.shape)",
)
def group_rtn(w: torch.Tensor, width: int, group_size: int) -> torch.Tensor:
    return group_spec("integer", width, group_size).quantize(w)
