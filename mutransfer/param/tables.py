"""Parameterization tables: one rule per role, as exponents of the width and state multipliers.

m = width / base_width and n = d_state / base_d_state. For a parameter of a given role:

    init std   = std_ref(base shape) · m^init_m · n^init_n · init_mult   (m: a matrix's own
                 fan-in ratio, equal to width / base_width except for dt_proj's ⌈d/16⌉)
    LR         = lr · m^lr_{fam}_m · n^lr_{fam}_n · lr_mult          (fam: adam or sgd)
    forward    = output · m^mult_m      (embedding output, readout logits)
    weight decay: "scaled" (torch's wd as given, so the decay per step, LR·wd, follows the
                  group's LR), "independent" (wd divided by the LR's width and state factor
                  m^lr_m · n^lr_n, so LR·wd stays as at base width, as the mup library's
                  MuAdam/MuAdamW/MuSGD do), or "none". mup, spectral and mup_ssm use
                  "independent" on every role with weight decay; sp's LR does not scale.

std_ref is the reference implementation's init (state-spaces/mamba) evaluated at the base
shape, so every parameterization equals the reference model at base width. Each module draws
its parameters at the reference init itself; the init entries only rescale (multiply) the
weights of the matrix roles (mutransfer/param/apply.py). "vector" parameters (norm gains,
biases, conv1d, A_log, D, the Δ bias) keep their module's init at every width; only their LR
scales.

Where the entries come from: docs/parameterizations.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from mutransfer.param.config import ParamConfig

Family = Literal["adam", "sgd"]


@dataclass(frozen=True)
class RoleRule:
    init_m: float = 0.0
    init_n: float = 0.0
    init_mult: float = 1.0
    lr_adam_m: float = 0.0
    lr_adam_n: float = 0.0
    lr_sgd_m: float = 0.0
    lr_sgd_n: float = 0.0
    lr_mult: float = 1.0
    mult_m: float = 0.0
    wd: str = "scaled"

    def init_scale(self, m: float, n: float) -> float:
        """Factor on the base-shape reference std."""
        return m**self.init_m * n**self.init_n * self.init_mult

    def lr_scale(self, family: Family, m: float, n: float) -> float:
        """The group's LR over the base LR: the width and state factor times lr_mult."""
        return self.shape_scale(family, m, n) * self.lr_mult

    def shape_scale(self, family: Family, m: float, n: float) -> float:
        """The LR's width and state factor alone (1 at the base shape)."""
        if family == "adam":
            return m**self.lr_adam_m * n**self.lr_adam_n
        return m**self.lr_sgd_m * n**self.lr_sgd_n

    def weight_decay(self, base_wd: float, family: Family, m: float, n: float) -> float:
        """The group's weight_decay: as given, divided by the LR's shape factor, or 0."""
        if self.wd == "none":
            return 0.0
        if self.wd == "independent":
            return base_wd / self.shape_scale(family, m, n)
        return base_wd

    def forward_mult(self, m: float) -> float:
        return m**self.mult_m


# SP: the reference init at every width (std ∝ 1/√fan_in for matrices), one LR for all.
_SP = {
    "embedding": RoleRule(),
    "hidden": RoleRule(init_m=-0.5),
    "vector": RoleRule(wd="none"),
    "ssm_B": RoleRule(init_m=-0.5),
    "ssm_C": RoleRule(init_m=-0.5),
    "readout": RoleRule(init_m=-0.5),
}

