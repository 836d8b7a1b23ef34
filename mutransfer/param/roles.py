"""Roles of any model's parameters: from glob patterns, from the modules, or inferred by shape.

Three sources, in this order of precedence (mutransfer/models/factory.py picks one):

- `model.roles` in the config: {glob: role}; each parameter takes the role of the first pattern
  its full name matches (fnmatch: `*` also matches dots). Every parameter must match one and
  every pattern must match something, else a one-line error names it.
- `param_roles` declared by the modules (the built-in models' layers declare all of theirs).
- inference, the way the mup library classes parameters: the model is built at two widths and
  each parameter is classed by which of its dims change. Fan-out and fan-in dims: a Linear-like
  weight is (out, in, ...), an `nn.Embedding` weight (vocab, dim) has dim as its fan-out.
    both scale                    -> hidden
    fan-in only, fan-out = vocab  -> readout
    fan-in only, other fan-out    -> ambiguous (W_B and W_C of an SSM look like this): refused
    fan-out only                  -> embedding (input-layer-like; as a vector under every table)
    1-D, or no dim scales         -> vector
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase

import torch
import torch.nn as nn

from mutransfer.errors import UserError
from mutransfer.param.config import ROLES

MATRIX_ROLES = ("hidden", "readout", "ssm_B", "ssm_C")  # std ∝ 1/√fan_in at the reference init
ROLES_HINT = "`mutransfer roles CONFIG` prints a table to paste into model.roles and edit"


def pattern_roles(names: list[str], patterns: Mapping[str, str]) -> dict[str, str]:
    """Name -> role by the first matching glob; UserError for an unmatched name or pattern."""
    roles: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        for pattern, role in patterns.items():
            if fnmatchcase(name, pattern):
                roles[name] = role
                used.add(pattern)
                break
        else:
            raise UserError(f"model.roles: parameter {name!r} matches no pattern (add one, "
                            f"e.g. \"{name}\": hidden)")
    for pattern in patterns:
        if not any(fnmatchcase(name, pattern) for name in names):
            raise UserError(f"model.roles: pattern {pattern!r} matches no parameter")
    for pattern, role in patterns.items():
        if role not in ROLES:
            raise UserError(f"model.roles: {pattern!r}: unknown role {role!r} "
                            f"(known: {', '.join(ROLES)})")
    return roles


def declared_roles(model: nn.Module) -> dict[str, str]:
    """Name -> role for the parameters whose module declares one in `param_roles`."""
    roles: dict[str, str] = {}
    for mod_name, module in model.named_modules():
        declared = getattr(module, "param_roles", {})
        for p_name, _ in module.named_parameters(recurse=False):
            role = declared.get(p_name)
            if role is not None:
                full = f"{mod_name}.{p_name}" if mod_name else p_name
                if role not in ROLES:
                    raise UserError(f"parameter {full!r} declares unknown role {role!r}")
                roles[full] = role
    return roles


def owners(model: nn.Module) -> dict[str, tuple[nn.Module, str]]:
    """Full parameter name -> (the module that holds it, its local name); shared parameters
    are listed once, under their first name (as `named_parameters` lists them)."""
    out: dict[str, tuple[nn.Module, str]] = {}
    seen: set[int] = set()
    for mod_name, module in model.named_modules():
        for p_name, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            out[f"{mod_name}.{p_name}" if mod_name else p_name] = (module, p_name)
    return out


def fan_dims(module: nn.Module, p: torch.Tensor) -> tuple[list[int], list[int]]:
    """(fan-out dims, fan-in dims) of a parameter of `module`."""
    if p.dim() < 2:
        return list(range(p.dim())), []
    if isinstance(module, nn.Embedding):
        return [1], [0]
    return [0], list(range(1, p.dim()))


def fan_in(module: nn.Module, p: torch.Tensor) -> int:
    """Product of the fan-in dims (1 for vectors)."""
    n = 1
    for d in fan_dims(module, p)[1]:
        n *= p.shape[d]
    return n


def classify(module: nn.Module, small: torch.Tensor, large: torch.Tensor,
             vocab: int | None) -> str | None:
    """The inferred role of one parameter from its shapes at two widths; None: ambiguous."""
    if small.dim() < 2:
        return "vector"
    out_d, in_d = fan_dims(module, small)
    out_scales = any(small.shape[d] != large.shape[d] for d in out_d)
    in_scales = any(small.shape[d] != large.shape[d] for d in in_d)
    if out_scales and in_scales:
        return "hidden"
    if in_scales:
        fan_out = 1
        for d in out_d:
            fan_out *= small.shape[d]
        return "readout" if vocab is not None and fan_out == vocab else None
    if out_scales:
        return "embedding"
    return "vector"


def infer_roles(small: nn.Module, large: nn.Module, vocab: int | None) -> dict[str, str]:
    """Name -> inferred role from the same model built at two widths (see the module doc)."""
    a, b = owners(small), owners(large)
    if list(a) != list(b):
        extra = sorted(set(a) ^ set(b))
        raise UserError(f"model.arch: the factory's parameters differ between widths "
                        f"({', '.join(extra[:3])}); the same names at every width are needed")
    roles: dict[str, str] = {}
    ambiguous = []
    for name, (module, local) in a.items():
        p_small = getattr(module, local)
        p_large = getattr(b[name][0], b[name][1])
        if p_small.dim() != p_large.dim():
            raise UserError(f"model.arch: parameter {name!r} has {p_small.dim()} dims at one "
                            f"width and {p_large.dim()} at another")
        role = classify(module, p_small, p_large, vocab)
        if role is None:
            ambiguous.append(name)
        else:
            roles[name] = role
    if ambiguous:
        raise UserError(f"cannot infer the role of {', '.join(ambiguous)} (only the fan-in "
                        f"scales with width, but the fan-out is not the vocabulary: an SSM's "
                        f"W_B/W_C or a fixed-size projection); name them in model.roles "
                        f"(ssm_B, ssm_C, hidden, readout, ...): {ROLES_HINT}")
    return roles


def resolve_roles(model: nn.Module, other: Callable[[], nn.Module],
                  patterns: Mapping[str, str] | None, vocab: int | None) -> dict[str, str]:
    """Name -> role for every parameter of `model`: the config's patterns when given, else each
    module's declared role, else the role inferred from `model` and `other()` (the model at
    another width, built only when needed)."""
    names = list(owners(model))
    if patterns:
        return pattern_roles(names, patterns)
    declared = declared_roles(model)
    if len(declared) == len(names):
        return declared
    inferred = infer_roles(other(), model, vocab)
    return {name: declared.get(name, inferred[name]) for name in names}


def roles_table(roles: Mapping[str, str], shapes: Mapping[str, tuple[int, ...]]) -> str:
    """YAML lines for `model.roles` (name: role  # shape), to paste into a config and edit."""
    width = max((len(f'"{n}":') for n in roles), default=0)
    lines = ["  roles:"]
    for name, role in roles.items():
        shape = "x".join(str(d) for d in shapes.get(name, ()))
        lines.append(f"    {f'{chr(34)}{name}{chr(34)}:':<{width}} {role:<9}  # {shape}")
    return "\n".join(lines)
