"""Depth parameterizations: residual-branch multipliers and the LR, init and Adam ε rules.

With r = L / L_base (model.n_layer over model.base_n_layer) and the residual exponent α
(`param.depth_alpha`, CompleteP's `depth_alpha_exp`; presets: depth_mup α = 1/2, Yang et al.
2023, "Tensor Programs VI"; completep α = 1, Dey et al. 2025):

    residual branch   x + r^-α · mixer(norm(x))            (every block)
    LR, in-block      × r^e_lr on top of the width rule; e_lr per in-block tensor
                      (`param.depth_exponents`), default α-1 (Adam, AdamW), 2α-1 (SGD)
    Adam ε            × r^-α on the in-block groups only; the embedding, readout and final
                      norm keep train.eps (CompleteP's code scales its one ε for every group:
                      docs/parameterizations.md, "Depth", says why we do not)
    init              a block weight whose reference init carries 1/√n_layer (Mamba's and
                      S4D's out_proj: the reference's rescale_prenorm_residual) keeps the
                      value it has at L_base, times r^e_init (`param.depth_exponents`, default
                      0): the branch multiplier does the depth scaling
    weight decay      unchanged (follows the width rule only, as CompleteP's code)

"In-block" is every parameter of a residual block (its norm and its mixer); the embedding, the
final norm and the readout keep their width rule. `none` leaves everything as it was, and at
r = 1 every factor is exactly 1, so every model equals the one without a depth
parameterization. Where each entry comes from: docs/parameterizations.md ("Depth").

Each in-block parameter is one of DEPTH_TENSORS, by its role and where it sits (`tensor_kind`):
ssm_B, ssm_C (their roles; S4D's B and C also under the vector role), conv (a parameter of
an nn.Conv1d), A_log, D (by name; S4D's A_re and A_im are its A_log), dt (dt_proj's weight and
bias, a parameter named dt_bias, S4D's log_dt), out_proj (the weight of a module named
out_proj, or S4D's output_linear: the matrix that writes the branch), hidden (the other
matrices: in_proj, x_proj_dt), norm (the other vectors: the block's norm gain).

The model side is duck-typed, as `RescalableWeight` is, so that param/ never imports models/:
a module with a `branch_mult` attribute is a residual block (its output branch is multiplied
by it), and a `RescalableWeight` whose `depth_init_exp` is non-zero has a reference init
proportional to n_layer^depth_init_exp.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch.nn as nn

from mutransfer.param.roles import MATRIX_ROLES, owners
from mutransfer.param.tables import Family

PRESETS = {"none": 0.0, "depth_mup": 0.5, "completep": 1.0}  # α of each named rule


@dataclass(frozen=True)
class DepthRule:
    """The factors of one depth parameterization at depth ratio `ratio` = L / L_base.

    `alpha`: the preset's when None; `exponents`: (tensor, entry) -> power of r, replacing
    the preset's (entries lr_adam, lr_sgd, init; see param/config.py DepthExponents)."""

    name: str = "none"
    ratio: float = 1.0
    alpha_exp: float | None = None
    exponents: tuple[tuple[tuple[str, str], float], ...] = ()

    @property
    def alpha(self) -> float:
        return PRESETS[self.name] if self.alpha_exp is None else self.alpha_exp

    @property
    def active(self) -> bool:
        """False when every factor is exactly 1 (no depth parameterization, or L = L_base)."""
        return self.name != "none" and self.ratio != 1.0

    def _power(self, exponent: float) -> float:
        return self.ratio**exponent if self.active else 1.0

    def exponent(self, tensor: str, entry: str) -> float:
        """The power of r on `entry` (lr_adam, lr_sgd, init) of an in-block `tensor`."""
        default = {"lr_adam": self.alpha - 1.0, "lr_sgd": 2.0 * self.alpha - 1.0, "init": 0.0}
        return dict(self.exponents).get((tensor, entry), default[entry])

    @property
    def branch_mult(self) -> float:
        """Multiplier on each residual branch's output: r^-α."""
        return self._power(-self.alpha)

    def lr_scale(self, family: Family, tensor: str = "hidden") -> float:
        """Factor on the LR of an in-block `tensor`: by default Adam r^(α-1), SGD r^(2α-1)."""
        return self._power(self.exponent(tensor, "lr_adam" if family == "adam" else "lr_sgd"))

    @property
    def eps_scale(self) -> float:
        """Factor on Adam's ε of the in-block groups: r^-α."""
        return self._power(-self.alpha)

    def init_scale(self, depth_init_exp: float, tensor: str = "hidden") -> float:
        """Factor that takes an init ∝ n_layer^depth_init_exp back to its value at L_base,
        times r^(the tensor's init exponent)."""
        return self._power(self.exponent(tensor, "init") - depth_init_exp)


def depth_rule(cfg) -> DepthRule:
    """The depth rule of `cfg` (a TrialConfig): param.depth, depth_alpha and depth_exponents
    at n_layer / base_n_layer."""
    base = cfg.model.base_n_layer or cfg.model.n_layer
    p = cfg.param
    exponents = tuple(((tensor, entry), value) for tensor, exps in p.depth_exponents.items()
                      for entry, value in exps.model_dump(exclude_none=True).items())
    return DepthRule(p.depth, cfg.model.n_layer / base, p.depth_alpha, exponents)


# S4D's names for the same tensors (mutransfer/models/s4d.py): its A is stored as A_re and
# A_im (the A_log of Mamba), its Δ as log_dt (the Δ bias), its B and C (SSMWeight modules)
# keep the role vector unless model.s4d.ssm_roles is ssm, and its glu output's
# output_linear is the matrix that writes the branch
S4D_KINDS = {"A_re": "A_log", "A_im": "A_log", "log_dt": "dt"}
SSM_OWNERS = {"B": "ssm_B", "C": "ssm_C"}
BRANCH_WRITERS = ("out_proj", "output_linear")


def tensor_kind(role: str, module: nn.Module, full_name: str, local: str) -> str:
    """Which of DEPTH_TENSORS an in-block parameter is (see the module doc)."""
    if role in ("ssm_B", "ssm_C"):
        return role
    if isinstance(module, nn.Conv1d):
        return "conv"
    if local in ("A_log", "D"):
        return local
    if local in S4D_KINDS:
        return S4D_KINDS[local]
    owner = full_name.split(".")[-2] if "." in full_name else ""
    if owner == "dt_proj" or local == "dt_bias":
        return "dt"
    if owner in SSM_OWNERS and local == "weight" and role == "vector":
        return SSM_OWNERS[owner]
    if role in MATRIX_ROLES:
        return "out_proj" if owner in BRANCH_WRITERS else "hidden"
    return "norm"


def block_tensor_kinds(model: nn.Module, roles: dict[str, str]) -> dict[str, str]:
    """Full name -> DEPTH_TENSORS entry of every parameter inside a residual block."""
    inside = block_parameters(model)
    return {name: tensor_kind(roles[name], module, name, local)
            for name, (module, local) in owners(model).items() if name in inside}


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
