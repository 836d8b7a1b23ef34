"""Which hyperparameter the analysis optimises (the target) and against which scale axes.

The target is `lr` unless chosen otherwise: any swept numeric axis (a column of the trials
table, e.g. `param.overrides.ssm_B.lr_mult` or `train.weight_decay`). It is fitted in log2 of
its value when every value is > 0 (the LR, multipliers), else on a linear scale in units of
its grid's mean step (a weight decay that includes 0): the fit window is then +-fit_window
grid steps instead of octaves, and a drift is the change of the optimum in the target's own
units per doubling of the scale axis.

The scale axes are `width`, plus `model.n_layer` and training tokens (`tokens`: steps x batch
x sequence length of each trial's config) when the sweep varies them; or any chosen swept
axis with positive whole values. Chosen in the sweep file (`analysis: {target, scale}`, read
from the store's sweep.yaml) or on the command line (which wins).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import yaml
from pydantic import ValidationError

from mutransfer.analysis_defaults import TOKEN_SOURCES, AnalysisSection
from mutransfer.errors import UserError, format_validation_error
from mutransfer.results.schema import stored_config

TARGET_DEFAULT = "lr"
WIDTH = "width"
DEPTH = "model.n_layer"
TOKENS = "tokens"
NOT_TARGETS = ("seed", "width", "parameterization", "optimizer")


@dataclass(frozen=True)
class Choice:
    """The target and the scale axes (first: the one in the width role of the main tables)."""

    target: str = TARGET_DEFAULT
    scale: tuple[str, ...] = (WIDTH,)
    log: bool = True            # target fitted in log2 of its value, else linear
    step: float = 1.0           # linear target: its grid's mean step (one unit of the fit)
    sources: dict[str, str] = field(default_factory=dict)  # where each choice came from

    @property
    def is_default(self) -> bool:
        return self.target == TARGET_DEFAULT and self.scale == (WIDTH,)

    @property
    def target_label(self) -> str:
        return self.target.removeprefix("param.overrides.")

    @property
    def opt_label(self) -> str:
        """'lr*' or 'ssm_B.lr_mult*'."""
        return f"{self.target_label}*"

    def to_role(self, values: np.ndarray) -> np.ndarray:
        """Target values as the estimator's LR role: positive, fitted in log2 of it."""
        values = np.asarray(values, dtype="float64")
        return values if self.log else np.exp2(values / self.step)

    def coord(self, values: np.ndarray) -> np.ndarray:
        """The fit's coordinate of target values: log2, or value / step."""
        values = np.asarray(values, dtype="float64")
        return np.log2(values) if self.log else values / self.step

    def from_role(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype="float64")
        if self.log:
            return values
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.log2(values) * self.step
        # 12 significant digits: the grid's values come back as written (0.1, not 0.1 + 2e-17)
        return np.array([float(f"{v:.12g}") for v in out.ravel()]).reshape(out.shape)


def sweep_section(yaml_text: str | None) -> dict:
    """The `analysis:` section of a sweep file's text ({} without one, or unreadable)."""
    if not yaml_text:
        return {}
    try:
        doc = yaml.safe_load(yaml_text)
    except yaml.YAMLError:
        return {}
    section = doc.get("analysis") if isinstance(doc, dict) else None
    if section is None:
        return {}
    try:
        return AnalysisSection.model_validate(section).model_dump(exclude_none=True)
    except ValidationError as exc:
        raise UserError("sweep.yaml: analysis." + format_validation_error(exc)) from None


