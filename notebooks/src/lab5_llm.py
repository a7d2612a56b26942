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
import torch

from labkit import redraw
from labkit.exercises import check
from labkit.labs.lab5_llm import Runs
from labkit.llm import decode_speed, group_spec
from labkit.llm.perplexity import perplexity
from labkit.models import load_llm
from labkit.narrate import lab5_llm as narrate
from labkit.report import say
from labkit.results import provenance, save_results
from labkit.run.profiles import lab_settings

S = lab_settings("lab5_llm", PROFILE, **OVERRIDES)
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
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
R = Runs(model.to(DEVICE), tok, S)
model, blocks, calib, base = R.model, R.blocks, R.calib, R.base
say(f"float32 perplexity {base.ppl:.3f} ± {base.ppl_se:.3f} (SE over {S['blocks']} blocks of {S['block_len']} "
    f"tokens, {base.tokens:,} predicted tokens)")

# %% [markdown]
# ## Exercise: a block's NLL from the logits
#
# Write `token_nll(logits, ids)`: `ids` `(n, L)` are `n` blocks of token ids and `logits` `(n, L, vocab)` the
# model's outputs on them; return each block's mean negative log-likelihood (nats) of its `L - 1` next-token
# predictions, a float64 tensor `(n,)`: the block NLLs that `perplexity` averages. Traps: the logits at position t
# predict token t+1 (score `logits[:, :-1]` against `ids[:, 1:]`; the last position predicts nothing); take a
# log-softmax (the log of a softmax underflows to log 0 = -inf for an unlikely token), in float32 whatever the
# logits' dtype (a bf16 log-softmax keeps 3 significant digits); one mean per block, not one over every token.

# %% tags=["exercise"]
def token_nll(logits, ids):
    # each block's mean over its L - 1 predictions of -log p(token t+1 | tokens 0..t), float64 (n,)
    ### BEGIN SOLUTION
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    return -logp.gather(-1, ids[:, 1:, None]).squeeze(-1).double().mean(dim=1)
    ### END SOLUTION


# %% tags=["check"]
nll = check("lab5.token_nll", token_nll)

# %% [markdown]
# Your `token_nll` (labkit's until it passes its check) turns the model's logits on the first two evaluation
# blocks into their perplexity, against labkit's `block_nll`: they agree to float32 rounding.

# %%
say(f"2 blocks' perplexity: {perplexity(model, blocks[:2], nll_fn=nll.fn).ppl:.4f} by your token_nll, "
    f"{perplexity(model, blocks[:2]).ppl:.4f} by labkit's")

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
rows = R.sweep()
say(narrate.sweep_text(rows))
redraw.show("lab5_llm", "perplexity", {"base": R.ref, "rows": rows}, S)

# %% [markdown]
# ## AWQ against RTN, paired over blocks
#
# AWQ scales each input channel by `s = mean|x|^alpha` before rounding (and divides the input by it), so the
# channels that carry large activations get finer steps; alpha is searched per layer on calibration tokens from
# training reviews (alpha 0 is RTN). Both models run on the same blocks, so we read the per-block NLL differences:
# the pairing removes the blocks' own spread in difficulty, which dominates either perplexity's SE.

# %% [markdown]
# ## Exercise: AWQ's scale search for one Linear
#
# Write `awq_scales(w, x, width, group_size, alphas)`: `w` `(out, in)` is a Linear's weight and `x` `(tokens, in)`
# its calibration inputs. For each alpha of `alphas` (ascending), the scale of input channel j is
# `s_j = mean|x_j|^alpha` over the tokens, clamped at 1e-4, then divided by `sqrt(max(s) * min(s))`; quantize
# `w * s` as `group_rtn` does (symmetric integer, fp16 scale per group of `group_size`) and measure the output
# error `mean(((x / s) @ Q(w * s).T - x @ w.T) ** 2)`. Return `(alpha, s)` of the least error, `s` in float32.
# Traps: the input is divided by `s` (that is what keeps the product unchanged); the error is the outputs', not
# the weights'; the mean of |x|, not of x; a dead channel (mean|x| = 0) needs the clamp; equal errors keep the
# smaller alpha. The cell is graded on its own: do the rounding inside it (copy your `group_rtn`'s lines).

# %% tags=["exercise"]
def awq_scales(w, x, width, group_size, alphas):
    # the alpha (and its s) whose quantized w * s, fed x / s, gives the outputs closest to x @ w.T
    ### BEGIN SOLUTION
    def rtn(v):  # group_rtn's symmetric integer rounding
        g = v.reshape(v.shape[0], -1, group_size)
        qmax = 2 ** (width - 1) - 1
        step = (g.abs().amax(dim=-1, keepdim=True) / qmax).half().to(v.dtype)
        safe = torch.where(step == 0, torch.ones_like(step), step)
        return (torch.clamp(torch.round(g / safe), -qmax - 1, qmax) * step).reshape(v.shape)

    m, best = x.abs().mean(dim=0), None
    for alpha in alphas:
        s = m.pow(alpha).clamp(min=1e-4)
        s = s / (s.max() * s.min()).sqrt()
        err = ((x / s) @ rtn(w * s).T - x @ w.T).pow(2).mean().item()
        if best is None or err < best[0]:
            best = (err, float(alpha), s)
    return best[1], best[2]
    ### END SOLUTION