# "mup": heuristic muP, the baseline Vankadara et al. criticise: Tensor Programs V's rules
# applied to every weight by its shape, as the mup library classifies parameters (MuAdam,
# MuSGD): matrix-like (both dims scale: in_proj, out_proj, x_proj_dt, dt_proj) Adam η/m,
# SGD η; vector-like (one dim scales: embedding, biases, gains, conv1d, A_log, D) Adam η,
# SGD η·m; readout as MuReadout (base-width init, logits × 1/m). W_B and W_C (d_state × d_inner)
# are classed vector-like by that rule (Adam η, SGD η·m, init 1/√fan_in). This is NOT what the
# library itself does with this model: it refuses a Linear with a fixed fan-out unless it is a
# MuReadout (set_base_shapes → assert_hidden_size_inf), and on the reference's fused x_proj
# (fan-out dt_rank + 2·d_state grows with width) it gives Adam η/m, SGD η·(fan-out ratio)/m.
# Weight decay as the library's optimizers (mup/optim.py): every group's weight_decay is divided
# by its LR's width factor, so LR·wd, the decay per step, is the base width's ("independent").
# docs/parameterizations.md says where each entry comes from.
_MUP = {
    "embedding": RoleRule(lr_sgd_m=1.0, wd="independent"),
    "hidden": RoleRule(init_m=-0.5, lr_adam_m=-1.0, wd="independent"),
    "vector": RoleRule(lr_sgd_m=1.0, wd="none"),
    "ssm_B": RoleRule(init_m=-0.5, lr_sgd_m=1.0, wd="independent"),
    "ssm_C": RoleRule(init_m=-0.5, lr_sgd_m=1.0, wd="independent"),
    "readout": RoleRule(mult_m=-1.0, lr_sgd_m=1.0, wd="independent"),
}

# Spectral scaling (Yang, Simon & Bernstein 2023): ‖W‖ and ‖ΔW‖ ∝ √(fan_out/fan_in).
# Hidden: σ ∝ 1/√fan_in, Adam η/fan_in, SGD η·fan_out/fan_in (∝ 1 when both scale).
# W_B, W_C (d_state × d_inner): σ ∝ √d_state/d_inner (the constant: the reference init at the
# base shape, √(d_inner_base / (3·d_state_base)) · √d_state/d_inner), Adam and SGD η/m
# (the role table of docs/parameterizations.md).
# Readout σ ∝ √fan_out/fan_in is realised, as for muP, by a 1/m multiplier on a base-init
# readout, which also works when the readout is tied to the embedding.
# A role is one rule for every tensor that has it, so a tensor whose shape is not its role's
# departs from the paper's rule by shape: Mamba-2's in_proj_dt with `widen: headdim` (fan-out
# fixed, role hidden: init m^-1/2 and SGD η where the paper gives m^-1 and η/m), the per-head
# scalars there (SGD η·m where η). docs/parameterizations.md lists every such tensor.
_SPECTRAL = {
    **_MUP,
    "ssm_B": RoleRule(init_m=-1.0, init_n=0.5, lr_adam_m=-1.0, lr_sgd_m=-1.0, lr_sgd_n=1.0,
                      wd="independent"),
    "ssm_C": RoleRule(init_m=-1.0, init_n=0.5, lr_adam_m=-1.0, lr_sgd_m=-1.0, lr_sgd_n=1.0,
                      wd="independent"),
}

# muP-SSM (Vankadara et al., NeurIPS 2024): as muP except W_B and W_C.
# From the paper (SGD): σ_B ∝ √(N/N_u), η_B ∝ √(N/N_u); σ_C ∝ 1/√(N·N_u), η_C ∝ 1/(N·√N_u).
# Adam exponents are not in the paper: the width's measured by the coordinate check
# (docs/parameterizations.md); d_state's (0) neither the paper's nor measured.
ADAM_SSM_LR_M = -1.0
_MUP_SSM = {
    **_MUP,
    "ssm_B": RoleRule(init_m=-0.5, init_n=0.5, lr_sgd_m=-0.5, lr_sgd_n=0.5,
                      lr_adam_m=ADAM_SSM_LR_M, wd="independent"),
    "ssm_C": RoleRule(init_m=-0.5, init_n=-0.5, lr_sgd_m=-0.5, lr_sgd_n=-1.0,
                      lr_adam_m=ADAM_SSM_LR_M, wd="independent"),
}

TABLES: dict[str, dict[str, RoleRule]] = {
    "sp": _SP, "mup": _MUP, "spectral": _SPECTRAL, "mup_ssm": _MUP_SSM,
}


def rules_for(cfg: ParamConfig) -> dict[str, RoleRule]:
    """The table of `cfg.name` with `cfg.overrides` applied."""
    table = dict(TABLES[cfg.name])
    for role, override in cfg.overrides.items():
        changes = override.model_dump(exclude_none=True)
        table[role] = replace(table[role], **changes)
    return table


def optimizer_family(optimizer: str) -> Family:
    return "sgd" if optimizer == "sgd" else "adam"