def _config_value(text: object, path: tuple[str, ...]) -> object:
    doc: object = stored_config(text)
    for key in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def training_tokens(trials: pd.DataFrame) -> pd.Series:
    """Tokens each trial was set to train on: a `train_tokens` column where the store has
    one, else steps x batch x sequence length from the axis columns and the stored config,
    else the trained `tokens` per step done x the planned steps."""
    if "train_tokens" in trials:
        return pd.to_numeric(trials["train_tokens"], errors="coerce")

    def part(name: str) -> pd.Series:
        col = f"train.{name}"
        cfg = trials["config"] if "config" in trials else pd.Series(None, index=trials.index)
        from_cfg = pd.to_numeric(cfg.map(lambda t: _config_value(t, ("train", name))),
                                 errors="coerce")
        if col in trials:
            return pd.to_numeric(trials[col], errors="coerce").fillna(from_cfg)
        return from_cfg

    steps, budget = part("steps"), part("tokens")
    batch, seq = part("batch_size"), part("seq_len")
    per_step = batch * seq
    if "tokens" in trials and "steps_done" in trials:
        done = pd.to_numeric(trials["steps_done"], errors="coerce")
        per_step = per_step.fillna(pd.to_numeric(trials["tokens"], errors="coerce")
                                   / done.where(done > 0))
    total_steps = (budget // per_step).clip(lower=1).where(budget.notna(), steps)
    return total_steps * per_step


def _varies(values: pd.Series) -> bool:
    return values.map(lambda v: json.dumps(v, default=str)).nunique() > 1


def _scale_values(trials: pd.DataFrame, name: str) -> pd.Series | None:
    if name == TOKENS:
        return training_tokens(trials)
    return trials[name] if name in trials else None


def default_scale(trials: pd.DataFrame, target: str = TARGET_DEFAULT) -> tuple[str, ...]:
    """width, model.n_layer and tokens, those that vary (width alone when none does: a
    one-width sweep is analysed as before; a depth sweep at one width has depth first).
    Tokens are left out when the target is one of the fields they are computed from
    (`train.steps`, ...): the optimum of the steps cannot be found at each number of tokens."""
    out = [WIDTH] if WIDTH in trials and _varies(trials[WIDTH]) else []
    if DEPTH in trials and _varies(trials[DEPTH]):
        out.append(DEPTH)
    if target not in TOKEN_SOURCES and any(c in trials and _varies(trials[c])
                                           for c in TOKEN_SOURCES):
        tokens = training_tokens(trials)
        if tokens.notna().all() and tokens.nunique() > 1:
            out.append(TOKENS)
    return tuple(out or [WIDTH])


def _check_scale(trials: pd.DataFrame, name: str, where: str) -> None:
    values = _scale_values(trials, name)
    if values is None:
        raise UserError(f"{where} {name}: not a column of the trials table (a scale axis is "
                        f"width, tokens or a swept axis such as {DEPTH})")
    num = pd.to_numeric(values, errors="coerce")
    if name == TOKENS and num.isna().any():
        raise UserError(f"{where} {name}: the training tokens of some trials are unknown "
                        "(neither train.steps x batch_size x seq_len in their stored config nor "
                        "a tokens column)")
    if num.isna().any() or not (num > 0).all() or not np.allclose(num, np.round(num)):
        raise UserError(f"{where} {name}: a scale axis takes positive whole numbers")
    if num.nunique() < 2:
        raise UserError(f"{where} {name}: does not vary in this sweep (one value: "
                        f"{num.iloc[0]:g}); a scale axis needs two values at least")


def _check_target(trials: pd.DataFrame, name: str, scale: tuple[str, ...], where: str) -> None:
    if name in scale:
        raise UserError(f"{where} {name}: is a scale axis; the target is the hyperparameter "
                        "whose optimum is found at each point of the scale axes")
    if name in TOKEN_SOURCES and TOKENS in scale:
        raise UserError(f"{where} {name}: the scale axis {TOKENS} is computed from it (steps "
                        f"x batch_size x seq_len); choose scale axes without {TOKENS} for this "
                        "target, or another target")
    if name in NOT_TARGETS or name not in trials:
        raise UserError(f"{where} {name}: not a swept numeric axis of this sweep (e.g. lr or "
                        "param.overrides.ssm_B.lr_mult)")
    num = pd.to_numeric(trials[name], errors="coerce")
    if num.isna().any() or not np.isfinite(num).all() or trials[name].map(
            lambda v: isinstance(v, bool)).any():
        raise UserError(f"{where} {name}: not a numeric axis (values must all be numbers)")
    if num.nunique() < 2:
        raise UserError(f"{where} {name}: does not vary in this sweep (one value: "
                        f"{num.iloc[0]:g}); nothing to optimise")


def _pick(key: str, given: Any, section: dict, sources: dict[str, str]) -> tuple[Any, str]:
    """The command line's `--key`, else the sweep file's `analysis.key`, else (None, ""): the
    value and the name a bad one is reported under; `sources[key]` says where it came from."""
    if given is not None:
        sources[key] = "command line"
        return given, f"--{key}"
    if section.get(key) is not None:
        sources[key] = "sweep file"
        return section[key], f"analysis.{key}"
    return None, ""


def resolve(trials: pd.DataFrame, target: str | None = None,
            scale: list[str] | tuple[str, ...] | None = None,
            section: dict | None = None) -> Choice:
    """The choice from the command line (`target`, `scale`), else the sweep file's section,
    else the defaults; a one-line UserError naming the option or field for a bad one."""
    section = section or {}
    sources: dict[str, str] = {}
    target, where_t = _pick("target", target, section, sources)
    scale, where_s = _pick("scale", scale, section, sources)
    target = str(target) if target is not None else TARGET_DEFAULT
    if scale:
        scale = tuple(dict.fromkeys(str(s) for s in scale))
        for name in scale:
            _check_scale(trials, name, where_s)
    else:
        scale = default_scale(trials, target)
    if where_t:
        _check_target(trials, target, scale, where_t)
    if target == TARGET_DEFAULT:
        return Choice(target, scale, True, 1.0, sources)
    values = np.unique(pd.to_numeric(trials[target], errors="coerce").to_numpy(float))
    if (values > 0).all():
        return Choice(target, scale, True, 1.0, sources)
    step = float((values.max() - values.min()) / (len(values) - 1))
    return Choice(target, scale, False, step if math.isfinite(step) and step > 0 else 1.0,
                  sources)
