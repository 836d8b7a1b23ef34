"""Checks of a CoordSettings before any model is built: one line naming the setting."""

from __future__ import annotations

import math
from collections.abc import Callable

from pydantic import TypeAdapter, ValidationError

from mutransfer.config import BUILTIN_ARCHS
from mutransfer.configbase import MAX_INT
from mutransfer.coord.settings import DEFAULT_LR, MIN_WIDTH, CoordSettings
from mutransfer.errors import UserError
from mutransfer.param.config import PARAMETERIZATIONS, ParamConfig


def check_settings(s: CoordSettings, name: Callable[[str], str] = str) -> None:
    """Raise UserError for a setting the check cannot run with; `name` turns a field into
    what the user typed (the CLI: `widths` -> `--widths`)."""
    if not isinstance(s, CoordSettings):
        raise UserError(f"coordinate check settings are a CoordSettings, not "
                        f"{type(s).__name__}")
    _check_types(s, name)
    if s.optimizer not in DEFAULT_LR:
        raise UserError(f"{name('optimizer')}: unknown optimizer {s.optimizer!r} "
                        f"(known: {', '.join(DEFAULT_LR)})")
    if s.depths:
        _check_depths(s, name)
    else:
        if len(set(s.widths)) < 2:
            raise UserError(f"{name('widths')}: give at least two different widths")
        if s.n_layer < 1:
            raise UserError(f"{name('n_layer')}: must be at least 1, got {s.n_layer}")
    _check_factory_depth(s, name)
    if min(s.widths) < MIN_WIDTH:  # a depth check's one width is --width
        raise UserError(f"{name('width' if s.depths else 'widths')}: {min(s.widths)} is "
                        f"below the minimum width "
                        f"{MIN_WIDTH}")
    if s.base_width is not None and s.base_width < MIN_WIDTH:
        raise UserError(f"{name('base_width')}: {s.base_width} is below the minimum width "
                        f"{MIN_WIDTH}")
    if s.base_width is not None and s.base_width > min(s.widths):
        raise UserError(f"{name('base_width')}: must not exceed the smallest width")
    for p in s.params:
        if p not in PARAMETERIZATIONS:
            raise UserError(f"{name('params')}: unknown parameterization {p!r} "
                            f"(known: {', '.join(PARAMETERIZATIONS)})")
    if not (s.lr is not None and s.lr > 0 and math.isfinite(s.lr)):
        raise UserError(f"{name('lr')}: must be positive, got {s.lr}")
    if s.steps < 1:
        raise UserError(f"{name('steps')}: must be at least 1")
    if not s.seeds:
        raise UserError(f"{name('seeds')}: give at least one seed")
    _check_distinct(s.seeds, name("seeds"), "seed")  # a repeat would count as a second seed
    for seed in s.seeds:  # as the trials' config would refuse it, but before the data loads
        if abs(seed) > MAX_INT:
            raise UserError(f"{name('seeds')} {seed}: out of range for a seed (at most 2**53 "
                            "in size)")
    if not s.params:
        raise UserError(f"{name('params')}: give at least one parameterization")
    _check_distinct(s.params, name("params"), "parameterization")
    for field, least in (("d_state", 1), ("batch_size", 1), ("seq_len", 2)):
        if getattr(s, field) < least:  # as ModelConfig and TrainConfig, named as given
            raise UserError(f"{name(field)}: must be at least {least}, got "
                            f"{getattr(s, field)}")
    if not 0 < s.alpha < 1:
        raise UserError(f"{name('alpha')}: must be between 0 and 1, got {s.alpha}")
    if not s.tolerance > 0:  # an equivalence margin; check.coord.tolerance is > 0 as well
        raise UserError(f"{name('tolerance')}: must be positive, got {s.tolerance}")


def _check_depths(s: CoordSettings, name: Callable[[str], str]) -> None:
    if len(set(s.depths)) < 2:
        raise UserError(f"{name('depths')}: give at least two different depths")
    if min(s.depths) < 1:
        raise UserError(f"{name('depths')}: {min(s.depths)} is below the minimum depth 1")
    if len(set(s.widths)) != 1:
        raise UserError(f"{name('width')}: a depth check holds one width fixed")
    if "n_layer" in (s.model or {}):
        raise UserError(f"{name('model')} n_layer: a depth check sets it from "
                        f"{name('depths')}")
    if s.depth_param is not None and "depth" not in ParamConfig.model_fields:
        raise UserError(f"{name('depth_param')}: this version has no param.depth (depth "
                        "parameterizations are not installed); leave it out to check the "
                        "model as it is")


def _check_factory_depth(s: CoordSettings, name: Callable[[str], str]) -> None:
    """A `package.module:factory` arch takes its depth from model.options, not n_layer (which
    only a depth parameterization reads): say so naming the option given, not as the trial
    config's "model.n_layer is not used" (which named neither --n-layer nor --depths)."""
    arch = (s.model or {}).get("arch", "mamba")
    if not isinstance(arch, str) or arch in BUILTIN_ARCHS:
        return
    if not s.depths and s.n_layer != CoordSettings.n_layer:
        raise UserError(f"{name('n_layer')}: arch {arch} takes its depth from model.options "
                        f"(e.g. {name('model')} options.n_layer={s.n_layer}), not n_layer")
    if s.depths and s.depth_param in (None, "none"):
        raise UserError(f"{name('depths')}: arch {arch} takes its depth from model.options; "
                        f"only a depth parameterization reads n_layer, so a depth check of it "
                        f"needs {name('depth_param')}")


_SETTINGS = TypeAdapter(CoordSettings)


def _check_types(s: CoordSettings, name: Callable[[str], str]) -> None:
    """Each field of its annotated type (strict: no "64" for 64, no 3 for [3]): one line
    naming the first that is not, not a TypeError from the first comparison."""
    try:
        _SETTINGS.validate_python(s)
    except ValidationError as exc:
        err = exc.errors()[0]
        field, *inner = err["loc"]
        where = name(str(field)) + "".join(f"[{i}]" for i in inner)
        raise UserError(f"{where}: {err['msg'].lower()}, got {err['input']!r}") from None


def _check_distinct(values: list, label: str, what: str) -> None:
    seen = set()
    for value in values:
        if value in seen:
            raise UserError(f"{label}: {what} {value!r} is given twice")
        seen.add(value)
