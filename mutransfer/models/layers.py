"""Layers whose init and forward multiplier are set by the parameterization.

Each module names the role of its own parameters in `param_roles` and initialises all of them
itself, at the reference init. Layers whose weight has a width-dependent init rule (the
`RescalableWeight`) also know how their own init relates to the base shape, so that
`mutransfer.param` can rescale that weight, and nothing else, to the parameterization's std.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from mutransfer.param.rescalable import RescalableWeight


def log_uniform(count: int, low: float, high: float) -> torch.Tensor:
    """`count` values log-uniform in [low, high] (the reference's Δ init), from torch.rand."""
    u = torch.rand(count)
    return torch.exp(u * (math.log(high) - math.log(low)) + math.log(low))


class ScaledLinear(RescalableWeight, nn.Linear):
    """nn.Linear with a role, a base fan-in and a forward multiplier on W·x.

    It starts at the reference init for its own shape: PyTorch's Linear default
    (kaiming_uniform, a=√5), i.e. U(±gain/√fan_in), std gain/√(3·fan_in); `gain` carries extra
    factors such as the 1/√n_layer rescale of out_proj or dt_scale of dt_proj. The bias starts
    at zero, as in the reference's `_init_weights`; a module may set it afterwards (dt_proj's Δ
    bias). A parameterization then only rescales the weight (`rescale_init`); it never re-draws
    it and never touches the bias.
    """

    def __init__(self, in_features: int, out_features: int, *, role: str, base_in: int,
                 bias: bool = False, gain: float = 1.0) -> None:
        super().__init__(in_features, out_features, bias=bias)
        self.param_roles = {"weight": role, "bias": "vector"}
        self.base_in = base_in
        self.gain = gain
        self.mult = 1.0
        bound = gain / math.sqrt(in_features)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.zero_()
        self.init_scale = math.sqrt(base_in / in_features)  # std over the base-shape std

    def width_mult(self, m: float) -> float:
        """Its own fan-in ratio (= m but for dt_proj, whose fan-in ⌈d/16⌉ rounds)."""
        return self.in_features / self.base_in

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """mult · W·x, without the bias (for callers that add the bias elsewhere)."""
        y = F.linear(x, self.weight)
        return y * self.mult if self.mult != 1.0 else y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.project(x)
        return y if self.bias is None else y + self.bias


class ScaledEmbedding(RescalableWeight, nn.Embedding):
    """Token embedding, N(0, std) (the reference: 0.02), with a forward multiplier."""

    REF_STD = 0.02  # state-spaces/mamba `_init_weights(initializer_range=0.02)`

    def __init__(self, num_embeddings: int, dim: int, std: float = REF_STD) -> None:
        super().__init__(num_embeddings, dim)
        self.param_roles = {"weight": "embedding"}
        self.mult = 1.0
        with torch.no_grad():
            self.weight.normal_(0.0, std)

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
