"""From (parameterization, base shape, width): roles, init, forward multipliers, param groups."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn as nn

from mutransfer.errors import UserError
from mutransfer.param.config import ROLES
from mutransfer.param.depth import block_parameters, depth_rule, set_branch_multipliers
from mutransfer.param.rescalable import RescalableWeight
from mutransfer.param.tables import RoleRule, optimizer_family, rules_for


def assign_roles(model: nn.Module) -> dict[str, str]:
    """Full parameter name -> role; every parameter must have exactly one.

    Each module declares the roles of its own (direct) parameters in `param_roles`.
    """
    roles: dict[str, str] = {}
    for mod_name, module in model.named_modules():
        declared = getattr(module, "param_roles", {})
        for p_name, _ in module.named_parameters(recurse=False):
            full = f"{mod_name}.{p_name}" if mod_name else p_name
            role = declared.get(p_name)
            if role is None:
                raise ValueError(f"parameter {full!r} has no role (add it to "
                                 f"{type(module).__name__}.param_roles)")
            if role not in ROLES:
                raise ValueError(f"parameter {full!r} has unknown role {role!r}")
            roles[full] = role
    return roles


def multipliers(cfg) -> tuple[float, float]:
    """(m, n): width multiplier and d_state multiplier."""
    base_n = cfg.model.base_d_state or cfg.model.d_state
    return cfg.width / cfg.model.base_width, cfg.model.d_state / base_n


def _check_vector_rule(rule: RoleRule) -> None:
    if (rule.init_m, rule.init_n, rule.init_mult, rule.mult_m) != (0.0, 0.0, 1.0, 0.0):
        raise UserError("param.overrides.vector: vector parameters keep their reference init "
                        "and have no forward multiplier; only lr_* and wd can be overridden")


def apply_parameterization(model: nn.Module, cfg) -> None:
    """Rescale role-governed weights and set forward multipliers for `cfg.param` at `cfg.width`
    and, with a depth parameterization (`cfg.param.depth`), at `cfg.model.n_layer`.

    Every module initialises its own parameters (the reference init); this pass only
    multiplies each `RescalableWeight`'s weight to the std its role's rule gives, and fails
    loudly, naming the parameter, if anything else changed: an init a module owns (the Δ bias,
    A_log, D, the conv, the norms, any future one) cannot be overwritten here unnoticed.
    """
    rules = rules_for(cfg.param)
    _check_vector_rule(rules["vector"])
    m, n = multipliers(cfg)
    depth = depth_rule(cfg)
    assign_roles(model)  # fails early, naming any parameter without a role
    scaled = {name: module for name, module in model.named_modules()
              if isinstance(module, RescalableWeight)}
    governed = {f"{name}.weight" if name else "weight" for name in scaled}
    with unchanged_outside(model, governed):
        for module in scaled.values():
            rule = rules[module.param_roles["weight"]]
            module.rescale_init(rule.init_scale(module.width_mult(m), n)
                                * depth.init_scale(module.depth_init_exp))
            module.mult = rule.forward_mult(m)
    model.readout_mult = rules["readout"].forward_mult(m)
    set_branch_multipliers(model, depth)


@contextmanager
def unchanged_outside(model: nn.Module, allowed: set[str]) -> Iterator[None]:
    """Raise if the block changes any parameter of `model` whose name is not in `allowed`."""
    before = {name: p.detach().clone() for name, p in model.named_parameters()
              if name not in allowed}
    yield
    for name, p in model.named_parameters():
        if name in before and not torch.equal(p.detach(), before[name]):
            raise RuntimeError(f"{name}: the parameterization changed an init its module owns "
                               "(only role-governed weights may be rescaled)")


def param_groups(model: nn.Module, cfg) -> list[dict]:
    """Optimizer param groups: one per (role, LR scale, weight decay), LRs already scaled.

    Each group also holds `lr_scale` (its LR over the base LR) and `role`, so that LR
    schedules can multiply the base schedule and reports can name the group. With an active
    depth parameterization a role's in-block parameters (param/depth.py) form their own group
    (`depth_scale`: their depth factor on the LR); the weight decay follows the width rule.
    """
    rules = rules_for(cfg.param)
    m, n = multipliers(cfg)
    family = optimizer_family(cfg.train.optimizer)
    depth = depth_rule(cfg)
    in_blocks = block_parameters(model) if depth.active else set()
    base_lr, base_wd = cfg.train.lr, cfg.train.weight_decay
    params = dict(model.named_parameters())
    groups: dict[tuple[str, float], dict] = {}
    for name, role in assign_roles(model).items():
        rule = rules[role]
        width_scale = rule.lr_scale(family, m, n)
        depth_scale = depth.lr_scale(family) if name in in_blocks else 1.0
        scale = width_scale * depth_scale
        # weight decay follows the width rule only (LR·wd constant in width, as MuAdamW);
        # CompleteP's reference puts no depth factor on it
        wd = rule.weight_decay(base_wd, family, m, n)
        group = groups.setdefault((role, depth_scale), {
            "params": [], "lr": base_lr * scale, "lr_scale": scale, "weight_decay": wd,
            "role": role, "names": [], **({"depth_scale": depth_scale} if in_blocks else {})})
        group["params"].append(params[name])
        group["names"].append(name)
    return list(groups.values())
