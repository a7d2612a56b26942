"""A tiny random-init Llama of SmolLM2's architecture, for the LLM tests that need no real weights."""
from labkit import models

TINY = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=256, max_position_embeddings=256)


def tiny_llama(seed: int = 0, **fields):
    """A 2-layer Llama (hidden 64, GQA 4:2 heads, vocab 256), tied embeddings as SmolLM2's, fp32, eval mode."""
    return models.llm_from_config("smollm2-135m", seed=seed, **{**TINY, **fields})
