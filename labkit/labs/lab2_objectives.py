"""Lab 2 objectives: train an architecture from scratch on IMDb and return test accuracy, optionally
compressing it (quantize + prune) and training again inside the trial; a trial that trains again also
trains an uncompressed copy as long (its equal-training control, ``accuracy_control``).

Each trial records parameter count, training time and every intermediate accuracy as user attributes;
the best model so far is saved as ``state_dict`` + JSON config (never a pickle). A configuration already
trained in the same storage (same architecture, settings and seed) reuses its result (``search.cache``).
"""
from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import optuna
import torch

from .. import recipes
from ..training import cuda_graphs, determinism, precision, train
from ..prune import mask_kernel
from ..quant.compress import compress
from ..models import count_parameters
from ..search.cache import cached_or_run, config_key, device_settings
from ..search.plan import RUN_ONLY
from .lab2_space import build_model, restrict, sample_architecture

MODES = ("none", "compress", "compress+train")
# Settings that choose what a search tries or where it runs, not what one trial computes (cache key).
SEARCH_ONLY = RUN_ONLY + ("trials", "compression_trials", "seeds", "profile", "lab", "device", "space")
# Settings only a compressed model reads: keyed by compressed trials alone (compressed_path)
COMPRESSED_ONLY = ("qat_matmul",)
# The bf16 path's training fake quantization runs eagerly: compiling it cost 6.6 s in a process's first post-training
# on an H100 and saved 0.3-1.0 ms of a 2.2-7.4 ms step, over 391 steps (benchmarks/search/task2_trial_profile.json)
QAT_COMPILE = False


def trial_settings(s: dict) -> dict:
    """The settings that determine one trial's result, for the cache key (device as its type)."""
    return {**{k: v for k, v in s.items() if k not in SEARCH_ONLY + COMPRESSED_ONLY + ("cpu_autocast",)},
            **device_settings(s)}


def qat_matmul(s: dict) -> str:
    """The compressed model's matmul path: the settings', or "fp32" for settings stored before they had one."""
    return s.get("qat_matmul", "fp32")


def compressed_path(s: dict) -> dict:
    """What a compressed model's forward runs, for compressed trials' cache keys: the activation mask's path
    (labkit.prune.mask_kernel's, or topk where it is off) and, where the model autocasts (CUDA, or a CPU in bf16),
    the matmul path."""
    cuda = train.pick_device(s["device"]).type == "cuda"
    mask = (mask_kernel.VERSION if cuda else mask_kernel.CPU_VERSION) if mask_kernel.enabled() else "topk"
    if not cuda and not precision.on_cpu_bf16(s):
        return {"activation_mask": mask}
    return {"qat_matmul": qat_matmul(s), "qat_compile": QAT_COMPILE, "activation_mask": mask}


def canonical(arch: dict) -> dict:
    """An architecture as the model it builds: the sizes and which Linear layers are Identity."""
    return {"config": arch["config"], "identity": sorted(k for k, v in arch.get("linears", {}).items()
                                                         if v == "identity")}


