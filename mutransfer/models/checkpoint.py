"""State dicts in the reference layout (state-spaces/mamba) <-> this model's layout.

The reference `MambaLMHeadModel` names parameters `backbone.embedding.weight`,
`backbone.layers.{i}.mixer.*`, `backbone.layers.{i}.norm.weight`, `backbone.norm_f.weight`
and `lm_head.weight`, with one fused `x_proj.weight` of shape (dt_rank + 2·d_state, d_inner)
holding W_Δ, W_B and W_C in that order. Here they are three weights.
"""

from __future__ import annotations

import torch

_PREFIX = "backbone."
_SPLIT = ("x_proj_dt", "x_proj_B", "x_proj_C")


def from_reference(state: dict[str, torch.Tensor], d_state: int,
                   tied: bool = True) -> dict[str, torch.Tensor]:
    """Map a reference state dict to this model's names, splitting x_proj.

    With a tied readout the reference's `lm_head.weight` (the embedding again) is dropped; a
    ValueError when it is not the embedding (an untied reference: dropping it would load
    another model). Mamba-1 mixers get an all-zero `A_zero` (the reference pins no entry of
    A at 0) unless the state has one.
    """
    if tied:
        _check_tied(state)
    out: dict[str, torch.Tensor] = {}
    for name, value in state.items():
        if tied and name == "lm_head.weight":
            continue
        local = name[len(_PREFIX):] if name.startswith(_PREFIX) else name
        if local.endswith("mixer.x_proj.weight"):
            head = local[: -len("x_proj.weight")]
            dt_rank = value.shape[0] - 2 * d_state
            parts = torch.split(value, [dt_rank, d_state, d_state], dim=0)
            for part_name, part in zip(_SPLIT, parts):
                out[f"{head}{part_name}.weight"] = part.clone()
        else:
            out[local] = value
    for name in [n for n in out if n.endswith("mixer.A_log")]:
        head = name[: -len("A_log")]
        if f"{head}x_proj_dt.weight" in out:  # Mamba-1 only: a Mamba-2 mixer has no mask
            out.setdefault(f"{head}A_zero", torch.zeros_like(out[name]))
    return out


def _check_tied(state: dict[str, torch.Tensor]) -> None:
    head = state.get("lm_head.weight")
    embedding = state.get(f"{_PREFIX}embedding.weight", state.get("embedding.weight"))
    if head is not None and embedding is not None and not torch.equal(head, embedding):
        raise ValueError("lm_head.weight is not the embedding (an untied readout): pass "
                         "tied=False, for a model built with model.tie_embeddings: false")


def to_reference(state: dict[str, torch.Tensor], tied: bool = True) -> dict[str, torch.Tensor]:
    """Map this model's state dict to the reference layout, fusing x_proj. Mamba-2 mixers
    keep this model's names (split in_proj) under the reference's prefixes."""
    out: dict[str, torch.Tensor] = {}
    for name, value in state.items():
        if any(f"mixer.{p}.weight" in name for p in _SPLIT):
            if name.endswith("x_proj_dt.weight"):
                head = name[: -len("x_proj_dt.weight")]
                fused = torch.cat([state[f"{head}{p}.weight"] for p in _SPLIT], dim=0)
                out[f"{_PREFIX}{head}x_proj.weight"] = fused
            continue
        if name.endswith("mixer.A_zero"):
            if value.any():
                raise ValueError(f"{name}: entries of A pinned at zero have no equivalent in "
                                 "the reference layout")
            continue
        if name.startswith("lm_head."):
            out[name] = value
        else:
            out[_PREFIX + name] = value
    if tied and "lm_head.weight" not in out:
        out["lm_head.weight"] = out[_PREFIX + "embedding.weight"]
    return out
