"""labkit's own decode step for a Llama-family model: a preallocated KV cache, static shapes, and the step captured
once as a CUDA graph (the prompt's prefill as another), so a token costs one graph replay instead of hundreds of
Python-launched kernels.

``generate``'s step (transformers) is launch- and host-bound at small batch: each of a decoder layer's ~15 kernels
is a Python call with checks, and the GPU waits for the host between them. Here the step is the same arithmetic
written with fixed shapes (one token per sequence, positions held in a device tensor, the causal mask computed
from them, keys and values written into the cache in place), so the whole step, the argmax and the bookkeeping
for the next step included, records into one CUDA graph; ``generate`` then replays it ``new - 1`` times with no
host work in between. On a CPU (or ``graph=False``) the same step runs eagerly: that is how the tests check its
tokens against ``generate``'s.

The Linear layers are called as modules, so a model whose Linears were replaced (``convert_to_mxint8``: the fused
MXINT8 kernel) decodes through them unchanged.
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F

from .decode import _check_ids
from .fuse import concat_linears

_NEEDS = ("model.embed_tokens", "model.layers", "model.norm", "model.rotary_emb", "lm_head")


def _check_model(model) -> None:
    missing = [name for name in _NEEDS if _get(model, name) is None]
    if missing:
        raise TypeError(f"StaticDecoder needs a Llama-family causal LM (transformers' LlamaForCausalLM layout); "
                        f"{type(model).__name__} has no {', '.join(missing)}")
    attn = model.model.layers[0].self_attn
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        if not hasattr(attn, name):
            raise TypeError(f"StaticDecoder: the attention of {type(model).__name__} has no {name}")


def _get(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # LlamaRMSNorm: the mean square in float32, the weight applied in the input dtype
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _add_rms(h: torch.Tensor, d: torch.Tensor, weight: torch.Tensor, eps: float):
    # the residual add and the next norm: (h + d, its norm), one kernel when compiled
    s = h + d
    return s, _rms(s, weight, eps)


def _rotate_qk(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    return _rotate(q, cos, sin), _rotate(k, cos, sin)


def _gated(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


# the step's elementwise pieces, each several kernels eager; compile=True fuses each into one or two Triton kernels
PIECES = {"rms": _rms, "add_rms": _add_rms, "rotate_qk": _rotate_qk, "gated": _gated}
_COMPILED: dict = {}  # one compiled wrapper per piece in a process: every decoder shares its compiled code
# a piece compiles once per distinct shape it sees (sizes of 1 and the model widths specialize): two model shapes x
# four batches x prompt and step is ~16 graphs a piece, past dynamo's default limit of 8
RECOMPILE_LIMIT = 64


# Inductor keeps a fused piece's bf16 intermediates in float32 unless told to round them as eager does; unrounded,
# the compiled loops' tokens differed from generate's on random-init bf16 models (near-tie logits), rounded the
# pieces are eager's bits (tests/llm/test_static_decode.py)
COMPILE_OPTIONS = {"emulate_precision_casts": True}


def compiled_pieces() -> dict:
    if not _COMPILED:
        _COMPILED.update({k: torch.compile(f, dynamic=True, fullgraph=True, options=COMPILE_OPTIONS)
                          for k, f in PIECES.items()})
    return _COMPILED


class StaticDecoder:
    """Greedy decoding of ``model`` with labkit's static-shape step (``graph``: captured as a CUDA graph; default:
    on CUDA). ``generate(input_ids, new)`` returns the ``new`` tokens (``(batch, new)``, int64); EOS is not a stop
    (every sequence makes ``new`` tokens), as in a throughput benchmark.

    ``fuse``: q, k and v as one Linear, and gate and up as one (``fuse.concat_linears``: copies of their weights, made
    here, so build the decoder after any conversion of the model's Linears): 4 GEMMs a layer instead of 7.

    A graph belongs to one (batch, prompt length, new tokens); a call of another shape captures another (cached)."""

    def __init__(self, model: torch.nn.Module, graph: bool | None = None, compile: bool = False,
                 fuse: bool = False):
        _check_model(model)
        if model.config.hidden_act != "silu":
            raise ValueError(f"StaticDecoder computes the MLP's gate with SiLU; the model's hidden_act is "
                             f"{model.config.hidden_act!r}")
        self.model = model
        p = next(model.parameters())
        self.device, self.dtype = p.device, p.dtype
        if graph is None:
            graph = self.device.type == "cuda"
        if graph and self.device.type != "cuda":
            raise ValueError(f"graph=True needs the model on a CUDA device; it is on {self.device}")
        self.graph = bool(graph)
        self.compiled = bool(compile)
        self.fn = compiled_pieces() if compile else PIECES
        c = model.config
        self.heads, self.kv_heads = c.num_attention_heads, c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.fused = bool(fuse)
        self._qkv_sizes = (self.heads * self.head_dim, self.kv_heads * self.head_dim, self.kv_heads * self.head_dim)
        self._proj = [(concat_linears([l.self_attn.q_proj, l.self_attn.k_proj, l.self_attn.v_proj]),
                       concat_linears([l.mlp.gate_proj, l.mlp.up_proj])) for l in model.model.layers] if fuse else None
        self._states: dict[tuple[int, int, int], dict] = {}

    # -- the arithmetic: T new tokens per sequence at `positions` (T,) ------------------------------------------
    def _forward(self, st: dict, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        m, fn = self.model.model, self.fn
        B, T = tokens.shape
        h = m.embed_tokens(tokens)
        cos = st["cos"].index_select(0, positions)[None, None]  # (1, 1, T, head_dim)
        sin = st["sin"].index_select(0, positions)[None, None]
        mask = (st["key_pos"][None, :] <= positions[:, None])[None, None]  # (1, 1, T, max_len): causal by position
        layers = m.layers
        norm = layers[0].input_layernorm
        x = fn["rms"](h, norm.weight, norm.variance_epsilon)
        for i, layer in enumerate(layers):
            a, mlp = layer.self_attn, layer.mlp
            if self.fused:
                q, k, v = self._proj[i][0](x).split(self._qkv_sizes, dim=-1)
            else:
                q, k, v = a.q_proj(x), a.k_proj(x), a.v_proj(x)
            q = q.view(B, T, self.heads, self.head_dim).transpose(1, 2)
            k = k.view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
            v = v.view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
            q, k = fn["rotate_qk"](q, k, cos, sin)
            keys, values = st["k"][i], st["v"][i]
            keys.index_copy_(2, positions, k)
            values.index_copy_(2, positions, v)
            o = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=self.scale,
                                               enable_gqa=self.heads != self.kv_heads)
            norm = layer.post_attention_layernorm
            h, x = fn["add_rms"](h, a.o_proj(o.transpose(1, 2).reshape(B, T, self.heads * self.head_dim)),
                                 norm.weight, norm.variance_epsilon)
            if self.fused:
                gate, up = self._proj[i][1](x).chunk(2, dim=-1)
            else:
                gate, up = mlp.gate_proj(x), mlp.up_proj(x)
            # the residual add with the next layer's input norm (the model's final norm after the last layer)
            norm = layers[i + 1].input_layernorm if i + 1 < len(layers) else m.norm
            h, x = fn["add_rms"](h, mlp.down_proj(fn["gated"](gate, up)), norm.weight, norm.variance_epsilon)
        logits = self.model.lm_head(x[:, -1:].contiguous())
        return logits[:, -1].argmax(dim=-1)

    def _prefill(self, st: dict) -> None:
        # the prompt in st["prompt"] fills cache positions 0..P-1 and gives the first new token; pos, slot set for
        # the steps after it
        P = st["prompt"].shape[1]
        first = self._forward(st, st["prompt"], st["key_pos"][:P])
        st["out"][:, 0].copy_(first)
        st["token"].copy_(first[:, None])
        st["pos"].fill_(P)
        st["slot"].fill_(1)

    def _step(self, st: dict) -> None:
        # one token per sequence at position st["pos"]; writes it to out[:, slot] and advances pos and slot
        nxt = self._forward(st, st["token"], st["pos"])
        st["out"].index_copy_(1, st["slot"], nxt[:, None])
        st["token"].copy_(nxt[:, None])
        st["pos"].add_(1)
        st["slot"].add_(1)

    # -- buffers and the graph -----------------------------------------------------------------------------------
    def _state(self, batch: int, prompt: int, new: int) -> dict:
        key = (batch, prompt, new)
        if key in self._states:
            return self._states[key]
        max_len, dev = prompt + new, self.device
        layers = len(self.model.model.layers)
        shape = (layers, batch, self.kv_heads, max_len, self.head_dim)
        pos_ids = torch.arange(max_len, device=dev)[None]
        probe = torch.zeros(1, dtype=self.dtype, device=dev)
        cos, sin = self.model.model.rotary_emb(probe, pos_ids)  # transformers' own tables (rope scaling included)
        st = {"k": torch.zeros(shape, dtype=self.dtype, device=dev),
              "v": torch.zeros(shape, dtype=self.dtype, device=dev),
              "cos": cos[0].to(self.dtype), "sin": sin[0].to(self.dtype), "key_pos": pos_ids[0],
              "token": torch.zeros(batch, 1, dtype=torch.long, device=dev),
              "pos": torch.full((1,), prompt, dtype=torch.long, device=dev),
              "slot": torch.ones(1, dtype=torch.long, device=dev),
              "out": torch.zeros(batch, new, dtype=torch.long, device=dev),
              "prompt": torch.zeros(batch, prompt, dtype=torch.long, device=dev), "graph": None, "prefill": None}
        if self.graph:
            st["prefill"], st["graph"] = self._capture(st)
        self._states[key] = st
        return st

    def _capture(self, st: dict):
        """(prefill graph, step graph): the prefill of this state's prompt length and one decode step."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        # the steps at position and slot 0 while warming up and capturing: always in range (a replay reads the
        # values of then)
        with torch.cuda.stream(side):  # warm-up off the capture: Triton compiles, cuBLAS picks its kernels
            for _ in range(2):
                self._prefill(st)
                st["pos"].zero_()
                st["slot"].zero_()
                self._step(st)
        torch.cuda.current_stream(self.device).wait_stream(side)
        prefill, step = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(prefill):
            self._prefill(st)
        st["pos"].zero_()
        st["slot"].zero_()
        with torch.cuda.graph(step):
            self._step(st)
        return prefill, step

    def _compiling(self):
        return torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT) if self.compiled else contextlib.nullcontext()

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        with self._compiling():
            return self._generate(input_ids, max_new_tokens)

    def _generate(self, input_ids: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        ids = _check_ids(input_ids).to(self.device)
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens={max_new_tokens!r}: must be an int >= 1")
        B, P = ids.shape
        st = self._state(B, P, max_new_tokens)
        st["prompt"].copy_(ids)
        graphed = st["graph"] is not None  # replays of the captured prefill and step, else the same calls eager
        prefill, step = (st["prefill"].replay, st["graph"].replay) if graphed else (
            lambda: self._prefill(st), lambda: self._step(st))
        prefill()
        for _ in range(max_new_tokens - 1):
            step()
        return st["out"].clone()

    @torch.no_grad()
    def step_ms(self, input_ids: torch.Tensor, max_new_tokens: int, rounds: int = 3) -> float:
        """Milliseconds of one decode step alone (no prefill): the median over ``rounds`` of the ``new - 1``
        graph replays of a ``generate`` of this shape, timed with CUDA events (needs ``graph``)."""
        if not self.graph:
            raise ValueError("step_ms times graph replays: build the decoder with graph=True on a CUDA device")
        if max_new_tokens < 2:
            raise ValueError(f"max_new_tokens={max_new_tokens}: step_ms needs at least 2 (one step after the prefill)")
        self.generate(input_ids, max_new_tokens)  # the state of this shape, its cache filled by a prefill
        st = self._states[(*input_ids.shape, max_new_tokens)]
        times = []
        for _ in range(rounds):
            st["pos"].fill_(input_ids.shape[1])
            st["slot"].fill_(1)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(max_new_tokens - 1):
                st["graph"].replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / (max_new_tokens - 1))
        return sorted(times)[len(times) // 2]


def step_bytes(model: torch.nn.Module) -> int:
    """Bytes a decode step reads for weights: every parameter and buffer of the decoder layers, the final norm and
    the LM head, each tensor once (the LM head tied to the embedding: its table, read whole by the head). The
    embedding lookup reads only the batch's rows, so the table counts once, as the head's."""
    m = model.model
    seen, total = set(), 0
    for module in (m.layers, m.norm, model.lm_head):
        for t in list(module.parameters()) + list(module.buffers()):
            key = t.untyped_storage().data_ptr() if t.device.type != "meta" else id(t)
            if key in seen or t.dtype == torch.int64:
                continue
            seen.add(key)
            total += t.numel() * t.element_size()
    return total
