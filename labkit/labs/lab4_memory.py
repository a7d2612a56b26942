"""Lab 4 part 3d: fp32 vs MXINT8 bytes of labkit's default classifier and a DeBERTa-v2-xlarge-sized BERT (random
weights, built from a config): parameter bytes counted exactly on any machine (the large model on the meta
device), resident and peak bytes measured on a GPU (``labkit.kernels.memory.compare``); ``labkit.narrate.lab4_mxint8``
words them."""
from __future__ import annotations

import torch

from .. import models
from ..kernels import convert_to_mxint8, memory


def big_name(settings: dict) -> str:
    return f"BERT {settings['big_layers']}x{settings['big_hidden']} (DeBERTa-xlarge size)"


def builders(settings: dict) -> dict:
    """{model name: build(device)}: the default classifier, and the large BERT created directly on the device
    ("meta": shapes only)."""
    big_config = dict(hidden_size=settings["big_hidden"], num_hidden_layers=settings["big_layers"],
                      num_attention_heads=settings["big_heads"], intermediate_size=settings["big_intermediate"])

    def build_default(device):
        return models.load_model(settings["model"]).to(device)

    def build_big(device):
        with torch.device(device):
            return models.from_config(**big_config)

    return {settings["model"]: build_default, big_name(settings): build_big}


def parameter_rows(settings: dict, keep) -> list[dict]:
    """Parameter and buffer bytes of each model before and after ``convert_to_mxint8`` (every Linear that
    ``keep`` allows), counted on the CPU (the large model on the meta device)."""
    g, rows = settings["group_size"], []
    for name, build in builders(settings).items():
        model_sizes = build("meta" if name == big_name(settings) else "cpu")
        before = memory.tensor_bytes(model_sizes)
        convert_to_mxint8(model_sizes, g, keep)
        after = memory.tensor_bytes(model_sizes)
        rows.append({"model": name, "fp32 MB": before["total"] / 1e6, "MXINT8 MB": after["total"] / 1e6,
                     "saved": 1 - after["total"] / before["total"],
                     "quantizable share": (before["linear weights"] - after["linear weights"]) / before["total"],
                     "embeddings MB": before["embeddings"] / 1e6})
        del model_sizes
    return rows


def measure(settings: dict, keep, parameters: list[dict]) -> dict:
    """``mxint8_memory``'s numbers: resident and peak bytes of each model in fp32 and MXINT8 on the GPU, and
    ``parameters`` (``parameter_rows``)."""
    measured = {name: memory.compare(lambda b=build: b("cuda"), settings["group_size"], settings["memory_batch"],
                                     settings["memory_seq"], keep)
                for name, build in builders(settings).items()}
    return {"measured": measured, "parameters": parameters}
