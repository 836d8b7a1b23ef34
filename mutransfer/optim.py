"""Optimizers over parameterization-scaled param groups, and LR schedules."""

from __future__ import annotations

import math

import torch

from mutransfer.param.apply import param_groups
from mutransfer.param.depth import depth_rule


def make_optimizer(model: torch.nn.Module, cfg) -> torch.optim.Optimizer:
    """Adam, AdamW or SGD (with momentum) over the groups of `param_groups(model, cfg)`.

    Adam's ε is train.eps times the depth parameterization's factor (mutransfer/param/depth.py;
    exactly train.eps without one).

    Adam and AdamW use torch's fused kernels when every parameter is on CUDA (one launch
    per step instead of several per parameter group; the same update up to rounding).
    """
    t = cfg.train
    groups = param_groups(model, cfg)
    if t.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=t.lr, momentum=t.momentum)
    fused = all_on_cuda(model)
    eps = t.eps * depth_rule(cfg).eps_scale
    if t.optimizer == "adam":
        # Adam's weight decay is L2 in the gradient; kept for completeness, default 0
        return torch.optim.Adam(groups, lr=t.lr, betas=t.betas, eps=eps, fused=fused)
    return torch.optim.AdamW(groups, lr=t.lr, betas=t.betas, eps=eps, fused=fused)


def all_on_cuda(model: torch.nn.Module) -> bool:
    """True when every parameter is a CUDA tensor (what torch's fused Adam(W) requires)."""
    params = list(model.parameters())
    return bool(params) and all(p.is_cuda for p in params)


def lr_factor(step: int, total: int, warmup: int, schedule: str, min_ratio: float) -> float:
    """Multiplier on the base LR at `step` (0-based): linear warmup, then the schedule."""
    if warmup and step < warmup:
        return (step + 1) / warmup
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
