"""Depth parameterizations: residual-branch multipliers and the LR, init and Adam ε rules.

With r = L / L_base (model.n_layer over model.base_n_layer) and α = 1/2 (depth_mup, Yang et
al. 2023, "Tensor Programs VI") or α = 1 (completep, Dey et al. 2025):

    residual branch   x + r^-α · mixer(norm(x))            (every block)
    LR, in-block      × r^(α-1) (Adam, AdamW)  × r^(2α-1) (SGD)   on top of the width rule
    Adam ε            × r^-α                                (all groups, as CompleteP's code)
    init              a block weight whose reference init carries 1/√n_layer (Mamba's and
                      S4D's out_proj: the reference's rescale_prenorm_residual) keeps the
                      value it has at L_base: the branch multiplier does the depth scaling
    weight decay      unchanged (follows the width rule only, as CompleteP's code)

"In-block" is every parameter of a residual block (its norm and its mixer); the embedding, the
final norm and the readout keep their width rule. `none` leaves everything as it was, and at
r = 1 every factor is exactly 1, so every model equals the one without a depth
parameterization. Where each entry comes from: docs/parameterizations.md ("Depth").

The model side is duck-typed, as `RescalableWeight` is, so that param/ never imports models/:
a module with a `branch_mult` attribute is a residual block (its output branch is multiplied
by it), and a `RescalableWeight` whose `depth_init_exp` is non-zero has a reference init
proportional to n_layer^depth_init_exp.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch.nn as nn

from mutransfer.param.tables import Family

ALPHA = {"none": 0.0, "depth_mup": 0.5, "completep": 1.0}


@dataclass(frozen=True)
class DepthRule:
    """The factors of one depth parameterization at depth ratio `ratio` = L / L_base."""

    name: str = "none"
    ratio: float = 1.0

    @property
    def alpha(self) -> float:
        return ALPHA[self.name]

    @property
    def active(self) -> bool:
        """False when every factor is exactly 1 (no depth parameterization, or L = L_base)."""
        return self.name != "none" and self.ratio != 1.0

    def _power(self, exponent: float) -> float:
        return self.ratio**exponent if self.active else 1.0

    @property
    def branch_mult(self) -> float:
        """Multiplier on each residual branch's output: r^-α."""
        return self._power(-self.alpha)

    def lr_scale(self, family: Family) -> float:
        """Factor on the LR of an in-block parameter: Adam r^(α-1), SGD r^(2α-1)."""
        return self._power(self.alpha - 1.0 if family == "adam" else 2.0 * self.alpha - 1.0)

    @property
    def eps_scale(self) -> float:
        """Factor on Adam's ε: r^-α."""
        return self._power(-self.alpha)

    def init_scale(self, depth_init_exp: float) -> float:
        """Factor that takes an init ∝ n_layer^depth_init_exp back to its value at L_base."""
        return self._power(-depth_init_exp)


def depth_rule(cfg) -> DepthRule:
    """The depth rule of `cfg` (a TrialConfig): param.depth at n_layer / base_n_layer."""
    base = cfg.model.base_n_layer or cfg.model.n_layer
    return DepthRule(cfg.param.depth, cfg.model.n_layer / base)


def blocks(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """(name, module) of every residual block: the modules with a `branch_mult`."""
    for name, module in model.named_modules():
        if hasattr(module, "branch_mult"):
            yield name, module


def block_parameters(model: nn.Module) -> set[str]:
    """Full names of every parameter inside a residual block."""
    return {f"{name}.{p_name}" if name else p_name
            for name, block in blocks(model) for p_name, _ in block.named_parameters()}


def set_branch_multipliers(model: nn.Module, rule: DepthRule) -> None:
    """Set every residual block's branch multiplier to the rule's r^-α."""
    for _, block in blocks(model):
        block.branch_mult = rule.branch_mult
