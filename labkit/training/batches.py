"""Tokenised data held as padded tensors on the training device, batched without a collating DataLoader.

Why: a small BERT's training step on a GPU takes a millisecond or less; padding Python lists into
tensors in DataLoader workers cost more than that, and several trials sharing one machine starved its
CPU with loader processes. Here the whole split is padded once (on the device), and each batch is a
gather of its rows trimmed to the longest one, exactly what ``DataCollatorWithPadding`` builds.

The batch order comes from a DataLoader over row indices with the same sampler and generator semantics
as ``data.dataloader``, so with the same seed both paths see the same batches (tested).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import DataLoader

# The model inputs DataCollatorWithPadding keeps, with their padding values (token_type_ids: 0 for BERT).
COLUMNS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass
class Packed:
    """One split: ``columns`` name -> [rows, longest] int64, right-padded; ``labels`` [rows]; ``lengths``
    [rows] on the CPU (so a batch's trim length is known without a device sync)."""
    columns: dict[str, torch.Tensor]
    labels: torch.Tensor
    lengths: torch.Tensor

    def __len__(self) -> int:
        return len(self.labels)

    def to(self, device) -> "Packed":
        return Packed({k: v.to(device) for k, v in self.columns.items()}, self.labels.to(device), self.lengths)


def _pad_list_column(column: pa.ChunkedArray | pa.Array, pad: int) -> tuple[torch.Tensor, np.ndarray]:
    """A list<int> arrow column as a right-padded [rows, longest] int64 tensor (vectorised, no Python loop)."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = col.offsets.to_numpy()
    offsets = offsets - offsets[0]  # a sliced array's offsets need not start at 0
    values = col.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = np.diff(offsets)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    cols = np.arange(len(values)) - np.repeat(offsets[:-1], lengths)
    out = np.full((len(lengths), max(int(lengths.max(initial=0)), 1)), pad, dtype=np.int64)
    out[rows, cols] = values
    return torch.from_numpy(out), lengths


def pack(ds, pad_token_id: int = 0) -> Packed:
    """Pad a tokenised ``datasets.Dataset`` (``input_ids``, ``attention_mask``, optional ``token_type_ids``,
    ``labels``) into tensors, in the dataset's row order."""
    table = ds.with_format("arrow")[:]  # the logical rows, after any select/shuffle/sort
    missing = [c for c in ("input_ids", "labels") if c not in table.column_names]
    if missing:
        raise KeyError(f"pack: dataset lacks column(s) {missing}; it has {table.column_names}")
    columns, lengths = {}, None
    for name in COLUMNS:
        if name in table.column_names:
            columns[name], n = _pad_list_column(table.column(name), pad_token_id if name == "input_ids" else 0)
            lengths = n if lengths is None else lengths
    labels = torch.from_numpy(table.column("labels").to_numpy().astype(np.int64))
    return Packed(columns, labels, torch.from_numpy(lengths.astype(np.int64)))


def imdb_like_lengths(rows: int, longest: int, generator: torch.Generator) -> torch.Tensor:
    """Token counts of ``rows`` synthetic reviews padded as IMDb's are at ``longest`` tokens (at 256: 44% of reviews
    fill the window, the rest spread below it, median 233): a realistic padding mask for benchmarks without the data."""
    full = torch.rand(rows, generator=generator) < 0.44
    return torch.where(full, longest, torch.randint(40, longest, (rows,), generator=generator))


class TensorBatches:
    """Iterable of batch dicts (``input_ids``, ``attention_mask``, ``token_type_ids``, ``labels``) on the
    packed tensors' device; ``len()`` batches per epoch; ``generator`` seeds the shuffle like a DataLoader's."""

    def __init__(self, packed: Packed, batch_size: int, shuffle: bool = False, seed: int = 0):
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        self.packed, self.batch_size, self.shuffle = packed, batch_size, shuffle
        self.generator = torch.Generator().manual_seed(seed)
        # Indices only: the same sampler (and generator draws) as data.dataloader's, at no collation cost.
        self._indices = DataLoader(range(len(packed)), batch_size=batch_size, shuffle=shuffle,
                                   generator=self.generator)

    @property
    def device(self) -> torch.device:
        return self.packed.labels.device

    def __len__(self) -> int:
        return len(self._indices)

    def shapes(self, seed: int | None = None) -> Counter:
        """One epoch's batch shapes as ``{(rows, longest): how many}``, without gathering a batch; ``seed``: the
        shuffle that ``labkit.training.train`` draws with that seed (it reseeds ``generator``)."""
        if seed is not None:
            self.generator.manual_seed(seed)
        return Counter((len(idx), int(self.packed.lengths[idx].max())) for idx in self._indices)

    def __iter__(self):
        p, device = self.packed, self.device
        order = list(self._indices)  # the epoch's batches, drawn as before (same generator use)
        # one host-to-device copy of the epoch's indices: a copy per batch from pageable memory waited for the
        # GPU to finish the previous batch each time (host and GPU took turns instead of overlapping)
        every = torch.cat(order).to(device) if order else None
        start = 0
        for idx in order:
            longest = int(p.lengths[idx].max())
            rows = every[start:start + len(idx)]
            start += len(idx)
            batch = {k: v[:, :longest].index_select(0, rows) for k, v in p.columns.items()}
            batch["labels"] = p.labels.index_select(0, rows)
            yield batch


def reseed(loader, seed: int) -> None:
    """Its next epoch's order from ``seed`` alone: a shuffling loader (TensorBatches, a DataLoader) carries its own
    generator, advanced by every epoch it serves, so the order would otherwise depend on how often this process
    used it before; a loader without one is left as it is."""
    if getattr(loader, "generator", None) is not None:
        loader.generator.manual_seed(seed)


def first_batch(loader, seed: int) -> dict:
    """The first batch of ``loader``'s epoch drawn with ``seed`` (``reseed``): a plain ``next(iter(loader))``
    calibrated differently in a process that had trained the SFT model than in one that loaded it."""
    reseed(loader, seed)
    return next(iter(loader))
