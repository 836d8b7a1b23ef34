"""The one seam every model goes through: a factory width -> nn.Module, its roles, its
parameterization.

`model.arch` names the factory: `mamba` and `s4d` are the package's own (builtin.py),
`package.module:factory` is any user's, called as `factory(width, **model.options)` (plus
`vocab_size=` when its signature takes one). Importing it runs the user's code.

`build(cfg, spec)` calls the factory at `cfg.width` and at the base width (its shapes give each
parameter's fan-in ratio, and the roles when they must be inferred), resolves the roles
(mutransfer/param/roles.py) and applies the parameterization (mutransfer/param/apply.py).
`probe(cfg, spec)` checks what a user factory returns before anything runs: it imports, it
builds, its output has the right shape (or is a scalar loss, `loss: custom`), and its
parameter count changes with width; every failure is one UserError line.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn as nn

from mutransfer.errors import UserError, first_line
from mutransfer.models.builtin import builtin_factory
from mutransfer.param.apply import apply_parameterization
from mutransfer.param.roles import fan_in, owners, resolve_roles

Factory = Callable[[int], nn.Module]


def expose_cwd() -> None:
    """Make modules under the current folder importable here and in the processes this one
    starts (Ray workers inherit PYTHONPATH), as `python -m` does for its own process."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if cwd not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([*parts, cwd])


@contextlib.contextmanager
def own_argv(name: str) -> Iterator[None]:
    """sys.argv as the user's module would see it run on its own ([its name]): a module that
    parses the command line at import finds no mutransfer options to read or refuse."""
    saved = sys.argv
    sys.argv = [name]
    try:
        yield
    finally:
        sys.argv = saved


def exited(arch: str, what: str, exc: SystemExit) -> UserError:
    """A user's sys.exit (or an argparse of the command line) as one line naming the arch:
    the user's code must not end mutransfer's process, least of all with code 0."""
    return UserError(f"model.arch {arch}: {what} called sys.exit({exc.code!r}); a factory "
                     f"module must not exit (nor parse the command line) when imported")


def import_factory(arch: str) -> Callable[..., nn.Module]:
    """The callable named by `package.module:factory` (runs the module's code)."""
    module_name, _, attr = arch.partition(":")
    expose_cwd()
    try:
        with own_argv(module_name):
            module = importlib.import_module(module_name)
    except SystemExit as exc:
        raise exited(arch, f"importing {module_name}", exc) from None
    except Exception as exc:
        raise UserError(f"model.arch {arch}: cannot import {module_name} "
                        f"({type(exc).__name__}: {first_line(exc)})") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise UserError(f"model.arch {arch}: {module_name} has no callable {attr!r}")
    return fn


def takes(fn: Callable, name: str) -> bool:
    """Whether `fn` accepts the keyword `name` (by name or through **kwargs)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def user_factory(cfg, spec) -> Factory:
    """width -> the user's model, with errors as one line naming the arch."""
    mc = cfg.model
    fn = import_factory(mc.arch)
    kwargs = dict(mc.options)
    if spec is not None and spec.vocab_size is not None and takes(fn, "vocab_size"):
        kwargs.setdefault("vocab_size", spec.vocab_size)

    def make(width: int) -> nn.Module:
        try:
            model = fn(width, **kwargs)
        except UserError:
            raise
        except SystemExit as exc:
            raise exited(mc.arch, f"the factory at width {width}", exc) from None
        except Exception as exc:
            raise UserError(f"model.arch {mc.arch}: the factory raised at width {width} "
                            f"({type(exc).__name__}: {first_line(exc)})") from None
        if not isinstance(model, nn.Module):
            raise UserError(f"model.arch {mc.arch}: the factory returned "
                            f"{type(model).__name__}, not a torch.nn.Module")
        return model
    return make


def factory_for(cfg, spec) -> Factory:
    return in_memory(builtin_factory(cfg, spec)) if cfg.model.builtin else \
        user_factory(cfg, spec)


def in_memory(make: Factory) -> Factory:
    """`make`, with a model too large for this machine's memory refused in one line naming
    the width (a user factory's errors are one line already)."""
    def at(width: int) -> nn.Module:
        try:
            return make(width)
        except (MemoryError, RuntimeError) as exc:
            if not isinstance(exc, MemoryError) and "can't allocate memory" not in str(exc):
                raise
            size = re.search(r"allocate (\d+) bytes", str(exc))
            asked = f": it asked for {int(size[1]) / 1e9:,.0f} GB at once" if size else ""
            raise UserError(f"width {width}: the model does not fit in memory{asked}") \
                from None
    return at


def base_build(make: Factory, width: int) -> nn.Module:
    """The model at another width, without touching the caller's random stream."""
    with torch.random.fork_rng(devices=[]):
        return make(width)


