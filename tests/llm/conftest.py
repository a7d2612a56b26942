"""Fixtures of the LLM tests: the real SmolLM2-135M-Instruct (loaded once per session from labkit's cache) and
tiny random-init Llamas of the same architecture for everything that does not need real weights."""
import pytest
import torch

from _llm_tiny import TINY, tiny_llama
from labkit import models


@pytest.fixture(scope="session")
def smollm2():
    """``(model, tokenizer)``: the real model, fp32 (the first run of a checkout dequantizes and caches it)."""
    return models.load_llm()


@pytest.fixture(scope="session")
def imdb_blocks(smollm2):
    """3 held-out IMDb test blocks of 64 tokens."""
    from labkit.llm.perplexity import text_blocks

    return text_blocks(smollm2[1], 3, 64, split="test", seed=0)


@pytest.fixture()
def tiny():
    return tiny_llama()


@pytest.fixture()
def random_blocks():
    return torch.randint(0, TINY["vocab_size"], (4, 32), generator=torch.Generator().manual_seed(1))
