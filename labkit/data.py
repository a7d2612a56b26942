"""IMDb sentiment as a ``datasets.DatasetDict``: offline parquet (default) or the Hugging Face hub.

Offline files are checked against their published sha256 before use; subsets are seeded and stratified;
tokenisation is cached on disk by ``datasets`` (its fingerprint covers the tokenizer and max length).
"""
from __future__ import annotations

import contextlib
import hashlib
import warnings
from pathlib import Path

import datasets
import torch
from torch.utils.data import DataLoader

from . import settings

SPLITS = ("train", "test")
# sha256 of the offline parquet files (../shared/data/imdb/SHA256SUMS).
SHA256 = {
    "imdb_train.parquet": "cef069e730ce27af016b9c044f2e288b4673338638fba8cc6c7b3bb7678bce9c",
    "imdb_test.parquet": "3f45cb308cfa29a92d1f88bbe48494043a2ae926b095c2b39944334d201a6b36",
}
LABELS = datasets.ClassLabel(names=["neg", "pos"])
_verified: dict[tuple, bool] = {}


class DataNotFoundError(FileNotFoundError):
    pass


def find_imdb_dir() -> Path:
    """``$LABKIT_DATA_DIR/imdb`` (else ``$KIT_DATA_DIR/imdb``) when set, else the first default folder
    holding both parquet files; a clear error naming the variable, or listing where it looked."""
    explicit = settings.data_dir_setting()
    if explicit is not None:
        var, root = explicit
        folder = root / "imdb"
        missing = [name for name in SHA256 if not (folder / name).is_file()]
        if not missing:
            return folder
        raise DataNotFoundError(
            f"{var}={root} is set, but {folder} lacks {', '.join(missing)}; labkit does not look elsewhere "
            f"when {var} is set. Fix: point {var} at the folder that holds imdb/ (e.g. ../shared/data), or "
            f"unset it to search {', '.join(str(d) for d in settings.data_dirs())}.")
    looked = []
    for root in settings.data_dirs():
        folder = root / "imdb"
        looked.append(str(folder))
        if all((folder / name).is_file() for name in SHA256):
            return folder
    raise DataNotFoundError(
        "IMDb parquet files (imdb_train.parquet, imdb_test.parquet) not found. Looked in:\n  "
        + "\n  ".join(looked)
        + "\nFix: set LABKIT_DATA_DIR to the folder that holds imdb/ (e.g. ../shared/data), copy the files "
        "into data/imdb/, or set LABKIT_DATA_SOURCE=hub to download from the Hugging Face hub.")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_imdb_dir(folder: Path) -> None:
    """Raise if a parquet file's sha256 is not the published one (checked once per file version)."""
    for name, expected in SHA256.items():
        path = folder / name
        key = (str(path), path.stat().st_mtime_ns, path.stat().st_size)
        if _verified.get(key):
            continue
        actual = sha256_file(path)
        if actual != expected:
            raise ValueError(f"{path}: sha256 {actual} does not match the published {expected}; "
                             "the file is corrupt or not the course's IMDb copy")
        _verified[key] = True


def load_imdb(source: str | None = None) -> datasets.DatasetDict:
    """IMDb train/test (25k each) with columns ``text`` and ``label`` (0 neg, 1 pos, a ClassLabel)."""
    source = source or settings.data_source()
    if source == "offline":
        folder = find_imdb_dir()
        verify_imdb_dir(folder)
        files = {split: str(folder / f"imdb_{split}.parquet") for split in SPLITS}
        dsd = datasets.load_dataset("parquet", data_files=files,
                                    cache_dir=str(settings.cache_dir() / "datasets"))
    elif source == "hub":
        dsd = datasets.load_dataset("imdb")
        dsd = datasets.DatasetDict({split: dsd[split] for split in SPLITS})
    else:
        raise ValueError(f"source={source!r}: allowed values are 'offline', 'hub'")
    dsd = dsd.select_columns(["text", "label"])
    return dsd.cast_column("label", LABELS)


def stratified_subset(ds: datasets.Dataset, size: int | None, seed: int) -> datasets.Dataset:
    """``size`` rows with the label balance of ``ds``, chosen with ``seed``; all rows, shuffled, if None."""
    if size is None or size >= len(ds):
        return ds.shuffle(seed=seed)
    if size <= 0:
        raise ValueError(f"subset size must be positive or None, got {size}")
    return ds.train_test_split(train_size=size, stratify_by_column="label", seed=seed)["train"]


def imdb_splits(train_size: int | None = None, test_size: int | None = None, seed: int = 0,
                source: str | None = None) -> datasets.DatasetDict:
    """Seeded, stratified train/test subsets (None: the whole split)."""
    dsd = load_imdb(source)
    return datasets.DatasetDict({
        "train": stratified_subset(dsd["train"], train_size, seed),
        "test": stratified_subset(dsd["test"], test_size, seed),
    })


def tokenize(dsd: datasets.DatasetDict, tokenizer, max_length: int = 512) -> datasets.DatasetDict:
    """Token ids per review (truncated, unpadded: batches pad dynamically); cached by ``datasets``."""
    def encode(batch):
        out = tokenizer(batch["text"], truncation=True, max_length=max_length)
        out["labels"] = batch["label"]
        return out

    return dsd.map(encode, batched=True, remove_columns=dsd["train"].column_names,
                   desc=f"tokenize (max_length={max_length})")


@contextlib.contextmanager
def quiet():
    """No ``datasets`` progress bars inside (a worker's or launcher's bars are noise in a log or notebook)."""
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        datasets.enable_progress_bars()


def sort_by_length(ds: datasets.Dataset) -> datasets.Dataset:
    """Order rows by token count, so evaluation batches carry little padding (cached by ``datasets``)."""
    with_len = ds.map(lambda b: {"n_tokens": [len(x) for x in b["input_ids"]]}, batched=True,
                      desc="lengths")
    with warnings.catch_warnings():
        # datasets passes pyarrow a deprecated sort option (null_placement); harmless, and not ours to fix
        warnings.filterwarnings("ignore", message=".*null_placement.*", category=FutureWarning)
        return with_len.sort("n_tokens")


def dataloader(ds: datasets.Dataset, tokenizer, batch_size: int, shuffle: bool = False,
               seed: int = 0, num_workers: int = 0) -> DataLoader:
    """Batches padded to their longest review (dynamic padding, as the HF Trainer does).

    ``num_workers`` > 0 collates in worker processes: on a GPU the Python padding, not the model, is
    otherwise the bottleneck for a 2-layer BERT.
    """
    from transformers import DataCollatorWithPadding

    collate = DataCollatorWithPadding(tokenizer, return_tensors="pt")
    keep = [c for c in ("input_ids", "attention_mask", "token_type_ids", "labels") if c in ds.column_names]
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(ds.select_columns(keep), batch_size=batch_size, shuffle=shuffle,
                      collate_fn=collate, generator=generator, num_workers=num_workers,
                      persistent_workers=num_workers > 0, pin_memory=torch.cuda.is_available())