# %% tags=["check"]
scales = check("lab5.awq_scales", awq_scales)

# %% [markdown]
# Your `awq_scales` (labkit's until it passes its check) on layer 0's query projection, whose input is the
# RMS-normed embeddings of a calibration block: the alpha it picks at AWQ's first width, and how far s spreads.

# %%
x0 = model.model.layers[0].input_layernorm(model.model.embed_tokens(calib[0].to(model.device))).detach()
alpha, s = scales.fn(model.model.layers[0].self_attn.q_proj.weight.detach(), x0, S["awq_widths"][0], S["awq_group"], S["alphas"])
say(f"layer 0's q_proj on {len(x0)} calibration tokens, int{S['awq_widths'][0]} g{S['awq_group']}: your alpha "
    f"{alpha:g}, s from {s.min():.3g} to {s.max():.3g}")

# %%
awq_rows = R.awq_rows()
say(narrate.awq_text(awq_rows))
save_results("lab5", "awq", {"base": R.ref, "rows": awq_rows}, S)

# %% [markdown]
# ## Which layers to keep wider
#
# Each kind of projection (the query, key, value and output projections of attention, the MLP's gate, up and
# down projections) is rounded alone to `sens_width` bits in groups of `awq_group`, every other weight left in
# float32, and read paired against float32 over the evaluation blocks. The most harmful kind is a selection from
# `len(sens_kinds)`, so it is measured again on `sens_blocks` fresh test blocks against the runner-up before we
# read it. Then the whole model at `sens_width` bits, with that one kind kept one bit wider, against the whole
# model at `sens_width` bits: what the extra bits buy.

# %%
sens = R.sensitivity()
save_results("lab5", "sensitivity", sens, S)
say(narrate.sensitivity_text(sens["kinds"], sens["base"], S["sens_width"], S["awq_group"]))

# %% [markdown]
# ## Greedy decoding with a KV cache
#
# `labkit.llm.greedy_decode` runs one forward over the prompt (the prefill), then one token at a time, reusing
# the keys and values of earlier positions from the cache; it must make exactly the tokens `generate` makes
# greedily. Its speed is timed against `generate` on labkit's timer (`labkit.perf.timing`, first call and
# warm-up apart, the median of steady calls). On a CPU at batch 1 both are bound by reading the weights.

# %%
dec = R.decode()
assert dec["tokens_equal"] and dec["static_tokens_equal"], dec["tokens"]
save_results("lab5", "decode", dec, S)
say(narrate.decode_text(dec))

# %% [markdown]
# ## On a GPU: decoding near the memory-bandwidth limit
#
# At batch 1 a decode step reads every weight once to make one token per sequence, so its floor is weight bytes /
# memory bandwidth: the roofline (the card's copy rate is measured in the same run). `generate` is far above it:
# each of a layer's ~15 kernels is launched from Python, with checks, and the GPU waits for the host between
# them. labkit's step (`labkit.llm.static_decode.StaticDecoder`) has static shapes: a preallocated KV cache, the
# position in a device tensor, the causal mask computed from it, the argmax and the next step's input written in
# place; so the whole step records once into a CUDA graph, and a token is one replay. A graph still runs every
# small kernel of the step; `compile=True` fuses its norms, rotary and gate (torch.compile) so it runs fewer. Each
# row also times the step alone (`step_ms`: the replays after the prefill). With every Linear as
# `MXINT8Linear` (8.25 bits a weight) the fused kernel reads half the bytes of bf16, which the roofline halves.
# The models are random-init Llamas of SmolLM2-135M's and SmolLM2-1.7B's shapes: a step's speed does not depend
# on the weights' values. On a CPU this section does not run; the answers read the full profile's H200 run.

# %%
if DEVICE.type == "cuda":
    speed = decode_speed.sweep(S["speed_shapes"], S["speed_batches"], S["speed_tokens"], S["speed_prompt"],
                               S["speed_repeats"], device=DEVICE)
    speed["ratios"] = decode_speed.ratios(speed)
    redraw.show("lab5_llm", "decode_speed", speed, S)
else:
    say("no CUDA device here: the decode-speed sweep times CUDA graphs; the answers read the committed full "
        "profile's run")

# %% [markdown] tags=["answer-key"]
# ## Answers from the numbers
#
# Rendered by `labkit.answers.lab5_llm` from the JSON this notebook just saved; `python -m labkit.redraw lab5_llm
# --answers` re-renders it without measuring.

# %% tags=["answer-key"]
redraw.close("lab5_llm", S)
