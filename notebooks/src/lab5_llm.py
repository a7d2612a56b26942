# %% [markdown]
# # Lab 5: quantizing a small LLM, group-wise, and decoding it with a KV cache
#
# The model is SmolLM2-135M-Instruct (`labkit.models.load_llm`: 30 layers, hidden 576, tied embeddings), run on
# held-out IMDb reviews as plain text. We measure its perplexity with a standard error over independent token
# blocks, sweep weight-only post-training quantization (round-to-nearest, one scale per group of weights) over
# bits, group sizes and labkit's number formats, compare activation-aware scaling (AWQ) with plain rounding on
# the same blocks, and check that labkit's greedy decoding loop with a KV cache makes the tokens `generate` makes.

# %% tags=["parameters"]
PROFILE = "auto"   # smoke | quick | full | auto (full on a CUDA machine, quick on CPU)
OVERRIDES = {}     # any setting of the profile, e.g. {"blocks": 8, "int_widths": [4]}

# %%
import copy

import torch

from labkit import redraw
from labkit.exercises import check
from labkit.llm import awq_quantize, greedy_decode, group_spec, paired, quantize_llm_weights, text_blocks, time_decode
from labkit.llm.decode import generate_greedy
from labkit.llm.perplexity import perplexity
from labkit.models import load_llm
from labkit.report import say
from labkit.results import provenance, save_results
from labkit.run.profiles import lab_settings

S = lab_settings("lab5_llm", PROFILE, **OVERRIDES)
print(S, "\ndevice:", provenance()["device"])

# %% [markdown]
# ## The model and its perplexity
#
# The weights ship as a Q4_1 GGUF file: in every Linear, each block of 32 weights along a row already holds at
# most 16 distinct values `d * q + m`. Dequantized to float32 they are our reference, so 8 bits per group of 32
# lose next to nothing by construction (a finer grid over values that are already on a 4-bit one), and 4 bits
# per group of 32 is the format the weights came in, on a different grid (symmetric here, with a zero offset there).
#
# Perplexity is exp(mean NLL) over `blocks` blocks of `block_len` tokens, each block the start of its own test
# review, so blocks are independent draws: SE(NLL) = sd(block NLLs) / sqrt(k), SE(ppl) = ppl * SE(NLL).

# %%
model, tok = load_llm()
blocks = text_blocks(tok, S["blocks"], S["block_len"], "test", S["seed"])
calib = text_blocks(tok, S["calib_blocks"], S["block_len"], "train", S["seed"])  # AWQ's, from other reviews
base = perplexity(model, blocks, S["batch_size"])
say(f"float32 perplexity {base.ppl:.3f} ± {base.ppl_se:.3f} (SE over {S['blocks']} blocks of {S['block_len']} "
    f"tokens, {base.tokens:,} predicted tokens)")

# %% [markdown]
# ## Weight-only PTQ: bits, group sizes and formats
#
# `labkit.llm.group_quant.quantize_llm_weights` rounds every Linear but the LM head (tied to the embedding), in
# groups of `group_size` consecutive weights along the input dimension, each group with its own fp16 scale. The
# group size must divide every input dimension (576 and 1536): 32, 64 and 192 do; 128 does not divide 576. The
# x axis is the average stored bits per quantized weight, the scales included (4 bits at g32: 4 + 16/32 = 4.5).

# %% [markdown]
# ## Exercise: group-wise RTN of one weight
#
# Write `group_rtn(w, width, group_size)`: cut each row of `w` into groups of `group_size` consecutive weights,
# give each group the scale `s = max|w| / (2^(width-1) - 1)` **stored in fp16** (round it: the stored scale is
# the one used), round `w / s` to the nearest integer (half to even, as `torch.round` does), clamp it to
# `[-2^(width-1), 2^(width-1) - 1]`, and return `q * s` in `w`'s shape. Traps: groups run along the last (input)
# dimension, not over the whole row; an all-zero group has `s = 0` and must come back as zeros, not NaN.

# %% tags=["exercise"]
def group_rtn(w, width, group_size):
    # symmetric integer RTN of w per group of group_size along its last dimension, fp16 scales, dequantized
    ### BEGIN SOLUTION
    g = w.reshape(*w.shape[:-1], -1, group_size)
    qmax = 2 ** (width - 1) - 1
    s = (g.abs().amax(dim=-1, keepdim=True) / qmax).half().to(w.dtype)
    safe = torch.where(s == 0, torch.ones_like(s), s)
    return (torch.clamp(torch.round(g / safe), -qmax - 1, qmax) * s).reshape(w.shape)
    ### END SOLUTION


# %% tags=["check"]
rtn = check("lab5.group_rtn", group_rtn)

