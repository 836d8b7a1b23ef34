"""Which columns of the trials table are axes, and the cleaned trial rows the analysis uses.

A *family* is one parameterization plus one value of every other varying axis (optimizer,
dotted-path axes such as `model.zero_real_fraction`); a *group* is a family at one width; a
*cell* is a group at one learning rate. Seeds are replicates within a cell.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mutransfer.analysis.choice import TOKEN_SOURCES, TOKENS, WIDTH, Choice, training_tokens
from mutransfer.analysis_defaults import SAME_LR_RTOL
from mutransfer.divergence import DivergenceMonitor
from mutransfer.results.schema import stored_config
from mutransfer.results.store import TRIAL_COLUMNS

WIDTH_AXIS = "d_model"  # the model width's column when another scale axis has the width role
LR_AXIS = "train.lr"    # the LR's column when another hyperparameter is the target


class GroupAxes:
    """Column lists of a table grouped by parameterization, the other axes, and width.

    `width` is the column of the first scale axis (analysis/choice.py; the model width unless
    chosen otherwise); the other scale axes are among `axes` and named in `scale_axes`."""

    axes: list[str]
    scale_axes: list[str]

    @property
    def family_cols(self) -> list[str]:
        """One family per parameterization and other-axis value: a line across widths."""
        return ["parameterization", *self.axes]

    @property
    def group_cols(self) -> list[str]:
        return [*self.family_cols, "width"]

    @property
    def pool_cols(self) -> list[str]:
        """The family without its scale axes: the optima whose noise is pooled."""
        return [c for c in self.family_cols if c not in self.scale_axes]

    @property
    def scale_cols(self) -> list[str]:
        """Every scale axis's column, the width role's first."""
        return ["width", *self.scale_axes]


@dataclass
class Prepared(GroupAxes):
    """Trials ready for analysis: failed trials dropped, `loss` NaN where a trial diverged."""

    trials: pd.DataFrame
    axes: list[str]                      # group axes besides parameterization and width
    fixed: dict[str, object] = field(default_factory=dict)  # extra columns with one value
    n_failed: int = 0
    n_no_loss: int = 0                   # not diverged, yet no final loss stored: dropped
    n_beyond_bound: int = 0              # stored as trained, diverged by the rule: counted so
    n_stopped: int = 0                   # stopped early (search.stop): never in lr*
    n_stopped_with: int = 0              # trials left out with them (the same LR and width)
    scale_axes: list[str] = field(default_factory=list)  # scale axes besides the width role
    # the cells (group columns and lr) left out because a trial there stopped early: in the
    # cells table they are "not run", as the estimator never sees them
    stopped: pd.DataFrame = field(default_factory=pd.DataFrame)

    def stopped_lrs(self, key: tuple) -> set[float]:
        """The LRs of group `key` (its group columns' values) where a trial stopped early."""
        if self.stopped.empty:
            return set()
        hit = self.stopped
        for col, value in zip(self.group_cols, key):
            hit = hit[hit[col] == value]
        return set(hit["lr"].astype(float))


UNSET = "unset"


def _hashable(value: object) -> object:
    """Lists and dicts (possible in extra axis columns) become JSON text so they can be keys.

    A missing value (an axis that only part of the sweep sets) becomes "unset": NaN is not
    equal to itself and would break lookups by key.
    """
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return UNSET
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, dict, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def axis_columns(trials: pd.DataFrame) -> tuple[list[str], dict[str, object]]:
    """Varying axes (optimizer first, then extra columns in table order) and the constant extras.

    An extra axis is any column the store does not define (docs/results-format.md); one that
    holds a single value splits nothing, so it is reported as a fixed setting instead.
    """
    axes: list[str] = []
    fixed: dict[str, object] = {}
    if "optimizer" in trials and trials["optimizer"].nunique(dropna=False) > 1:
        axes.append("optimizer")
    for col in trials.columns:
        if col in TRIAL_COLUMNS or col.startswith("_"):
            continue
        values = trials[col].map(_hashable)
        if values.nunique(dropna=False) > 1:
            axes.append(col)
        elif len(values):
            fixed[col] = values.iloc[0]
    return axes, fixed


def apply_choice(df: pd.DataFrame, choice: Choice) -> tuple[pd.DataFrame, list[str]]:
    """The trials with the target in the `lr` role (analysis/choice.py maps it) and the first
    scale axis in the `width` role; the LR becomes the axis `train.lr` and the model width,
    out of its role, the axis `d_model` (shown as width). Returns them and the internal
    names of the other scale axes."""
    df = df.copy()
    if TOKENS in choice.scale:
        df[TOKENS] = training_tokens(df).astype("int64")
        df = df.drop(columns=[c for c in TOKEN_SOURCES if c in df])
    if choice.target != "lr":
        df[LR_AXIS] = df["lr"]
        df["lr"] = choice.to_role(pd.to_numeric(df[choice.target]).to_numpy(float))
        df = df.drop(columns=[choice.target])
    primary = choice.scale[0]
    if primary != WIDTH:
        df[WIDTH_AXIS] = df[WIDTH]
        df[WIDTH] = pd.to_numeric(df[primary]).round().astype("int64")
        if primary != TOKENS:
            df = df.drop(columns=[primary])
    internal = [WIDTH_AXIS if s == WIDTH else s for s in choice.scale[1:]]
    for col in internal:
        df[col] = pd.to_numeric(df[col]).round().astype("int64")
    return df, internal


def prepare(trials: pd.DataFrame, choice: Choice | None = None) -> Prepared:
    """Drop failed trials, normalise types, and mark which losses count.

    `diverged` is the trial's flag or status; `loss` is its final eval loss when it trained.
    A diverged trial's losses are never used, whatever the store holds for it (null, or in
    older stores its last finite loss): it enters only as a divergence. So does a trial stored
    as trained whose final loss the divergence rule calls diverged (beyond_bound). A trial
    that neither diverged nor has a finite final loss has no outcome and is dropped like a
    failed one (so it is not taken for trained, nor for diverged).
    """
    status = trials.get("status", pd.Series("complete", index=trials.index)).astype(str)
    failed = status.eq("failed")
    df = trials.loc[~failed].copy()
    scale_axes: list[str] = []
    if choice is not None and not choice.is_default:
        df, scale_axes = apply_choice(df, choice)
    axes, fixed = axis_columns(df)
    axes = [c for c in axes if c not in scale_axes] + scale_axes
    for col in scale_axes:
        fixed.pop(col, None)
    for col in axes:
        df[col] = df[col].map(_hashable)
    div_flag = df["diverged"].astype("boolean").fillna(False).astype(bool)
    stored = div_flag | status.loc[df.index].eq("diverged")
    beyond = beyond_bound(df) & ~stored
    df["diverged"] = stored | beyond
    df["width"] = df["width"].astype("int64")
    df["lr"] = same_grid_values(df["lr"].astype("float64"))
    df["seed"] = df["seed"].astype("int64")
    loss = pd.to_numeric(df["final_eval_loss"], errors="coerce").astype("float64")
    df["loss"] = loss.where(~df["diverged"] & np.isfinite(loss))
    # a trial stopped early (search.stop) never enters lr* as trained, and its LR at that
    # width lacks a seed: the whole cell is left out, as a partially diverged one is
    stopped = status.loc[df.index].eq("stopped")
    cell = ["parameterization", *axes, "width", "lr"]
    hit = df.loc[stopped, cell].drop_duplicates()
    with_stopped = df[cell].merge(hit, how="left", indicator=True)["_merge"].eq("both")
    with_stopped.index = df.index
    df = df.loc[~with_stopped]
    no_loss = ~df["diverged"] & df["loss"].isna()
    df = df.loc[~no_loss]
    df = df.sort_values(["parameterization", *axes, "width", "lr", "seed"], kind="stable")
    return Prepared(df.reset_index(drop=True), axes, fixed, int(failed.sum()),
                    int(no_loss.sum()), n_beyond_bound=int(beyond.loc[df.index].sum()),
                    n_stopped=int(stopped.sum()),
                    n_stopped_with=int(with_stopped.sum() - stopped.sum()),
                    scale_axes=scale_axes, stopped=hit.reset_index(drop=True))


# LRs closer than SAME_LR_RTOL (relative) are one grid value: 2.0 ** (lo + i / k) gives the
# same LR a last-digit apart for two values of lo (a grid extended downward, or another
# sweep's), and the analysis took the two for two LRs, each "not run" at the widths that ran
# the other


def same_grid_values(lr: pd.Series) -> pd.Series:
    """`lr` with values within SAME_LR_RTOL of the next smaller one replaced by it."""
    values = np.unique(lr.to_numpy(float))
    values = values[np.isfinite(values)]
    if len(values) < 2:
        return lr
    rep = values.copy()
    for i in range(1, len(values)):
        if values[i] - rep[i - 1] <= SAME_LR_RTOL * abs(rep[i - 1]):
            rep[i] = rep[i - 1]
    if (rep == values).all():
        return lr
    return lr.map(dict(zip(values, rep))).fillna(lr)


def beyond_bound(trials: pd.DataFrame) -> pd.Series:
    """Which trials stored as trained the divergence rule calls diverged, judged by the rule
    itself (mutransfer/divergence.py) as the trainer judges its last eval: a final eval loss
    that is not finite (inf; a null is a missing loss, not this), or above the bound,
    initial_loss + train.diverge_delta of the trial's stored config. The trainer stores no
    such trial as trained, but a table edited by hand or written by another program may: a
    'complete' loss of 1e300 would be fitted as a trained loss (and its square overflows).
    A trial whose row does not say its bound (no initial loss, no delta in its config) is
    judged by the non-finite loss only: the analysis does not guess the bound it ran under
    (a table from another program may hold losses far above its start that trained)."""
    out = pd.Series(False, index=trials.index)
    if "final_eval_loss" not in trials:
        return out
    final = pd.to_numeric(trials["final_eval_loss"], errors="coerce").to_numpy(float)
    initial = (pd.to_numeric(trials["initial_loss"], errors="coerce").to_numpy(float)
               if "initial_loss" in trials else np.full(len(trials), np.nan))
    with np.errstate(invalid="ignore"):  # NaN: a missing value, not judged
        maybe = np.isinf(final) | (np.isfinite(initial) & (final > initial))  # delta > 0
    configs = trials["config"] if "config" in trials else pd.Series(None, index=trials.index)
    for i in np.flatnonzero(maybe):
        monitor = DivergenceMonitor(initial[i], _diverge_delta(configs.iloc[i]),
                                    smoothing=0.0, patience=1)
        out.iloc[i] = monitor.eval_loss(0, final[i]) or monitor.finish(0, final[i])
    return out


def _diverge_delta(config_json: object) -> float:
    """train.diverge_delta of a stored config; inf (no finite loss is above the bound) where
    it records none that is a positive number."""
    train = (stored_config(config_json) or {}).get("train")
    value = train.get("diverge_delta") if isinstance(train, dict) else None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and value > 0 else math.inf


OVERRIDE_PREFIX = "param.overrides."


def short_axis_name(name: str) -> str:
    """`param.overrides.ssm_B.init_m` -> `ssm_B.init_m`: role and entry name an override;
    the model width out of the width role (`d_model`) is `width`."""
    return WIDTH if name == WIDTH_AXIS else name.removeprefix(OVERRIDE_PREFIX)


def family_label(key: tuple, axes: list[str], sep: str = ", ",
                 among: dict[str, list] | None = None) -> str:
    """`mup` or `mup, optimizer=sgd, model.zero_real_fraction=0.1` (one line per part with
    sep="\n", for panel titles). `among`: each axis's values in the store (axis_values); a
    JSON object's value (a `param` axis of whole entries) then gives only the entries that
    differ among them (compact_values: `param.depth=completep`), as in every figure."""
    parts = [str(key[0])]
    parts += [axis_text(name, value, among.get(name) if among else None, sep)
              for name, value in zip(axes, key[1:])]
    return sep.join(parts)


def axis_text(name: str, value: object, values: list | None = None, sep: str = ", ") -> str:
    """`axis=value`; with `values` (the axis's values in the store), a JSON object's value by
    the entries that differ among them (compact_values)."""
    short = short_axis_name(name)
    if not values:
        return f"{short}={value}"
    return compact_values(short, values, sep).get(value, f"{short}={value}")


def axis_values(df: pd.DataFrame, cols: list[str]) -> dict[str, list]:
    """Each of `cols`' values in `df` (the cells table: every family of the store), for the
    labels' compaction (family_label, compact_values), so that one store's labels agree."""
    return {c: list(df[c].unique()) for c in cols if c in df}


def flat_paths(doc: dict, prefix: str = "") -> dict[str, object]:
    """Dotted path -> value, for every leaf of a nested mapping (an empty mapping is a leaf)."""
    out: dict[str, object] = {}
    for key, value in doc.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flat_paths(value, f"{path}."))
        else:
            out[path] = value
    return out