class NASObjective:
    """Callable objective. ``mode``: ``none`` (accuracy after training), ``compress`` (after quantize +
    prune), ``compress+train`` (after a further ``post_epochs`` of training with compression in place)."""

    def __init__(self, dl, s: dict, mode: str = "none", quant=None, prune=None, best_dir: Path | None = None,
                 identity_choices: bool = True, space: dict | None = None, use_cache: bool = True):
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: allowed values are {', '.join(map(repr, MODES))}")
        if mode != "none" and quant is None and prune is None:
            raise ValueError(f"mode={mode!r} needs a quant and/or prune config")
        self.dl, self.s, self.mode = dl, s, mode
        self.quant, self.prune = quant, prune
        self.best_dir = Path(best_dir) if best_dir else None
        self.identity_choices = identity_choices
        restrict(space)  # checked once here, not at each trial's first suggestion
        self.space = space
        self.cache = None  # a search.cache.ResultCache, set by the worker
        self.use_cache = use_cache  # False: always train (benchmarks)

    def __call__(self, trial: optuna.Trial) -> float:
        arch = sample_architecture(trial, self.identity_choices, self.space)
        # a compress+train trial records its control: results stored before it had one are not reused
        control = {"control": "uncompressed, same post-training"} if self.mode == "compress+train" else {}
        key = config_key({"objective": "lab2", "architecture": canonical(arch), "settings": trial_settings(self.s),
                          "mode": self.mode, "quant": self.quant if self.mode != "none" else None,
                          "prune": self.prune if self.mode != "none" else None, **control,
                          **({"compressed_path": compressed_path(self.s)} if self.mode != "none" else {})})
        return cached_or_run(trial, self.cache if self.use_cache else None, key, lambda: self._run(trial, arch))

    def fit(self, model: torch.nn.Module) -> dict:
        """Train ``model`` as a trial trains it (epochs, schedule, precision, seed, CUDA graphs): its metrics."""
        s = self.s
        # graphs=None: CUDA graphs on a GPU (LABKIT_CUDA_GRAPHS=0 for the eager loop); a trial's steps are
        # launch-bound there (benchmarks/training/lab2_trial_profile.json)
        return train.train(model, self.dl.train, epochs=s["epochs"], lr=s["lr"], **precision.on(s), seed=s["seed"],
                           progress=False, graphs=None, warmup=s.get("warmup", 0.0))

    def accuracy(self, model: torch.nn.Module) -> float:
        """Test accuracy as a trial reads it."""
        return train.evaluate(model, self.dl.test, **precision.on(self.s), progress=False)["accuracy"]

    def _run(self, trial: optuna.Trial, arch: dict) -> float:
        s = self.s

        def post_train(m):  # the compressed model's extra training, and its control's: the same length and batches
            return train.train(m, self.dl.train, epochs=s["post_epochs"], lr=s["post_lr"], **precision.on(s),
                               seed=s["seed"], progress=False)

        # the seed depends on the settings alone, so a configuration trains the same in any trial
        model = build_model(arch, seed=s["seed"])
        trial.set_user_attr("parameters", count_parameters(model))
        trial.set_user_attr("n_test", self.dl.sizes["test"])
        start = time.perf_counter()
        cuda = train.pick_device(s["device"]).type == "cuda"
        if cuda:  # the peak this trial's tensors reserve: what sizes the record's worker_gib
            torch.cuda.reset_peak_memory_stats()
        fit = self.fit(model)
        acc = self.accuracy(model)
        trial.set_user_attr("accuracy_trained", acc)
        trial.set_user_attr("train_seconds", fit["train_seconds"])
        if "graph_replays" in fit:  # what ran: CUDA graph replays or eager steps (labkit.training.cuda_graphs)
            trial.set_user_attr("train_graphs", {k: fit[k] for k in cuda_graphs.RAN})
        value = acc
        if self.mode != "none":
            # the equal-training control: the trained model, uncompressed, before compression touches it
            control = copy.deepcopy(model).cpu() if self.mode == "compress+train" else None
            model = compress(model.cpu(), quant=self.quant, prune=self.prune, qat_matmul=qat_matmul(s),
                             compile=QAT_COMPILE).model
            value = self.accuracy(model)
            trial.set_user_attr("accuracy_compressed", value)
            if self.mode == "compress+train":
                more = post_train(model)
                value = self.accuracy(model)
                trial.set_user_attr("accuracy_post_trained", value)
                if "graph_replays" in more:
                    trial.set_user_attr("post_train_graphs", {k: more[k] for k in cuda_graphs.RAN})
                trial.set_user_attr("train_seconds", fit["train_seconds"] + more["train_seconds"])
                # the same post-training without compression, so the gain above can be read against what the
                # extra training does on its own
                ctl = post_train(control)
                trial.set_user_attr("accuracy_control", self.accuracy(control))
                trial.set_user_attr("control_seconds", ctl["train_seconds"])
                del control
        trial.set_user_attr("trial_seconds", time.perf_counter() - start)
        if cuda:
            trial.set_user_attr("gpu_peak_gib", torch.cuda.max_memory_reserved() / 2**30)
            # the multiprocessors this process saw (fewer under an MPS share): kernels' heuristics choose by it
            trial.set_user_attr("gpu_sm_count", determinism.gpu_identity()["gpu_sm_count"])
        self._save_if_best(trial, value, arch, model)
        return value

    def _save_if_best(self, trial, value, arch, model):
        if self.best_dir is None:
            return
        try:
            best = trial.study.best_value
        except ValueError:  # no completed trial yet
            best = float("-inf")
        if value <= best:
            return
        self.best_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.cpu().state_dict(), self.best_dir / "best_model.pt")
        (self.best_dir / "best_config.json").write_text(json.dumps(
            {"trial": trial.number, "value": value, "architecture": arch, "mode": self.mode,
             "quant": self.quant, "prune": self.prune}, indent=2, default=str))


def lab2_objective(settings: dict, **options) -> NASObjective:
    """The registered ``"lab2"`` objective factory (loaders shared by every study of the process)."""
    if options.get("best_dir"):
        options = {**options, "best_dir": Path(options["best_dir"])}
    return NASObjective(recipes.shared_loaders(settings), settings, **options)


lab2_objective.prepare = recipes.prepare_data
