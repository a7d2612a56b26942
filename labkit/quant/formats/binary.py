"""Binary formats: ``binary`` (sign), ``binary_scaling`` (sign times a mean-|x| scale, XNOR-Net) and
``binary_residual_sign`` (multi-level residual binarization with learnable level scales, ReBNet).

All are elementwise on tensors of any shape (2-D weights, N-D activations, 1-D biases). sign(0) = +1,
and -0.0 counts as 0. NaN inputs stay NaN.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from .. import sign_matmul
from ._util import check_bool, check_range
from .base import FormatSpec, NumberFormat, Quantizer, register


def _sign(x: torch.Tensor) -> torch.Tensor:
    """+1 where x >= 0 (0 and -0.0 included), -1 where x < 0, NaN where x is NaN."""
    s = torch.where(x >= 0, 1.0, -1.0).to(x.dtype)
    return torch.where(torch.isnan(x), x, s)


@register
@dataclass(frozen=True)
class BinaryFormat(NumberFormat):
    """Value set ``{-1, +1}``: deterministic q = +1 if x >= 0 else -1.

    ``stochastic=True`` (BinaryConnect): q = +1 with probability clip((x + 1) / 2, 0, 1), else -1, drawn
    from torch's global generator (``torch.rand_like``), so ``torch.manual_seed`` makes it repeatable;
    no generator object is stored. The quantizer module draws only in training mode and uses the
    deterministic sign in eval mode, so evaluation is repeatable; ``fake_quantize`` always draws.
    STE: the gradient passes where |x| <= 1 and is zero beyond (the hardtanh STE of BinaryNet).
    """

    name = "binary"
    # width fixed by definition; biases stay fp32 (binarizing a bias to +-1 destroys it; BNNs keep them)
    spec = FormatSpec(
        study=lambda w: {"stochastic": False},
        space={},
        fixed={"stochastic": False},
        why="one bit keeps only the sign of every input and weight: magnitudes, which attention scores, "
            "LayerNorm inputs and the classifier's margin are made of, are gone",
        min_width=None, roles=("data_in", "weight"))
    stochastic: bool = False

    def validate(self):
        check_bool(self.name, "stochastic", self.stochastic)

    def value_set(self) -> str:
        rule = "P(+1) = clip((x+1)/2, 0, 1) in training" if self.stochastic else "+1 iff x >= 0"
        return f"{{-1, +1}} ({rule})"

    def quantize_values(self, x):
        if not self.stochastic:
            return _sign(x)
        p_plus = ((x.detach().float() + 1) / 2).clamp(0, 1)
        q = torch.where(torch.rand_like(p_plus) < p_plus, 1.0, -1.0).to(x.dtype)
        return torch.where(torch.isnan(x), x, q)

    def pass_mask(self, x):
        return x.abs() <= 1

    def row_local(self):  # elementwise; stochastic rounding draws random numbers in tensor order
        return not self.stochastic

    def bits_per_element(self, shape):
        return 1.0

    def why_not_bf16(self, normal_only=False):
        if self.stochastic:
            return f"{self.describe()}: draws in training and takes the sign in eval mode (its quantizer decides)"
        return None  # +-1 (NaN stays NaN)

    def sign_terms(self, x):
        if self.stochastic:
            return None
        return [torch.ones((), dtype=torch.float32, device=x.device)], sign_matmul.signs(x)

    def quantizer(self):
        return _BinaryQuantizer(self)


class _BinaryQuantizer(Quantizer):
    """Stochastic binarization while training, the deterministic sign in eval mode."""

    def forward(self, x):
        if self.fmt.stochastic and not self.training:
            return dataclasses.replace(self.fmt, stochastic=False).fake_quantize(x)
        return self.fmt.fake_quantize(x)

    def plain(self) -> bool:
        return not self.fmt.stochastic

    def inference(self, x, values=None):
        if self.fmt.stochastic:  # random while training, another format in eval mode: the module's own forward
            return self(x)
        return super().inference(x, values)


@register
@dataclass(frozen=True)
class BinaryScalingFormat(NumberFormat):
    """q = alpha * sign(x) (sign(0) = +1): value set ``{-alpha, +alpha}`` per scale group.

    ``per_channel=True`` (default): one alpha = mean(|x|) over the last dimension for every other index:
    per output channel (row) of a weight ``(out, in)`` as in XNOR-Net, per token of an activation
    ``(..., features)``, and a single alpha for a 1-D tensor (a bias). ``per_channel=False``: one alpha =
    mean(|x|) for the whole tensor. A group of zeros has alpha = 0 and stays 0. alpha is the L2-optimal
    scale for fixed signs and is stored in fp32 (32 bits per group, amortised in ``bits_per_element``).
    STE: identity everywhere (pass_mask None): the scale follows the data, so nothing saturates; alpha's
    own dependence on x is not differentiated (the plain STE of XNOR-Net's weight binarization).
    """

    name = "binary_scaling"
    spec = FormatSpec(
        study=lambda w: {"per_channel": True},
        space={},
        fixed={"per_channel": True},
        why="one bit plus a scale per row keeps each row's mean magnitude but not the spread inside it; the inputs "
            "are binarized too, so every token vector becomes a sign pattern",
        min_width=None, roles=("data_in", "weight"))
    per_channel: bool = True

    def validate(self):
        check_bool(self.name, "per_channel", self.per_channel)

    def value_set(self) -> str:
        per = "row (mean over the last dim)" if self.per_channel else "tensor"
        return f"{{-alpha, +alpha}}, alpha = mean|x| per {per}, fp32"

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        """alpha in float32 (float64 for float64 inputs), as stored.

        The mean accumulates in float64: a float32 mean of n copies of alpha can be an ulp off alpha,
        and then quantizing alpha * sign(x) again moved it (not idempotent); in float64 it is exact for
        float32 (and narrower) inputs. float64 inputs have no wider accumulator: there it can stay an ulp off.
        """
        a = x.detach().abs()
        if self.per_channel and x.dim() > 0:
            mean = a.mean(dim=-1, keepdim=True, dtype=torch.float64)
        else:
            mean = a.mean(dtype=torch.float64)
        return mean.to(torch.promote_types(x.dtype, torch.float32))

    def quantize_values(self, x):
        return (self.scale(x) * _sign(x.detach())).to(x.dtype)

    def sign_terms(self, x):
        if self.per_channel and x.dim() > 0:
            scale, planes = sign_matmul.row_signs(x, self.scale)  # one pass where Triton runs: the same bits
            return [scale], planes
        return [self.scale(x)], sign_matmul.signs(x)

    def row_local(self):  # per_channel: one mean per row; else one for the whole tensor
        return self.per_channel

    def bits_per_element(self, shape):
        shape = tuple(shape) or (1,)
        numel = 1
        for d in shape:
            numel *= d
        groups = numel // shape[-1] if self.per_channel else 1
        return 1.0 + 32.0 * groups / numel


@register
@dataclass(frozen=True)
class ResidualSignFormat(NumberFormat):
    """Residual binarization with ``levels`` = L scales g_i (ReBNet).

    Value set: ``{ sum_i e_i * |g_i| : e_i in {-1, +1} }`` (2^L values, L bits per element), one set of
    L fp32 scales per tensor. Each value is encoded to the *nearest* level sum (a tie goes to the larger
    level, so 0 -> the smallest non-negative level, as sign(0) = +1), which makes the quantizer monotone
    and, the set being symmetric, sign-preserving. ReBNet's greedy encoding (b_i = sign(r_(i-1)),
    r_i = r_(i-1) - |g_i| b_i) gives the same codes only when each |g_i| exceeds the sum of the later
    ones; greedy scales need not: with 1% of a Gaussian tensor's values x100, g_2 = 1.04 g_1, and the
    greedy code sent 87.6% of the elements to the wrong sign (x = 0.1 -> g_1 - g_2 < 0).

    The quantizer module (``quantizer()``) owns the g_i as an ``nn.Parameter``, initialised on its first
    forward from that data by the greedy fit g_i = mean|r_(i-1)| (the L2-optimal scale of each greedy
    residual's signs), then trained with its real gradient dq/dg_i = e_i (the chosen level's signs); the
    forward uses |g_i|, so a step through zero cannot flip a whole tensor. The STE passes x's gradient
    everywhere (pass_mask None), as for ``binary_scaling``: the levels follow the data, and clipping at
    the largest level sum|g_i| zeroes the gradient of exactly the largest activations (for L = 2 and
    Gaussian data the greedy fit gives sum g_i = 1.6 mean|x|, beyond which lie 20% of the values), and
    with it QAT of quantized activations stalled (tests/quant/test_formats.py's synthetic task stayed at
    chance; the identity STE learns it). The stateless ``fake_quantize`` uses the greedy scales of its own
    input, so it is not idempotent (q's own greedy scales differ from x's); for fixed scales it is.
    """

    name = "binary_residual_sign"
    spec = FormatSpec(
        study=lambda w: {"levels": 2},
        space={},
        fixed={"levels": 2},
        why="two residual levels give four values (two magnitudes, each with its sign) per tensor, too coarse for "
            "activations whose values span several orders of magnitude",
        min_width=None, roles=("data_in", "weight"))
    levels: int = 2

    def validate(self):
        check_range(self.name, "levels", self.levels, 1, 8)

    def value_set(self) -> str:
        return (f"{{sum_i e_i |g_i| : e_i = +-1, i = 1..{self.levels}}}, g learnable per tensor (fp32), "
                "initialised greedily g_i = mean|r_(i-1)|")

    def greedy_scales(self, x: torch.Tensor) -> torch.Tensor:
        r = x.detach().to(torch.promote_types(x.dtype, torch.float32))
        scales = []
        for _ in range(self.levels):
            g = r.abs().mean() if r.numel() else r.new_zeros(())
            scales.append(g)
            r = r - g * _sign(r)
        return torch.stack(scales)

    @staticmethod
    def _levels(g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The 2^L level sums of ``g`` sorted (differentiable in g), and each level's signs e (2^L, L) in
        g's dtype, in the same order."""
        bits = torch.arange(g.numel(), device=g.device)
        codes = torch.arange(2 ** g.numel(), device=g.device)
        signs = (((codes[:, None] >> bits) & 1) * 2 - 1).to(g.dtype)  # (2^L, L): every e in {-1, +1}^L
        # sorted level sums; negating e negates its sum exactly, so the set is exactly symmetric
        levels, order = torch.sort((signs * g).sum(-1))
        return levels, signs[order]

    @staticmethod
    def _midpoints(levels: torch.Tensor) -> torch.Tensor:
        """Between sorted levels: the nearest level's index is how many midpoints lie at or below x (a tie goes
        up)."""
        return (levels[1:] + levels[:-1]) / 2

    @staticmethod
    def apply_scales(x: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        """x encoded to the nearest level sum of |scales| (differentiable in ``scales``: dq/dg_i = e_i)."""
        g = scales.abs()  # a scale pushed through zero by an optimizer step must not flip the tensor
        levels, table = ResidualSignFormat._levels(g)
        lv = levels.detach()
        r = x.detach().to(g.dtype)
        idx = torch.searchsorted(ResidualSignFormat._midpoints(lv), r.contiguous(), right=True)
        # levels[idx] with dq/dg_i = e_i (the chosen level's signs) summed over the elements; autograd's
        # own gather would send the gradient through index_put with accumulate into 2^L slots, millions of
        # duplicates each, which CUDA processes one duplicate at a time (the likely reason this format's QAT
        # ran past 300 s on an H100 where every other format took 7-27 s)
        q = _NearestLevel.apply(g, lv, table, idx)
        return torch.where(torch.isnan(r), r, q)

    @staticmethod
    def sign_table(scales: torch.Tensor) -> tuple[list, torch.Tensor, torch.Tensor]:
        """([|g_i|], the levels' midpoints, each level's signs (2^L, L) fp16): what ``scaled_signs`` needs of
        the scales (a quantizer with fixed scales keeps it)."""
        g = scales.detach().abs()
        levels, table = ResidualSignFormat._levels(g)
        return list(g), ResidualSignFormat._midpoints(levels), table.to(torch.float16)

    @staticmethod
    def scaled_signs(x: torch.Tensor, scales: torch.Tensor, table: tuple | None = None) -> tuple[list, torch.Tensor]:
        """``apply_scales(x, scales)`` as ([|g_i|], planes): plane i holds the i-th sign of each element's level
        (fp16 +-1, NaN where x is NaN; ``sign_matmul.planes``), and sum_i |g_i| plane_i is that level (up to
        the rounding of the level's own fp32 sum). ``table``: ``sign_table(scales)`` if already made."""
        g, mids, signs = table if table is not None else ResidualSignFormat.sign_table(scales)
        return g, sign_matmul.planes(x, mids, signs)

    def quantize_values(self, x):
        return self.apply_scales(x, self.greedy_scales(x)).to(x.dtype)

    def sign_terms(self, x):
        return self.scaled_signs(x, self.greedy_scales(x))

    def bits_per_element(self, shape):
        numel = 1
        for d in tuple(shape) or (1,):
            numel *= d
        return float(self.levels) + 32.0 * self.levels / numel

    def quantizer(self):
        return ResidualSignQuantizer(self)


class ResidualSignQuantizer(torch.nn.Module):
    """Learnable residual-sign quantizer: ``scales`` (an nn.Parameter) set from the first batch it sees."""

    def __init__(self, fmt: ResidualSignFormat):
        super().__init__()
        self.fmt = fmt
        self.scales = torch.nn.Parameter(torch.zeros(fmt.levels))
        # persistent, so a saved-then-loaded QAT model keeps its trained scales instead of re-initialising
        self.register_buffer("initialized", torch.tensor(False))
        self._ready = False  # host-side copy of `initialized`: reading the buffer on a GPU would sync

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self._ready = False  # re-read the loaded flag on the next forward

    def _initialise(self, x):
        if not self._ready and not bool(self.initialized):
            with torch.no_grad():
                self.scales.copy_(self.fmt.greedy_scales(x).to(self.scales.dtype))
                self.initialized.fill_(True)
        self._ready = True

    def has_sign_terms(self) -> bool:
        return True

    def sign_terms(self, x):
        self._initialise(x)
        if torch.is_grad_enabled() and self.scales.requires_grad:
            return self.fmt.scaled_signs(x, self.scales)
        # the level table of fixed scales, made once (a sort and a dozen small ops per layer call otherwise);
        # its key is the scales' version and storage, and any train()/eval() drops it (fused optimizers update
        # in place without a new version)
        key = (self.scales._version, self.scales.data_ptr(), self.scales.device)
        cached = self.__dict__.get("_sign_table")
        if cached is None or cached[0] != key:
            cached = (key, self.fmt.sign_table(self.scales))
            if not (self.scales.is_cuda and torch.cuda.is_current_stream_capturing()):  # a graph's pool is its own
                self.__dict__["_sign_table"] = cached
        return self.fmt.scaled_signs(x, self.scales, cached[1])

    def train(self, mode: bool = True):
        self.__dict__.pop("_sign_table", None)
        return super().train(mode)

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_sign_table", None)  # derived: never saved or copied
        return state

    def forward(self, x):
        self._initialise(x)
        q = self.fmt.apply_scales(x, self.scales)
        # forward value is exactly q; d/dx = 1 (STE), d/dscales_i = e_i through q
        return _Through.apply(x, q.to(x.dtype))

    def extra_repr(self):
        return self.fmt.describe()


class _NearestLevel(torch.autograd.Function):
    """Forward: ``levels[idx]``. Backward: d/dg_i = sum over elements of grad x e_i, where e = ``table[idx]``
    (the signs of each element's level), one reduction per scale."""

    @staticmethod
    def forward(ctx, g, levels, table, idx):
        ctx.save_for_backward(table, idx)
        return levels[idx]

    @staticmethod
    def backward(ctx, grad):
        table, idx = ctx.saved_tensors
        grad_g = torch.stack([(grad * table[:, i][idx]).sum() for i in range(table.shape[1])])
        return grad_g, None, None, None


class _Through(torch.autograd.Function):
    """Forward: ``q``. Backward: the same gradient to ``x`` (straight through) and to ``q``."""

    @staticmethod
    def forward(ctx, x, q):
        return q.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad, grad