# %% [markdown]
# Your `group_rtn` (labkit's until it passes its check) on the first attention layer's query weight, at the
# sweep's first width and group size, against labkit's `group_spec(...).quantize`: they agree to rounding.

# %%
w, (b, g) = model.model.layers[0].self_attn.q_proj.weight.detach(), (S["int_widths"][0], S["group_sizes"][0])
gap = (rtn.fn(w, b, g) - group_spec("integer", b, g).quantize(w)).abs().max().item()
say(f"int{b} g{g} on q_proj {tuple(w.shape)}: largest difference from labkit {gap:.2e}")

# %%
runs = {}


def measure(fmt, width, group, method="rtn"):
    # quantize a copy of the model one way and measure it on the evaluation blocks (cached per configuration)
    if (fmt, width, group, method) not in runs:
        q = copy.deepcopy(model)
        report = (awq_quantize(q, calib, fmt, width, group, alphas=S["alphas"], n_samples=S["awq_samples"],
                               batch_size=S["batch_size"], seed=S["seed"]) if method == "awq"
                  else quantize_llm_weights(q, fmt, width, group))
        p = perplexity(q, blocks, S["batch_size"])
        alphas = [layer.extra["alpha"] for layer in report.layers.values() if "alpha" in layer.extra]
        runs[fmt, width, group, method] = {"format": fmt, "width": width, "group_size": group, **report.summary(),
                                           **p.summary(), "per_block": list(p.per_block), "alphas": alphas}
    return runs[fmt, width, group, method]


ref = {**base.summary(), "per_block": list(base.per_block)}
rows = [measure("integer", w, g) for w in S["int_widths"] for g in S["group_sizes"]]
rows += [measure(f, S["other_width"], S["other_group"]) for f in S["other_formats"]]
say("\n".join(f"{r['spec']}: {r['weight_bits']:.3f} bits, ppl {r['ppl']:.3f} ± {r['ppl_se']:.3f}" for r in rows))
redraw.show("lab5_llm", "perplexity", {"base": ref, "rows": rows}, S)

# %% [markdown]
# ## AWQ against RTN, paired over blocks
#
# AWQ scales each input channel by `s = mean|x|^alpha` before rounding (and divides the input by it), so the
# channels that carry large activations get finer steps; alpha is searched per layer on calibration tokens from
# training reviews (alpha 0 is RTN). Both models run on the same blocks, so we read the per-block NLL differences:
# the pairing removes the blocks' own spread in difficulty, which dominates either perplexity's SE.

# %%
awq_rows = []
for w in S["awq_widths"]:
    rtn, awq = measure("integer", w, S["awq_group"]), measure("integer", w, S["awq_group"], "awq")
    awq_rows.append({"width": w, "group_size": S["awq_group"], "rtn": rtn, "awq": awq,
                     "paired": paired(awq["per_block"], rtn["per_block"]).summary()})
    say(f"int{w} g{S['awq_group']}: RTN {rtn['ppl']:.3f}, AWQ {awq['ppl']:.3f}; AWQ - RTN mean NLL "
        f"{awq_rows[-1]['paired']['nll_diff']:+.4f} ± {awq_rows[-1]['paired']['nll_diff_se']:.4f}")
save_results("lab5", "awq", {"base": ref, "rows": awq_rows}, S)

# %% [markdown]
# ## Greedy decoding with a KV cache
#
# `labkit.llm.greedy_decode` runs one forward over the prompt (the prefill), then one token at a time, reusing
# the keys and values of earlier positions from the cache; it must make exactly the tokens `generate` makes
# greedily. Its speed is timed against `generate` on labkit's timer (`labkit.perf.timing`, first call and
# warm-up apart, the median of steady calls). On a CPU at batch 1 both are bound by reading the weights.

# %%
prompt = blocks[:1, :S["decode_prompt"]]
ours, theirs = greedy_decode(model, prompt, S["decode_tokens"]), generate_greedy(model, prompt, S["decode_tokens"])
assert ours.tolist() == theirs.tolist(), (ours, theirs)
timed = time_decode(model, prompt, S["decode_tokens"], repeats=S["decode_repeats"])
save_results("lab5", "decode", {**timed, "tokens_equal": ours.tolist() == theirs.tolist(), "tokens": ours.tolist(),
                                "text": tok.decode(ours[0])}, S)
say(f"same {S['decode_tokens']} tokens as generate; {timed['decode_ms_per_token']:.1f} ms/token (generate "
    f"{timed['generate_ms_per_token']:.1f}): {tok.decode(ours[0])!r}")

# %% [markdown] tags=["answer-key"]
# ## Answers from the numbers
#
# Rendered by `labkit.answers.lab5_llm` from the JSON this notebook just saved; `python -m labkit.redraw lab5_llm
# --answers` re-renders it without measuring.

# %% tags=["answer-key"]
redraw.close("lab5_llm", S)
