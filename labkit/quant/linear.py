"""``QuantLinear``: an ``nn.Linear`` that fake-quantizes its input, weight and bias on every forward.

It stays an ``nn.Linear`` subclass with the same parameters, so it trains (QAT), saves and loads like
one, and pruning and LoRA still recognise it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .config import LinearQuantConfig


class QuantLinear(torch.nn.Linear):
    def __init__(self, in_features: int, out_features: int, bias: bool, config: LinearQuantConfig,
                 device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.config = config
        # child modules, so formats with learnable state (e.g. residual sign) train and save
        self.q_data_in = config.data_in.quantizer() if config.data_in else None
        self.q_weight = config.weight.quantizer() if config.weight else None
        self.q_bias = config.bias.quantizer() if config.bias is not None and bias else None

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, config: LinearQuantConfig) -> "QuantLinear":
        """A copy of ``linear`` (weights and bias copied, never shared) that quantizes per ``config``."""
        q = cls(linear.in_features, linear.out_features, linear.bias is not None, config,
                device=linear.weight.device, dtype=linear.weight.dtype)
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

    def forward(self, x):
        if torch.is_autocast_enabled(x.device.type):
            # Simulate the format exactly: under bf16 autocast a 16-bit fixed-point value would be
            # rounded again to bf16's 8-bit significand, and every width above 8 would look the same.
            with torch.autocast(x.device.type, enabled=False):
                return self._forward(x.float())
        return self._forward(x)

    def _forward(self, x):
        if self.q_data_in is not None:
            x = self.q_data_in(x)
        bias = self.bias
        if bias is not None and self.q_bias is not None:
            bias = self.q_bias(bias)
        return F.linear(x, self.quantized_weight(), bias)

    def extra_repr(self):
        return f"{super().extra_repr()}, {self.config.describe()}"
