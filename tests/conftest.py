import os

# Tests run offline: the hub is never contacted (CI has no route to it).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(scope="session")
def tiny_bert():
    """A small random BERT classifier (fast, offline) for graph/LoRA tests."""
    from labkit import models

    torch.manual_seed(0)
    return models.from_config(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                              intermediate_size=128, vocab_size=30522)


@pytest.fixture(scope="session")
def default_model():
    from labkit import models

    return models.load_model()
