"""The `axes:` of a sweep file: what each axis sets and which values it takes.

Shortcuts: `width` (the model width), `parameterization` (param.name), `lr` (train.lr), `seed`
(train.seed), `optimizer` (train.optimizer). Any other key is a dotted path into the trial
config. `lr` takes a list, a log2 range `{log2: [lo, hi], per_octave: k}`, or a mapping from
parameterization to either.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

from mutransfer.analysis_defaults import SAME_LR_RTOL, TOKEN_SOURCES, AnalysisSection
from mutransfer.config import TrialConfig
from mutransfer.configbase import MAX_INT, validate, yaml12_float
from mutransfer.errors import UserError
from mutransfer.param.config import PARAMETERIZATIONS
from mutransfer.sweep.plan.spec import LOG2_MAX, LOG2_MIN, LRRange, SweepSpec

# The shortcut names are also the fixed columns of the trials table, always present and taken
# from the resolved config (docs/results-format.md).
SHORTCUTS = {"width": "width", "parameterization": "param.name", "lr": "train.lr",
             "seed": "train.seed", "optimizer": "train.optimizer"}
# trials-table column of a config path; other axes: their path
COLUMNS = {path: name for name, path in SHORTCUTS.items()}
SECTIONS = ("width", "model", "param", "train", "data")


@dataclass(frozen=True)
class LRChoice:
    """The LRs of one parameterization: grid values and the log2 range they span."""

    values: tuple[float, ...]
    log2_lo: float
    log2_hi: float
    per_octave: int | None = None  # a log2 range's; None: a list of LRs


@dataclass(frozen=True)
class Axis:
    name: str  # as written in the file
    path: str  # dotted path into the trial config
    values: tuple[Any, ...] = ()  # every axis but lr
    lr: dict[str, LRChoice] | None = None  # lr: per parameterization ("*": any)

    @property
    def column(self) -> str:
        return COLUMNS.get(self.path, self.path)

    def lr_for(self, parameterization: str) -> LRChoice:
        assert self.lr is not None
        return self.lr.get(parameterization) or self.lr["*"]


def parameterizations(spec: SweepSpec) -> list[str]:
    """The parameterizations a sweep runs: its axis, else the one of its `param` section."""
    default = TrialConfig().param.name
    values = spec.axes.get("parameterization", spec.axes.get("param.name"))
    if isinstance(values, list) and values:
        return [str(v) for v in values]
    sections = spec.axes.get("param")  # whole param sections: each replaces the file's
    if isinstance(sections, list) and sections:
        return list(dict.fromkeys(str(s.get("name", default)) if isinstance(s, dict)
                                  else default for s in sections))
    return [str(spec.param.get("name", default))]


def parse_axes(raw: dict[str, Any], parameterizations: list[str]) -> list[Axis]:
    """Axes in file order; UserError naming `axes.NAME` on any problem."""
    axes = [_parse_axis(str(name), values) for name, values in raw.items()]
    _check_paths(axes)
    for axis in axes:
        if axis.lr is not None:
            _check_lr_covers(axis, parameterizations)
    return axes


def _parse_axis(name: str, values: Any) -> Axis:
    path = SHORTCUTS.get(name, name)
    if path.split(".")[0] not in SECTIONS or any(not p for p in path.split(".")):
        raise UserError(f"axes.{name}: not an axis; use width, parameterization, lr, seed, "
                        f"optimizer or a dotted path into {', '.join(SECTIONS[1:])} "
                        f"(e.g. train.steps)")
    if path == "train.lr":
        return Axis(name, path, lr=_parse_lr(name, values))
    if not isinstance(values, list):
        raise UserError(f"axes.{name}: expected a list of values, got {_kind(values)}")
    if not values:
        raise UserError(f"axes.{name}: empty list; give at least one value")
    if path in ("width", "train.seed"):
        values = [_whole(f"axes.{name}[{i}]", v) for i, v in enumerate(values)]
    if path in SECTIONS[1:]:  # a whole section per value, replacing the file's
        for i, v in enumerate(values):
            if not isinstance(v, dict):
                also = ("; parameterization names go in axes.parameterization"
                        if path == "param" else "")
                raise UserError(f"axes.{name}[{i}]: {v!r} is not a {path} section (a mapping, "
                                f"e.g. {SECTION_EXAMPLE[path]}){also}")
    _check_distinct(f"axes.{name}", values,
                    " (more seeds: new seed numbers)" if path == "train.seed" else "")
    return Axis(name, path, values=tuple(values))


def _whole(where: str, value: Any) -> int:
    """A width or seed: an integer, also as a whole float (`64.0`, an integer to the JSON
    schema and to the field itself) or text YAML 1.2 reads as one (`1e3`)."""
    number = yaml12_float(value) if isinstance(value, str) else value
    if isinstance(number, float) and number.is_integer() and abs(number) <= MAX_INT:
        return int(number)
    if not isinstance(number, int) or isinstance(number, bool):
        raise UserError(f"{where}: {value!r} is not an integer")
    return number


SECTION_EXAMPLE = {"model": "{n_layer: 4}", "param": "{name: mup}", "train": "{steps: 100}",
                   "data": "{kind: stdlib}"}


def _check_distinct(where: str, values: list[Any], hint: str = "") -> None:
    """Each value of an axis once: a repeated one ran as one cell (seed: [0, 0, 1] gave two
    seeds, not three) with nothing said. Numbers compare by value (10 and 10.0 are one)."""
    seen: dict[str, int] = {}
    for i, v in enumerate(values):
        key = canonical_value(v)
        if key in seen:
            raise UserError(f"{where}[{i}]: {v!r} repeats {where}[{seen[key]}]; give each "
                            f"value once{hint}")
        seen[key] = i


def canonical_value(value: Any) -> str:
    """A value as text, equal for equal values: numbers by value (10 and 10.0), mappings
    whatever their key order (what a field reads as one besides: build_plan's cells)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))
    if isinstance(value, dict):
        return "{" + ",".join(f"{k!r}:{canonical_value(v)}" for k, v in sorted(
            value.items(), key=lambda kv: str(kv[0]))) + "}"
    if isinstance(value, list):
        return "[" + ",".join(map(canonical_value, value)) + "]"
    return repr(value)


def _parse_lr(name: str, values: Any) -> dict[str, LRChoice]:
    if isinstance(values, dict) and "log2" not in values and values:
        out = {}
        for key, sub in values.items():
            if key not in PARAMETERIZATIONS:
                raise UserError(f"axes.{name}.{key}: not a parameterization "
                                f"(known: {', '.join(PARAMETERIZATIONS)})")
            out[str(key)] = _lr_choice(f"{name}.{key}", sub)
        return out
    return {"*": _lr_choice(name, values)}


def _lr_choice(where: str, values: Any) -> LRChoice:
    if isinstance(values, dict):
        rng = validate(LRRange, values, source=f"axes.{where}")
        lo, hi = rng.log2
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise UserError(f"axes.{where}.log2: bounds must be finite")
        if lo > hi:
            raise UserError(f"axes.{where}.log2: range upside down ({lo} > {hi}); "
                            f"write [low, high]")
        for bound in (lo, hi):  # 2.0 ** 1024 overflows (a traceback, as did the count of
            if not LOG2_MIN <= bound <= LOG2_MAX:  # points of [-1e308, 1e308])
                raise UserError(f"axes.{where}.log2: {bound:g} is beyond the LRs a float "
                                f"holds (log2 from {LOG2_MIN} to {LOG2_MAX})")
        # the points of the ladder from 2^lo that lie in the range: round() put one above
        # 2^hi where hi - lo is no whole number of steps ([-10, -8.5]: 2^-8); a grid search
        # refuses such a range (check_whole_steps), an adaptive one samples all of it
        n = math.floor((hi - lo) * rng.per_octave + WHOLE_STEP_SLACK)
        grid = [2.0 ** (lo + i / rng.per_octave) for i in range(n + 1)]
        if abs((hi - lo) * rng.per_octave - n) <= WHOLE_STEP_SLACK:
            # the high end is 2^hi itself: lo + n/k drifts in its last bits where lo is no
            # dyadic number ([-8.3, -6.3] ran 2^-6.300000000000001, another trial id than
            # the 2^-6.3 of a range that starts there); a dyadic lo gives 2^hi already
            grid[-1] = 2.0 ** hi
        return LRChoice(tuple(grid), lo, hi, rng.per_octave)
    if not isinstance(values, list):
        raise UserError(f"axes.{where}: expected a list of LRs or {{log2: [lo, hi], "
                        f"per_octave: k}}, got {_kind(values)}")
    if not values:
        raise UserError(f"axes.{where}: empty list; give at least one LR")
    lrs = tuple(_positive(f"axes.{where}[{i}]", v) for i, v in enumerate(values))
    _check_distinct_lrs(f"axes.{where}", lrs)
    return LRChoice(lrs, math.log2(min(lrs)), math.log2(max(lrs)))


# A log2 range whose span is this close to a whole number of steps is one (floats: (-6 -
# -10) * 3 is exactly 12, but a bound like -8.3 + 0.3 is not exactly -8).
WHOLE_STEP_SLACK = 1e-9


def _check_distinct_lrs(where: str, lrs: tuple[float, ...]) -> None:
    """Each LR once, where LRs that round to one (0.001 and 0.0010000000001) are one: the
    analysis reads them as one grid point, with two trials of each seed."""
    order = sorted(range(len(lrs)), key=lambda i: lrs[i])
    for a, b in zip(order, order[1:]):
        if math.isclose(lrs[a], lrs[b], rel_tol=SAME_LR_RTOL):
            first, then = sorted((a, b))
            raise UserError(f"{where}[{then}]: {lrs[then]!r} repeats {where}[{first}]"
                            + ("" if lrs[a] == lrs[b] else f" ({lrs[first]!r}: within a "
                               f"relative {SAME_LR_RTOL:g}, one LR to the analysis)")
                            + "; give each value once")


def check_whole_steps(axes: list[Axis]) -> None:
    """A grid's log2 ranges hold a whole number of steps: `{log2: [-10, -8.5], per_octave:
    1}` ran 2^-8, above the range (and [-10, -9.5] stopped at 2^-10), where the file says
    both ends are on the grid."""
    for axis in axes:
        for pname, c in (axis.lr or {}).items():
            if c.per_octave is None:
                continue
            span = (c.log2_hi - c.log2_lo) * c.per_octave
            if abs(span - round(span)) > WHOLE_STEP_SLACK:
                where = axis.name if pname == "*" else f"{axis.name}.{pname}"
                top = c.log2_lo + math.floor(span + WHOLE_STEP_SLACK) / c.per_octave
                raise UserError(
                    f"axes.{where}.log2: [{c.log2_lo:g}, {c.log2_hi:g}] is {span:g} steps of "
                    f"1/{c.per_octave} octave, not a whole number, so 2^{c.log2_hi:g} is no "
                    f"grid point (the grid would end at 2^{top:g}); give a high end a whole "
                    f"number of steps from the low one")


# LRs this close in log2 are one LR when a widened range is snapped onto stored ones: about
# the analysis's SAME_LR_RTOL (a relative 1e-9 is 1.44e-9 in log2), kept apart because
# unifying them would move which stored LRs a widened range snaps to by a hair
SAME_LR_LOG2 = 1e-9


def snap_lrs(axes: list[Axis], known: set[float]) -> list[Axis]:
    """Each grid LR within SAME_LR_LOG2 of an LR the store already ran becomes that stored
    float. A range's `2**(lo + i/k)` depends on lo in its last bits: widening
    `{log2: [-10, -6], per_octave: 3}` to `[-12, -6]` moved 4 of its 13 LRs by an ulp, gave
    them new trial ids and ran their cells again beside the stored ones."""
    if not known:
        return axes
    logs = sorted((math.log2(v), v) for v in known if v > 0 and math.isfinite(v))
    keys = [x for x, _ in logs]

    def snap(lr: float) -> float:
        x = math.log2(lr)
        i = bisect.bisect_left(keys, x)
        near = [logs[j] for j in (i - 1, i) if 0 <= j < len(logs)]
        best = min(near, key=lambda kv: abs(kv[0] - x), default=None)
        return best[1] if best is not None and abs(best[0] - x) <= SAME_LR_LOG2 else lr

    out = []
    for axis in axes:
        if axis.lr is None:
            out.append(axis)
            continue
        lr = {p: LRChoice(tuple(snap(v) for v in c.values), c.log2_lo, c.log2_hi, c.per_octave)
              for p, c in axis.lr.items()}
        out.append(Axis(axis.name, axis.path, axis.values, lr))
    return out


def _positive(where: str, value: Any) -> float:
    """An LR: a positive finite number (YAML reads `1e-3` as text, so numeric text counts)."""
    try:
        lr = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        raise UserError(f"{where}: {value!r} is not a number") from None
    if not math.isfinite(lr) or lr <= 0:
        raise UserError(f"{where}: {value!r} is not a positive learning rate")
    return lr


def _check_paths(axes: list[Axis]) -> None:
    """No two axes may set the same field, or one a field inside another's."""
    for i, a in enumerate(axes):
        for b in axes[i + 1:]:
            if a.path == b.path or b.path.startswith(a.path + ".") or \
                    a.path.startswith(b.path + "."):
                raise UserError(f"axes.{b.name}: sets the same field as axes.{a.name} "
                                f"({b.path})")


def _check_lr_covers(axis: Axis, parameterizations: list[str]) -> None:
    if axis.lr is None or "*" in axis.lr:
        return
    for p in parameterizations:
        if p not in axis.lr:
            raise UserError(f"axes.{axis.name}: no LRs for parameterization {p} "
                            f"(given for {', '.join(axis.lr)})")


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"


def check_analysis(section: AnalysisSection | None, axes: list[Axis]) -> None:
    """The sweep file's `analysis:` names axes this sweep varies (the analysis checks the
    same on the stored trials, for a choice made on the command line)."""
    if section is None:
        return
    by_column = {a.column: a for a in axes}

    def varies(name: str) -> bool:
        axis = by_column.get(name)
        return axis is not None and (axis.lr is not None or len(set(map(repr, axis.values))) > 1)

    target = section.target
    if target is not None and target != "lr":
        axis = by_column.get(target)
        if axis is None or target in ("seed", "width", "parameterization", "optimizer"):
            raise UserError(f"analysis.target: {target} is not a swept numeric axis of this "
                            "sweep")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                   for v in axis.values):
            raise UserError(f"analysis.target: {target} is not a numeric axis")
        if not varies(target):
            raise UserError(f"analysis.target: {target} does not vary in this sweep")
    for name in section.scale or []:
        ok = (any(varies(s) for s in TOKEN_SOURCES) if name == "tokens" else varies(name))
        if not ok:
            raise UserError(f"analysis.scale: {name} does not vary in this sweep (a scale "
                            "axis needs two values at least)")
        if name == target:
            raise UserError(f"analysis.scale: {name} is also the target")
