"""Optimizers over parameterization-scaled param groups, and LR schedules."""

from __future__ import annotations

import math

import torch

from mutransfer.configbase import cooldown_steps
from mutransfer.param.apply import param_groups
from mutransfer.param.depth import depth_rule


def make_optimizer(model: torch.nn.Module, cfg) -> torch.optim.Optimizer:
    """Adam, AdamW or SGD (with momentum) over the groups of `param_groups(model, cfg)`.

    Adam's ε is train.eps, times the depth parameterization's factor r^-α on the in-block
    groups only (mutransfer/param/depth.py): the embedding, the readout and the final norm keep
    train.eps, whose gradients the branch multiplier does not scale. Without an active depth
    parameterization every group has exactly train.eps.

    Adam and AdamW use torch's fused kernels when every parameter is on CUDA (one launch
    per step instead of several per parameter group; the same update up to rounding).
    """
    t = cfg.train
    groups = param_groups(model, cfg)
    if t.weight_decay_mode == "independent":
        decouple_weight_decay(groups)
    if t.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=t.lr, momentum=t.momentum)
    fused = all_on_cuda(model)
    in_block_eps = t.eps * depth_rule(cfg).eps_scale
    for g in groups:
        if g.get("in_block"):
            g["eps"] = in_block_eps
    if t.optimizer == "adam":
        # Adam's weight decay is L2 in the gradient; kept for completeness, default 0
        return torch.optim.Adam(groups, lr=t.lr, betas=t.betas, eps=t.eps, fused=fused)
    return torch.optim.AdamW(groups, lr=t.lr, betas=t.betas, eps=t.eps, fused=fused)


def all_on_cuda(model: torch.nn.Module) -> bool:
    """True when every parameter is a CUDA tensor (what torch's fused Adam(W) requires)."""
    params = list(model.parameters())
    return bool(params) and all(p.is_cuda for p in params)


def decouple_weight_decay(groups: list[dict]) -> None:
    """weight_decay_mode independent: the decay per step is λ_group · (schedule multiplier),
    whatever the LR. λ_group is what coupled mode decays per step over the base LR: the
    group's weight_decay times its LR's width factor (`width_scale`), so the role's rule
    relates decay to width as in coupled mode ("independent" roles: train.weight_decay at
    every width, as LR·wd is under MuAdamW), while the base LR, lr_mult and a depth factor
    leave it. (The group's weight_decay alone was divided by that width factor to make up
    for an LR that no longer multiplies it here: the decay per step grew as m on the
    hidden matrices under mup.) torch's AdamW decays by lr_t · wd, so wd becomes
    λ_group / lr_group. `decay_per_step` keeps λ_group."""
    for g in groups:
        g["decay_per_step"] = g["weight_decay"] * g.get("width_scale", 1.0)
        g["weight_decay"] = g["decay_per_step"] / g["lr"] if g["lr"] > 0 else 0.0


def decay_timescales(opt: torch.optim.Optimizer) -> dict[str, float | None]:
    """τ = 1/(η_group · λ_group) in steps at the peak LR, per role: the steps over which
    weight decay alone shrinks a weight by 1/e (None where the group is not decayed)."""
    out: dict[str, float | None] = {}
    for g in opt.param_groups:
        per_step = g.get("decay_per_step", g["lr"] * g.get("weight_decay", 0.0))
        out[str(g.get("role", len(out)))] = 1.0 / per_step if per_step > 0 else None
    return out


def schedule_factor(t, step: int) -> float:
    """lr_factor for a TrainConfig `t` (0-based `step`)."""
    return lr_factor(step, t.total_steps, t.warmup, t.schedule, t.min_lr_ratio, t.cooldown,
                     t.cooldown_shape)


def lr_factor(step: int, total: int, warmup: int, schedule: str, min_ratio: float,
              cooldown: float = 0.2, cooldown_shape: str = "linear") -> float:
    """Multiplier on the base LR at `step` (0-based): linear warmup, then the schedule.

    wsd: 1 until the cooldown's first step `total - cooldown_steps(total, cooldown)`, then
    from 1 (its first step) towards min_ratio along `cooldown_shape` (progress p = steps into
    the cooldown / its length; linear 1-p, cosine (1+cos πp)/2, sqrt 1-√p). Before the
    cooldown the factor is exactly 1.0 whatever `total` is: runs of different lengths take
    bit-identical steps up to the shorter one's cooldown (horizon branching relies on it).
    """
    if warmup and step < warmup:
        return (step + 1) / warmup
    if schedule == "wsd":
        cool = cooldown_steps(total, cooldown)
        start = total - cool
        if step < start:
            return 1.0
        progress = min(1.0, (step - start) / cool)
        decay = {"linear": 1.0 - progress, "cosine": 0.5 * (1 + math.cos(math.pi * progress)),
                 "sqrt": 1.0 - math.sqrt(progress)}[cooldown_shape]
        return min_ratio + (1 - min_ratio) * decay
    if schedule == "constant" or total <= warmup:
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if schedule == "cosine":
        decay = 0.5 * (1 + math.cos(math.pi * progress))
    else:  # linear
        decay = 1.0 - progress
    return min_ratio + (1 - min_ratio) * decay


def set_lr(opt: torch.optim.Optimizer, base_lr: float, factor: float) -> float:
    """Set every group's LR to base_lr · factor · its lr_scale; returns base_lr · factor."""
    for g in opt.param_groups:
        g["lr"] = base_lr * factor * g.get("lr_scale", 1.0)
    return base_lr * factor
