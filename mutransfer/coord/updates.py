"""Per-parameter sizes in the coordinate check: the RMS of every parameter tensor at init and
of its change since init, after each step.

Rows (one per parameter tensor and step, step 0 = init): `param` (full name, shared tensors
once), `role`, `order` (the model's parameter order), `w_rms` (RMS of W_0, the init) and
`dw_rms` (RMS of W_t − W_0). The relative update ‖ΔW‖_F/‖W_0‖_F is dw_rms / w_rms (the same
number of entries on both sides); mutransfer/analysis/updates.py fits its exponent against width
and compares it with the one the parameterization's table implies. Frobenius norms: O(size) per
tensor and step, no SVD (docs/models.md, "Per-parameter update sizes", says why not the
spectral norm).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from mutransfer.param.roles import owners


def step_or_blow_up(opt) -> None:
    """`opt.step()`; a step too large for the parameters' dtype (an LR near float32's range:
    torch raises "value cannot be converted to type float without overflow") is a run that
    diverged: its parameters become NaN, as an infinite step would leave them, and the sizes
    measured after it are not finite (before: the coordinate check ended in that
    traceback)."""
    try:
        opt.step()
    except RuntimeError as exc:
        if "overflow" not in str(exc):
            raise
        with torch.no_grad():
            for group in opt.param_groups:
                for p in group["params"]:
                    p.fill_(float("nan"))


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of every parameter tensor (shared ones once, under their first name)."""
    return {name: getattr(module, local).detach().float().clone()
            for name, (module, local) in owners(model).items()}


def _rms(t: torch.Tensor) -> float:
    return t.pow(2).mean().sqrt().item() if t.numel() else 0.0


def update_rows(model: nn.Module, w0: dict[str, torch.Tensor], roles: dict[str, str],
                step: int) -> list[dict]:
    """One row per parameter tensor: its init's RMS and the RMS of its change since init."""
    rows = []
    for order, (name, (module, local)) in enumerate(owners(model).items()):
        p = getattr(module, local).detach().float()
        rows.append({"step": step, "param": name, "role": roles.get(name, "?"),
                     "order": order, "w_rms": _rms(w0[name]), "dw_rms": _rms(p - w0[name])})
    return rows
