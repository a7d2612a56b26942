"""Padded training batches for the graphed-step GPU tests: 96 right-padded rows of up to 64 token ids (every third row
at the full 64, so each batch has the full width), random labels; the same rows every call."""
from __future__ import annotations

import torch


def padded_batches(device: str = "cuda", seed: int = 3):
    """``TensorBatches`` of 32 rows, shuffled with ``seed``, over the fixed padded rows on ``device``."""
    from labkit.training import batches

    g = torch.Generator().manual_seed(2)
    lengths = torch.randint(8, 65, (96,), generator=g)
    lengths[::3] = 64
    mask = (torch.arange(64)[None, :] < lengths[:, None]).long()
    ids = torch.randint(1000, 2000, (96, 64), generator=g) * mask
    packed = batches.Packed({"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)},
                            torch.randint(0, 2, (96,), generator=g), lengths).to(device)
    return batches.TensorBatches(packed, 32, shuffle=True, seed=seed)
