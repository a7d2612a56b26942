"""Steps every IMDb lab repeats, driven by a settings dict from ``labkit.run.profiles.lab_settings``.

``loaders`` builds tokenised train/test loaders; ``finetuned_model`` returns the SFT model those settings
define, training it once and caching its state_dict, so Labs 1-3 start from Lab 0's fine-tuned model
without retraining it in every notebook.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from . import data, models, settings as _paths
from .training import batches, precision, train

# The settings that determine the tokenised batches.
DATA_KEYS = ("model", "train_size", "test_size", "max_length", "batch_size", "eval_batch_size", "seed", "device")
# The settings that determine the SFT model (the cache key), besides its training seed.
SFT_KEYS = ("model", "train_size", "max_length", "batch_size", "epochs", "lr", "seed")
# Bumped when the same settings would train other weights (e.g. the head drawn from the seed), so a cached
# checkpoint of older code is never taken for this code's model.
SFT_VERSION = 2


@dataclass
class Loaders:
    tokenizer: object
    train: object  # batches.TensorBatches (default) or a DataLoader (lean=False)
    test: object
    sizes: dict


def tokenized(s: dict):
    """(tokenizer, tokenised splits, test split sorted by length) for settings ``s``; ``datasets`` caches
    them on disk, so a call here before starting worker processes saves each of them the work."""
    tok = models.load_tokenizer(s["model"])
    splits = data.imdb_splits(s["train_size"], s["test_size"], seed=s["seed"])
    enc = data.tokenize(splits, tok, s["max_length"])
    return tok, enc, data.sort_by_length(enc["test"])  # evaluation batches then carry little padding


def prepare_data(s: dict) -> None:
    """Tokenise once (quietly) in a launcher, so worker processes only read the cache."""
    with data.quiet():
        tokenized(s)


_SHARED: dict[str, Loaders] = {}


def shared_loaders(s: dict) -> Loaders:
    """``loaders(s)`` built once per process and data settings, quietly: every trial of a search worker
    (whatever its study) trains and evaluates on the same tensors."""
    key = json.dumps({k: s[k] for k in DATA_KEYS if k in s}, sort_keys=True)
    if key not in _SHARED:
        with data.quiet():  # a worker's tokenising bars are noise in the notebook or log
            _SHARED[key] = loaders(s)
    return _SHARED[key]


def loaders(s: dict, lean: bool = True) -> Loaders:
    """Tokenised train (shuffled with ``s["seed"]``) and test (sorted by length) batches for settings ``s``.

    ``lean`` (default): the splits are padded once into tensors on the training device and batches are
    gathered there (``labkit.training.batches``); ``lean=False``: collating DataLoaders (worker processes on CUDA).
    Both give the same batches in the same order.
    """
    tok, enc, test = tokenized(s)
    eval_batch = s.get("eval_batch_size") or 2 * s["batch_size"]  # no gradients: a larger batch fits
    sizes = {"train": len(enc["train"]), "test": len(enc["test"])}
    dev = train.pick_device(s["device"])
    if lean:
        pad = tok.pad_token_id or 0
        return Loaders(tok, batches.TensorBatches(batches.pack(enc["train"], pad).to(dev), s["batch_size"],
                                                  shuffle=True, seed=s["seed"]),
                       batches.TensorBatches(batches.pack(test, pad).to(dev), eval_batch), sizes)
    workers = 4 if dev.type == "cuda" else 0
    return Loaders(tok, data.dataloader(enc["train"], tok, s["batch_size"], shuffle=True, seed=s["seed"],
                                        num_workers=workers),
                   data.dataloader(test, tok, eval_batch, num_workers=workers), sizes)


def freeze_embeddings(model: torch.nn.Module) -> int:
    """Freeze the embedding tables (the course's SFT setting); returns how many parameters were frozen."""
    frozen = 0
    for p in model.base_model.embeddings.parameters():
        p.requires_grad_(False)
        frozen += p.numel()
    return frozen


def _test_key(s: dict) -> dict:
    """What the stored SFT metrics were measured on: the test split's settings and the evaluating device."""
    return {"test_size": s.get("test_size"), "max_length": s["max_length"], "seed": s["seed"],
            "eval_batch_size": s.get("eval_batch_size"), "device": str(train.pick_device(s["device"]))}


def train_seeds(s: dict) -> list[int]:
    """The training seeds of settings ``s``: ``seeds`` where the lab has it, else ``[seed]``."""
    return list(s.get("seeds") or [s["seed"]])


def _sft_key(s: dict, seed: int) -> dict:
    step = train.step_key(s.get("device", "auto"))  # graphed and eager steps train other bits; CPU keys carry none
    # not the card or SM share (train.device_key): processes of other shares load the checkpoint (Lab 3's search
    # workers under MPS); its digest, in the results and regenerate's record, says which weights they used
    return {**{k: s[k] for k in SFT_KEYS}, "train_seed": seed, "version": SFT_VERSION, **precision.cache_key(s),
            **({"train_step": step} if step else {})}


def checkpoint_path(s: dict, seed: int | None = None):
    """Where the SFT model of settings ``s`` trained with ``seed`` (default ``s["seed"]``) is cached."""
    seed = s["seed"] if seed is None else seed
    key = json.dumps(_sft_key(s, seed), sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return _paths.cache_dir() / "checkpoints" / f"sft-{s['model']}-{digest}.pt"


def state_digest(state_dict: dict) -> str:
    """sha256 of a state_dict's names, dtypes, shapes and bytes: the same weights, the same digest."""
    h = hashlib.sha256()
    for name in sorted(state_dict):
        t = state_dict[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def checkpoint_digest(path) -> str:
    """The weights digest of a cached SFT checkpoint (stored at save time; computed for older files)."""
    return _saved_digest(torch.load(path, map_location="cpu", weights_only=True))


def _saved_digest(saved: dict) -> str:
    return saved.get("digest") or state_digest(saved["state_dict"])


SFT_FIELDS = ("accuracy", "loss", "n", "positive_share", "train_seconds", "train_loss_last", "sft_digest",
              "train_seed", "determinism")


def sft_record(metrics: dict) -> dict:
    """The fields of ``finetuned_model``'s metrics that a result stores (the same keys whether the model was
    trained now or read from the cache, so per-seed results combine)."""
    return {k: metrics.get(k) for k in SFT_FIELDS}


def finetuned_model(s: dict, dl: Loaders | None = None, retrain: bool = False,
                    seed: int | None = None) -> tuple[torch.nn.Module, dict]:
    """The SFT classifier for settings ``s`` (embeddings frozen, 1 pass of ``train``) and its metrics.

    ``seed`` (default ``s["seed"]``) is the training seed: the new head's initialisation, the batch order and
    dropout. The data (which reviews, for profiles that subsample) follows ``s["seed"]`` whatever the training
    seed, so every seed's model is measured on the same test reviews. Training is deterministic
    (``labkit.training.determinism``): the same settings and seed give the same weights in any fresh process.
    Cached on disk under ``.cache/checkpoints``; ``retrain=True`` ignores the cache.
    """
    seed = s["seed"] if seed is None else seed
    path = checkpoint_path(s, seed)
    # notebooks side by side (labkit run --lanes, GPU lanes) may ask for one model at once: one trains it, the
    # others wait and load it
    with _file_lock(path.with_suffix(".lock")):
        return _finetuned(s, dl, retrain, seed, path)


@contextlib.contextmanager
def _file_lock(path: Path):
    """An exclusive advisory lock on ``path`` (created), held across processes until the block ends."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _finetuned(s: dict, dl, retrain: bool, seed: int, path: Path) -> tuple[torch.nn.Module, dict]:
    model = models.load_model(s["model"], seed=seed)
    if path.is_file() and not retrain:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(saved["state_dict"])
        digest = _saved_digest(saved)
        if saved.get("test_key") == _test_key(s):
            return model, {**saved["metrics"], "sft_digest": digest, "cached": str(path)}
        # the checkpoint is shared by labs whose test sets differ (Lab 1 quick tests on 500 reviews, Lab 0
        # on 1,000): the stored accuracy is another test set's, so measure this one
        dl = dl or loaders(s)
        fit = {k: saved["metrics"].get(k) for k in ("train_seconds", "train_loss_last")}
        return model, {**train.evaluate(model, dl.test, **precision.on(s), desc="SFT eval"), **fit,
                       "sft_digest": digest, "cached": str(path)}
    dl = dl or loaders(s)
    freeze_embeddings(model)
    fit = train.train(model, dl.train, epochs=s["epochs"], lr=s["lr"], **precision.on(s), seed=seed,
                      desc=f"SFT (seed {seed})")
    metrics = {**train.evaluate(model, dl.test, **precision.on(s), desc="SFT eval"),
               "train_seconds": fit["train_seconds"], "train_loss_last": fit["train_loss_last"],
               "determinism": fit["determinism"], "train_seed": seed}
    model.cpu()
    digest = state_digest(model.state_dict())
    metrics["sft_digest"] = digest
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")  # never a half-written checkpoint under the real name
    torch.save({"state_dict": model.state_dict(), "metrics": metrics, "test_key": _test_key(s), "digest": digest,
                "settings": _sft_key(s, seed)}, tmp)
    tmp.replace(path)
    return model, metrics
