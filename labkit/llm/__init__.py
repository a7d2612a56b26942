"""Lab 5's library: a small causal LM (``labkit.models.load_llm``) quantized group-wise in labkit's formats.

``perplexity``: IMDb token blocks, per-block NLL, perplexity with SEs, paired comparisons. ``group_quant``:
weight-only RTN per group (``quantize_llm_weights``). ``awq``: activation-aware scaling (``awq_quantize``).
``decode``: greedy decoding with a KV cache, its timing against ``generate``, weight bytes and the roofline.
The package exports no name of its modules' own (``labkit.llm.perplexity`` is the module; its function of
that name is ``labkit.llm.perplexity.perplexity``).
"""
from .awq import ScaledLinear, awq_quantize
from .decode import greedy_decode, roofline_tokens_per_s, time_decode, weight_bytes
from .group_quant import GROUP_FORMATS, QuantReport, group_spec, quantize_llm_weights
from .perplexity import Paired, Perplexity, block_nll, compare, paired, text_blocks

__all__ = ["ScaledLinear", "awq_quantize", "greedy_decode", "roofline_tokens_per_s", "time_decode", "weight_bytes",
           "GROUP_FORMATS", "QuantReport", "group_spec", "quantize_llm_weights", "Paired", "Perplexity", "block_nll",
           "compare", "paired", "text_blocks"]
