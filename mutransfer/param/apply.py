"""From (parameterization, base shape, width): roles, init, forward multipliers, param groups."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn as nn

from mutransfer.errors import UserError
from mutransfer.param.config import ROLES
from mutransfer.param.depth import (
    block_tensor_kinds,
    blocks,
    depth_rule,
    set_branch_multipliers,
)
from mutransfer.param.rescalable import RescalableWeight
from mutransfer.param.roles import MATRIX_ROLES, owners
from mutransfer.param.tables import RoleRule, optimizer_family, rules_for

READOUT_HOOK = ("the readout's forward multiplier has no hook: give the model a `readout_mult` "
                "attribute (1.0) that its forward multiplies the logits by, or name the "
                "readout weight in model.roles (docs/models.md)")


NO_BLOCKS = ("param.depth {depth} (n_layer {n} over base_n_layer {base}): the model has no "
             "residual block to scale (a module with a `branch_mult` attribute, 1.0, that "
             "multiplies its branch's output: mutransfer/param/depth.py), so the rule would "
             "change nothing; give the model's blocks one, or leave param.depth none")


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


def model_roles(model: nn.Module) -> dict[str, str]:
    """The roles the model was built with (`mutransfer_roles`, set by the parameterization),
    else those its modules declare."""
    roles = getattr(model, "mutransfer_roles", None)
    return dict(roles) if roles is not None else assign_roles(model)


def multipliers(cfg) -> tuple[float, float]:
    """(m, n): width multiplier and d_state multiplier (1 for a model from a factory)."""
    if not getattr(cfg.model, "builtin", True):
        return cfg.width / cfg.model.base_width, 1.0
    base_n = cfg.model.base_d_state or cfg.model.d_state
    return cfg.width / cfg.model.base_width, cfg.model.d_state / base_n


def _check_vector_rule(rule: RoleRule) -> None:
    if (rule.init_m, rule.init_n, rule.init_mult, rule.mult_m) != (0.0, 0.0, 1.0, 0.0):
        raise UserError("param.overrides.vector: vector parameters keep their reference init "
                        "and have no forward multiplier; only lr_* and wd can be overridden")


def apply_parameterization(model: nn.Module, cfg, roles: dict[str, str] | None = None,
                           fan_in_ratio: dict[str, float] | None = None) -> None:
    """Rescale role-governed weights and set forward multipliers for `cfg.param` at `cfg.width`
    and, with a depth parameterization (`cfg.param.depth`), at `cfg.model.n_layer`.

    `roles`: full parameter name -> role (default: what the modules declare); they are kept on
    the model as `mutransfer_roles` for the optimizer's param groups. Every module initialises
    its own parameters; this pass only multiplies the weights of the matrix roles, and fails
    loudly, naming the parameter, if anything else changed: an init a module owns (the Δ bias,
    A_log, D, the conv, the norms, any future one) cannot be overwritten here unnoticed.

    A `RescalableWeight` knows its own init and multiplier. Any other parameter is taken at the
    init its module gave it, read as the standard one (PyTorch's defaults): std ∝ 1/√fan_in
    for the matrix roles (hidden, readout, ssm_B, ssm_C), width-independent for embeddings;
    it is multiplied by the rule's init over that (`fan_in_ratio`: its fan-in over the base
    model's, default m). A forward multiplier other than 1 goes on the readout's logits through
    the model's `readout_mult` attribute when it has one, else on the output of the module
    that holds the parameter (a forward hook).
    """
    rules = rules_for(cfg.param)
    _check_vector_rule(rules["vector"])
    m, n = multipliers(cfg)
    depth = depth_rule(cfg)
    if depth.active and next(blocks(model), None) is None:
        raise UserError(NO_BLOCKS.format(depth=depth.name, n=cfg.model.n_layer,
                                         base=cfg.model.base_n_layer))
    roles = assign_roles(model) if roles is None else dict(roles)
    fan_in_ratio = fan_in_ratio or {}
    own = owners(model)
    governed = {name for name, role in roles.items() if role != "vector"
                or (isinstance(own[name][0], RescalableWeight) and own[name][1] == "weight")}
    kinds = block_tensor_kinds(model, roles) if depth.active else {}
    # a vector's weight rescaled by a depth init exponent (the conv's): not a width rule's
    depth_init = {name for name, kind in kinds.items() if name not in governed
                  and own[name][1] == "weight" and depth.init_scale(0.0, kind) != 1.0}
    readout_attr = hasattr(model, "readout_mult")
    with unchanged_outside(model, governed | depth_init):
        for name in sorted(governed):
            role, (module, local) = roles[name], own[name]
            rule = rules[role]
            kind = kinds.get(name)
            if isinstance(module, RescalableWeight) and local == "weight":
                module.rescale_init(rule.init_scale(init_width(role, module.width_mult(m), m), n)
                                    * block_init_scale(depth, kind, module.depth_init_exp))
                # the readout's multiplier goes on readout_mult alone where the model has
                # one: a model calling its readout module and multiplying by readout_mult
                # too had its logits multiplied twice (1/m²)
                module.mult = 1.0 if role == "readout" and readout_attr else rule.forward_mult(m)
                continue
            r = init_width(role, fan_in_ratio.get(name, m), m)
            ref = r**-0.5 if role in MATRIX_ROLES else 1.0
            with torch.no_grad():
                getattr(module, local).mul_(rule.init_scale(r, n) / ref
                                            * block_init_scale(depth, kind, 0.0, local))
            mult = rule.forward_mult(m)
            if not (role == "readout" and readout_attr):
                set_output_multiplier(module, mult)
        with torch.no_grad():
            for name in depth_init:
                getattr(*own[name]).mul_(depth.init_scale(0.0, kinds[name]))
    readout = rules["readout"].forward_mult(m)
    if readout_attr:
        model.readout_mult = readout
    elif readout != 1.0 and "readout" not in roles.values():
        raise UserError(READOUT_HOOK)
    set_branch_multipliers(model, depth)
    model.mutransfer_roles = roles


def init_width(role: str, fan_in_ratio: float, m: float) -> float:
    """The width ratio a role's init exponent is a power of: a matrix's own fan-in ratio
    (= m but for dt_proj's rounded ⌈d/16⌉), the width ratio m for the other roles. An
    embedding's fan-in is the vocabulary (or a real input's dim), which does not grow: read
    as its ratio, an `init_m` given to the embedding was m^0, silently."""
    return fan_in_ratio if role in MATRIX_ROLES else m


def block_init_scale(depth, kind: str | None, depth_init_exp: float,
                     local: str = "weight") -> float:
    """The depth rule's factor on a weight's init (1 outside the blocks and for biases)."""
    if kind is None or local != "weight":
        return 1.0
    return depth.init_scale(depth_init_exp, kind)


def set_output_multiplier(module: nn.Module, mult: float) -> None:
    """Multiply `module`'s output by `mult` (a forward hook; replaces an earlier one).

    An nn.Linear's bias is left out: its output becomes mult·W·x + b, as the mup library's
    MuReadout (W applied to x·mult, the bias added as is). Multiplied with the rest, a
    readout bias under muP would start and move (Adam: η per step, its `vector` rule) 1/m
    times as much as at the base width, vanishing with width."""
    old = getattr(module, "_mutransfer_mult_hook", None)
    if old is not None:
        old.remove()
        module._mutransfer_mult_hook = None
    if mult == 1.0:
        return
    bias = module.bias if isinstance(module, nn.Linear) else None
    if bias is None:
        module._mutransfer_mult_hook = module.register_forward_hook(
            lambda _mod, _inp, out: out * mult)
    else:
        module._mutransfer_mult_hook = module.register_forward_hook(
            lambda _mod, _inp, out: out * mult + bias * (1.0 - mult))


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

    Each group also holds `lr_scale` (its LR over the base LR), `width_scale` (the width and
    state factor of that LR alone: no lr_mult, no depth factor) and `role`, so that LR
    schedules can multiply the base schedule, train.weight_decay_mode independent can take
    the LR out of the decay (mutransfer/optim.py) and reports can name the group. With an active
    depth parameterization a role's in-block parameters (param/depth.py) form their own groups,
    one per depth factor on the LR (`depth_scale`; `in_block`: True, which the optimizer's
    per-group Adam ε reads); the weight decay follows the width rule.
    """
    rules = rules_for(cfg.param)
    m, n = multipliers(cfg)
    family = optimizer_family(cfg.train.optimizer)
    depth = depth_rule(cfg)
    roles = model_roles(model)
    kinds = block_tensor_kinds(model, roles) if depth.active else {}
    base_lr, base_wd = cfg.train.lr, cfg.train.weight_decay
    params = dict(model.named_parameters())
    groups: dict[tuple[str, bool, float], dict] = {}
    for name, role in roles.items():
        rule = rules[role]
        width_scale = rule.lr_scale(family, m, n)
        in_block = name in kinds
        depth_scale = depth.lr_scale(family, kinds[name]) if in_block else 1.0
        scale = width_scale * depth_scale
        # weight decay follows the width rule only (LR·wd constant in width, as MuAdamW);
        # CompleteP's reference puts no depth factor on it
        wd = rule.weight_decay(base_wd, family, m, n)
        depth_keys = {"depth_scale": depth_scale, "in_block": in_block} if kinds else {}
        group = groups.setdefault((role, in_block, depth_scale), {
            "params": [], "lr": base_lr * scale, "lr_scale": scale, "weight_decay": wd,
            "width_scale": rule.shape_scale(family, m, n), "role": role, "names": [],
            **depth_keys})
        group["params"].append(params[name])
        group["names"].append(name)
    return list(groups.values())