def compact_values(name: str, values: list[object], sep: str = ", ") -> dict[object, str]:
    """`name=value` per value of an axis; a JSON object's value (e.g. a `param` axis of whole
    parameterization entries) gives only the entries that differ among `values` (null,
    empty and missing count as equal; "unset", an axis part of the store does not set, as
    an object with no entries): `param.depth=completep`, not the whole object; `sep` joins
    the entries."""
    return _compact(values, f"{name}.", lambda v: f"{name}={v}", sep)


def compact_json_values(name: str, values: list[str], sep: str = ", ") -> dict[str, str]:
    """compact_values of values given as JSON text (a grid family's key): a value that is not
    an object is shown decoded (`optimizer=sgd`, not `optimizer="sgd"`)."""
    return _compact(values, f"{name}.", lambda v: f"{name}={json.loads(v)}", sep)


def compact_cells(values: list[object], sep: str = ", ") -> dict[object, str]:
    """A table cell per value of an axis (its column header names the axis): the value as
    text, or of a JSON object only the entries that differ among `values` as in
    compact_values: `depth=completep`."""
    return _compact(values, "", str, sep)


def set_entries(name: str, value: object) -> str:
    """`name=value`; a JSON object's value (a `param` axis of one whole entry) by the entries
    it sets (not null, not empty): `param.name=mup_ssm, param.depth=completep`."""
    flat = _json_entries(value)
    if flat is None:
        return f"{name}={value}"
    flat = {k: x for k, x in flat.items() if x is not None}
    return _entries(f"{name}.", flat, list(flat), ", ") or f"{name}={value}"