def other_width(cfg) -> int:
    """The width the roles are inferred against: the base width, or twice it at base width."""
    base = cfg.model.base_width
    return base if cfg.width != base else 2 * base


@dataclass
class Built:
    """A model from the seam, its roles and its parameters' fan-in over the base model's."""

    model: nn.Module
    roles: dict[str, str]
    fan_in_ratio: dict[str, float]


def resolve(cfg, spec, make: Factory | None = None) -> Built:
    """Build at `cfg.width` (drawing from the caller's random stream), resolve roles and
    fan-in ratios against the base width; no parameterization applied yet."""
    make = make or factory_for(cfg, spec)
    model = make(cfg.width)
    vocab = spec.vocab_size if spec is not None else None
    base = base_build(make, cfg.model.base_width) if cfg.width != cfg.model.base_width else None
    roles = resolve_roles(model, lambda: base if base is not None else base_build(
        make, other_width(cfg)), cfg.model.roles, vocab)
    ratio = {}
    if base is not None:
        base_own = owners(base)
        for name, (module, local) in owners(model).items():
            if name in base_own:
                b_mod, b_local = base_own[name]
                ratio[name] = fan_in(module, getattr(module, local)) / fan_in(
                    b_mod, getattr(b_mod, b_local))
    else:
        ratio = {name: 1.0 for name in roles}
    return Built(model, roles, ratio)


def build(cfg, spec) -> nn.Module:
    """The model of `cfg` for `spec`'s data, with its roles and parameterization applied."""
    built = resolve(cfg, spec)
    apply_parameterization(built.model, cfg, built.roles, built.fan_in_ratio)
    return built.model


def probe(cfg, spec, batch: int = 2, length: int = 8) -> Built:
    """Check a factory's model before a run (UserError, one line, on any problem); returns
    the model at `cfg.width` with its roles (the parameterization applied)."""
    arch = cfg.model.arch
    if not cfg.model.builtin and spec.kind != "tokens":
        # first: inferring the roles without a vocabulary would fail with a misleading line
        raise UserError(f"model.arch {arch}: a factory model needs token data (data.source "
                        f"gives {spec.kind} inputs)")
    make = factory_for(cfg, spec)
    built = resolve(cfg, spec, make)
    small = base_build(make, other_width(cfg)) if cfg.width == cfg.model.base_width else None
    counts = {cfg.width: _count(built.model)}
    if small is not None:
        counts[other_width(cfg)] = _count(small)
    else:
        counts[cfg.model.base_width] = _count(base_build(make, cfg.model.base_width))
    if len(set(counts.values())) < 2:
        w = ", ".join(f"{n:,} at width {k}" for k, n in sorted(counts.items()))
        raise UserError(f"model.arch {arch}: the parameter count does not change with width "
                        f"({w}): the factory must use its width argument")
    try:
        apply_parameterization(built.model, cfg, built.roles, built.fan_in_ratio)
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"model.arch {arch}: {first_line(exc)}") from None
    _check_output(cfg, spec, built.model, batch, length)
    return built


def _count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _check_output(cfg, spec, model: nn.Module, batch: int, length: int) -> None:
    arch = cfg.model.arch
    if spec.kind == "tokens":
        ids, given = torch.randint(0, spec.vocab_size, (batch, length)), "token ids"
    else:  # a built-in model on real inputs (a factory was refused these in `probe`)
        ids, given = torch.randn(batch, length, spec.input_dim), "real inputs"
    custom = cfg.model.loss == "custom"
    try:
        with torch.no_grad():
            out = model(ids, ids) if custom else model(ids)
    except SystemExit as exc:
        raise exited(arch, "the forward pass", exc) from None
    except Exception as exc:
        raise UserError(f"model.arch {arch}: the forward pass failed on {given} of shape "
                        f"{tuple(ids.shape)} ({type(exc).__name__}: {first_line(exc)})"
                        ) from None
    what = ("a scalar loss (loss: custom)" if custom else "logits (batch, L, vocab)"
            if spec.kind == "tokens" else "outputs (batch, L, output_dim)")
    check_output(arch, out, () if custom else (batch, length, spec.output_dim),
                 f"{given} {tuple(ids.shape)}", what)


def check_output(arch: str, out, want: tuple[int, ...], given: str, what: str = "") -> None:
    """UserError (one line) unless the forward pass returned a tensor of shape `want`: the
    probe's check before a run, and the trainer's at every forward (`given`: what the model
    was given; `what`: what the output should be)."""
    if not isinstance(out, torch.Tensor):
        raise UserError(f"model.arch {arch}: the forward pass returned {type(out).__name__}, "
                        "not a tensor")
    if tuple(out.shape) != want:
        raise UserError(f"model.arch {arch}: the forward pass returned shape "
                        f"{tuple(out.shape)} for {given}; expected "
                        f"{what + ' ' if what else ''}{want}")
