"""``QuantLinear``: an ``nn.Linear`` that fake-quantizes its input, weight and bias on every forward.

It stays an ``nn.Linear`` subclass with the same parameters, so it trains (QAT), saves and loads like
one, and pruning and LoRA still recognise it.

Under autocast it computes in fp32 (``qat_matmul="fp32"``, the reference), or, with ``qat_matmul="bf16"``
and bf16 autocast, in bf16 where its formats are exact in bf16 (``labkit.quant.fast``; ``qat_path()`` says
which path runs and why).

A forward that needs no gradient (evaluation, PTQ) fake-quantizes the weight and bias once per weight
version (and once per ``train()``/``eval()`` call), not once per batch, skips the STE mask, and on CUDA
computes the input's in one Triton pass of the format's own formula (``fast.triton_values``: the same bits;
formats without a kernel run eagerly, or compiled with ``LABKIT_INFERENCE_COMPILE=1``). Under bf16 autocast
such a forward multiplies in bf16 where the formats' values >= 2^-126 are bf16 values (``fast.why_not``),
and a layer whose input and weight formats are binary ones multiplies their signs exactly in fp16
(``sign_matmul``, CUDA).

While a format's hook holds another function than labkit's (a student's, ``installed()``), that function computes
the format's values in every forward on every device: ``fast`` takes none of its fast paths for the format
(``fast.why_reference``), the frozen weights are keyed by the function in place (installing or removing one
recomputes them), and the layer refuses CUDA graph capture (``why_not_graphed``: a replay would not call it).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import fast, sign_matmul
from .config import LinearQuantConfig


class QuantLinear(torch.nn.Linear):
    qat_matmul, compile = "fp32", True  # class defaults: layers pickled before these existed still run

    def __init__(self, in_features: int, out_features: int, bias: bool, config: LinearQuantConfig,
                 device=None, dtype=None, qat_matmul: str = "fp32", compile: bool = True):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.config = config
        self.qat_matmul = fast.check_mode(qat_matmul)
        self.compile = compile  # bf16 path: torch.compile the fused fake quantization (False: eager)
        # child modules, so formats with learnable state (e.g. residual sign) train and save
        self.q_data_in = config.data_in.quantizer() if config.data_in else None
        self.q_weight = config.weight.quantizer() if config.weight else None
        self.q_bias = config.bias.quantizer() if config.bias is not None and bias else None
        if device is not None:  # quantizer state (residual sign's scales) beside the weight it quantizes
            for q in (self.q_data_in, self.q_weight, self.q_bias):
                if q is not None:
                    q.to(device)

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, config: LinearQuantConfig, qat_matmul: str = "fp32",
                    compile: bool = True) -> "QuantLinear":
        """A copy of ``linear`` (weights and bias copied, never shared) that quantizes per ``config``."""
        q = cls(linear.in_features, linear.out_features, linear.bias is not None, config,
                device=linear.weight.device, dtype=linear.weight.dtype, qat_matmul=qat_matmul, compile=compile)
        with torch.no_grad():
            q.weight.copy_(linear.weight)
            if linear.bias is not None:
                q.bias.copy_(linear.bias)
        q.weight.requires_grad_(linear.weight.requires_grad)
        if linear.bias is not None:
            q.bias.requires_grad_(linear.bias.requires_grad)
        return q

    def quantized_weight(self) -> torch.Tensor:
        return self.q_weight(self.weight) if self.q_weight is not None else self.weight

    def qat_path(self, device_type: str = "cuda") -> tuple[str, str | None]:
        """("bf16" | "fp32", why not bf16) for a forward under autocast on ``device_type``."""
        if self.qat_matmul == "fp32":
            return "fp32", "qat_matmul='fp32'"
        if not torch.is_autocast_enabled(device_type):
            return "fp32", "autocast is off"
        if torch.get_autocast_dtype(device_type) != torch.bfloat16:
            return "fp32", f"autocast dtype is {torch.get_autocast_dtype(device_type)}, not bfloat16"
        reason = fast.why_not(self, inference=not torch.is_grad_enabled())
        return ("fp32", reason) if reason else ("bf16", None)

    def forward(self, x):
        if torch.is_autocast_enabled(x.device.type):
            if self.qat_matmul == "bf16" and self.qat_path(x.device.type)[0] == "bf16":
                return self._forward_bf16(x)
            if self._sign_path(x):
                return sign_matmul.linear(self, x)
            # Simulate the format exactly: under bf16 autocast a 16-bit fixed-point value would be
            # rounded again to bf16's 8-bit significand, and every width above 8 would look the same.
            with torch.autocast(x.device.type, enabled=False):
                return self._forward(x.float())
        return self._forward(x)

    def _sign_path(self, x) -> bool:
        """Binary formats in a forward without gradient on the fast path: exact sign GEMMs (sign_matmul)."""
        return (self.qat_matmul == "bf16" and not torch.is_grad_enabled() and x.device.type in sign_matmul.DEVICES
                and torch.get_autocast_dtype(x.device.type) == torch.bfloat16 and sign_matmul.why_not(self) is None)

    def _forward_bf16(self, x):
        """Quantized operands are exact in bf16 (``qat_path``): a bf16 matmul with fp32 accumulation."""
        c = self.config

        def operand(fmt, quantizer, t):
            if fmt is None or quantizer is None:
                return t.to(torch.bfloat16)
            quantizer.observe(t)  # a plain quantizer's checks (e.g. log's range warning), as its forward runs them
            return fast.fake_quantize_bf16(fmt, t, self.compile)

        bias = None
        if self.bias is not None:
            bias = self._frozen("bias_bf16", self.bias, lambda b: operand(c.bias, self.q_bias, b))
        weight = self._frozen("weight_bf16", self.weight, lambda w: operand(c.weight, self.q_weight, w))
        return F.linear(operand(c.data_in, self.q_data_in, x), weight, bias)

    def _forward(self, x):
        if self.q_data_in is not None:
            x = self._apply_quantizer(self.q_data_in, x)
        bias = self.bias
        if bias is not None and self.q_bias is not None:
            bias = self._frozen("bias", bias, lambda b: self._apply_quantizer(self.q_bias, b))
        weight = self.weight
        if self.q_weight is not None:
            weight = self._frozen("weight", weight, lambda w: self._apply_quantizer(self.q_weight, w))
        return F.linear(x, weight, bias)

    def _apply_quantizer(self, quantizer, t):
        if (torch.is_grad_enabled() and t.requires_grad) or not hasattr(quantizer, "inference"):
            return quantizer(t)  # the STE (or a quantizer with state of its own, e.g. residual sign)
        compile = self.compile and t.is_cuda and fast.INFERENCE_COMPILE
        return quantizer.inference(t, lambda fmt, x: fast.quantize_values(fmt, x, compile))

    def train(self, mode: bool = True):
        # Every switch of mode (model.train(), model.eval(): evaluate() calls it) drops the frozen weights:
        # fused optimizers (AdamW(fused=True), labkit's on CUDA) update parameters in place without bumping
        # their version, so a version key alone kept the PTQ weights through QAT (its evaluation read them).
        self.__dict__.pop("_frozen_cache", None)
        return super().train(mode)

    def _frozen(self, role: str, t: torch.Tensor, fn):
        """``fn(t)``, computed once per version of ``t`` and of the quantizers' own state in eval mode where no
        gradient is needed, and again after any ``train()``/``eval()`` call (see ``train``): a tensor changes by
        an in-place update, which bumps its version unless a fused optimizer made it, or by a move, which
        changes its storage; training mode recomputes (a stochastic format draws anew)."""
        if (torch.is_grad_enabled() and t.requires_grad) or self.training or t.is_inference():
            return fn(t)
        cache = self.__dict__.setdefault("_frozen_cache", {})
        key = (t._version, t.data_ptr(), t.device, t.dtype, self.qat_matmul, self.compile, self._hooks(),
               self._state_key())
        if role not in cache or cache[role][0] != key:
            value = fn(t)
            # a quantizer that sets its state on first use (residual sign's scales) did so inside fn: key after
            cache[role] = ((*key[:-1], self._state_key()), value)
        return cache[role][1]

    def _formats(self):
        return [f for f in (self.config.data_in, self.config.weight, self.config.bias) if f is not None]

    def _hooks(self) -> tuple:
        """The functions now at the formats' hooks (``NumberFormat.hook_now``): a student's installed in place of
        labkit's is another key, so no weight quantized by the other function is reused."""
        return tuple(type(f).hook_now() for f in self._formats())

    def why_not_graphed(self) -> str | None:
        """Why a CUDA graph must not replay this layer (``labkit.training.cuda_graphs``): a format whose hook holds
        another function than labkit's (a student's) is computed by that function in every forward, which a
        replay would skip. None: it may be replayed."""
        for f in self._formats():
            where = type(f).replaced()
            if where:
                return f"{f.name}: another function than labkit's is installed at {where} (a replay would not call it)"
        return None

    def _state_key(self) -> tuple:
        """Versions and storages of the quantizers' parameters and buffers (learned scales): they can change
        without the weight changing."""
        quantizers = [q for q in (self.q_data_in, self.q_weight, self.q_bias) if q is not None]
        return tuple((s._version, s.data_ptr()) for q in quantizers for s in (*q.parameters(), *q.buffers()))

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_frozen_cache", None)  # derived values: never saved or copied
        return state

    def extra_repr(self):
        mode = f", qat_matmul={self.qat_matmul!r}" if self.qat_matmul != "fp32" else ""
        return f"{super().extra_repr()}, {self.config.describe()}{mode}"