def _compact(values: list[object], prefix: str, plain: Callable[[object], str], sep: str
             ) -> dict[object, str]:
    """`prefix` + the differing entries of each JSON object among `values` (_differing),
    `plain(value)` for the rest (every value when one is not a JSON object)."""
    differ = _differing(values)
    if differ is None:
        return {v: plain(v) for v in values}
    parsed, keys = differ
    return {v: (_entries(prefix, parsed[v], keys, sep) if v in parsed else "") or plain(v)
            for v in values}


def _json_entries(value: object) -> dict[str, object] | None:
    """The flattened entries (non-empty) of a value that is a JSON object's text; None for
    any other value."""
    try:
        obj = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return None
    return {k: x for k, x in flat_paths(obj).items() if x != {}}


def _differing(values: list[object]) -> tuple[dict[object, dict], list[str]] | None:
    """(the flattened entries of each JSON object among `values`, the entry paths that differ
    between them), or None when a value is neither a JSON object nor "unset"."""
    parsed = {}
    for v in values:
        if v == UNSET:
            continue
        flat = _json_entries(v)
        if flat is None:
            return None
        parsed[v] = flat
    if not parsed:
        return None
    flats = [*parsed.values(), *([{}] if UNSET in values else [])]
    keys = sorted({k for f in flats for k in f})
    return parsed, [k for k in keys if len({json.dumps(f.get(k)) for f in flats}) > 1]


def _entries(prefix: str, flat: dict[str, object], keys: list[str], sep: str) -> str:
    """`prefix` + `key=value` for the keys set (all of them when none is)."""
    set_ = [k for k in keys if flat.get(k) is not None] or keys
    return sep.join(f"{prefix}{k}={flat.get(k)}" for k in set_)


def as_key(value: object) -> tuple:
    """pandas gives scalars for one-column groupbys and tuples otherwise: always a tuple."""
    return value if isinstance(value, tuple) else (value,)
