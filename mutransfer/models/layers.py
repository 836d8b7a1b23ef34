"""Layers whose init and forward multiplier are set by the parameterization.

Each module names the role of its own parameters in `param_roles`, and matrix layers know
their fan-in at the base shape, so `mutransfer.param` can scale their init relative to the
reference init at base width.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def log_uniform(count: int, low: float, high: float) -> torch.Tensor:
    """`count` values log-uniform in [low, high] (the reference's Δ init), from torch.rand."""
    u = torch.rand(count)
    return torch.exp(u * (math.log(high) - math.log(low)) + math.log(low))


class ScaledLinear(nn.Linear):
    """nn.Linear with a role, a base fan-in and a forward multiplier on W·x.

    The reference init is PyTorch's Linear default (kaiming_uniform, a=√5), i.e.
    U(±gain/√fan_in), std gain/√(3·fan_in); `gain` carries extra factors such as the
    1/√n_layer rescale of out_proj or dt_scale of dt_proj. Biases start at zero, as in the
    reference's `_init_weights`, unless a module re-initialises them.
    """

    def __init__(self, in_features: int, out_features: int, *, role: str, base_in: int,
                 bias: bool = False, gain: float = 1.0) -> None:
        super().__init__(in_features, out_features, bias=bias)
        self.param_roles = {"weight": role, "bias": "vector"}
        self.base_in = base_in
        self.gain = gain
        self.mult = 1.0
        self.init_scaled(1.0 * math.sqrt(base_in / in_features))

    def ref_std_base(self) -> float:
        return self.gain / math.sqrt(3 * self.base_in)

    def init_scaled(self, scale: float) -> None:
        """Uniform init with std = ref_std_base · scale (uniform like the reference)."""
        bound = math.sqrt(3) * self.ref_std_base() * scale
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.zero_()

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """mult · W·x, without the bias (for callers that add the bias elsewhere)."""
        y = F.linear(x, self.weight)
        return y * self.mult if self.mult != 1.0 else y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.project(x)
        return y if self.bias is None else y + self.bias


class ScaledEmbedding(nn.Embedding):
    """Token embedding, normal(0, 0.02) as the reference, with a forward multiplier."""

    REF_STD = 0.02

    def __init__(self, num_embeddings: int, dim: int) -> None:
        super().__init__(num_embeddings, dim)
        self.param_roles = {"weight": "embedding"}
        self.mult = 1.0
        self.init_scaled(1.0)

    def init_scaled(self, scale: float) -> None:
        with torch.no_grad():
            self.weight.normal_(0.0, self.REF_STD * scale)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = super().forward(ids)
        return x * self.mult if self.mult != 1.0 else x


class RMSNorm(nn.Module):
    """RMSNorm as in mamba_ssm (eps 1e-5, gain initialised to one)."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps
        self.param_roles = {"weight": "vector"}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)
