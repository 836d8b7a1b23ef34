"""Expanding a sweep into cells: one fully resolved, validated TrialConfig per grid point.

Every cell is validated before anything runs or is written, so that a bad value anywhere in
the grid is reported (naming the axis or field) up front. For adaptive search the units are
*groups* (every axis but the LR) with an LR range instead of LR values.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mutransfer.config import TrialConfig
from mutransfer.configbase import set_dotted
from mutransfer.errors import UserError
from mutransfer.sweep.plan.axes import (
    SHORTCUTS,
    Axis,
    canonical_value,
    check_analysis,
    check_whole_steps,
    parameterizations,
    parse_axes,
    snap_lrs,
)
from mutransfer.sweep.plan.identity import group_id, trial_id
from mutransfer.sweep.plan.spec import SweepSpec, load_spec


@dataclass
class Cell:
    """One trial of the grid."""

    trial_id: str
    config: dict[str, Any]  # TrialConfig.model_dump(mode="json")
    columns: dict[str, Any]  # trials-table values: width, parameterization, lr, ..., axes

    @property
    def width(self) -> int:
        return int(self.config["width"])


@dataclass
class Group:
    """Every axis but the LR fixed: one adaptive study over log LR in [2^lo, 2^hi]."""

    group_id: str
    config: dict[str, Any]  # the resolved config at LR 2^lo
    columns: dict[str, Any]
    log2_lo: float
    log2_hi: float
    budget: int  # trials of the study

    @property
    def width(self) -> int:
        return int(self.config["width"])


_UNSET = object()  # a path the file's sections do not set


@dataclass
class Plan:
    """A validated sweep: its spec, axes and cells (grid) or groups (adaptive search)."""

    spec: SweepSpec
    source: str
    axes: list[Axis]
    cells: list[Cell] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    file_text: str = ""

    @property
    def adaptive(self) -> bool:
        """Groups with an LR range instead of cells (the search strategy says)."""
        return self.spec.search.adaptive

    @property
    def part_of_grid(self) -> bool:
        """The strategy runs a subset of the grid's cells, deciding as it goes."""
        return self.spec.search.part_of_grid

    @property
    def n_trials(self) -> int:
        return sum(g.budget for g in self.groups) if self.adaptive else len(self.cells)

    def replaced_by_axes(self) -> list[str]:
        """A note per value the file sets that an axis sets in every cell (`train.lr` beside
        an `lr` axis): the file's value is not used, and before this said so nowhere."""
        notes, base = [], self.spec.base_config()
        for axis in self.axes:
            node: Any = base
            for key in axis.path.split("."):
                node = node.get(key, _UNSET) if isinstance(node, dict) else _UNSET
            if node is not _UNSET and node != {}:  # an empty section sets nothing
                notes.append(f"note: {axis.path} {node!r} in the file is not used: the "
                             f"{axis.name} axis sets it in every cell")
        run = {str(u.config["param"]["name"]) for u in (self.groups or self.cells)}
        for axis in self.axes:  # LRs given for a parameterization no cell runs
            unused = [p for p in (axis.lr or {}) if p != "*" and p not in run]
            if unused:
                notes.append(f"note: axes.{axis.name} {', '.join(unused)} is not used: the "
                             f"sweep runs {', '.join(sorted(run))} (add a parameterization "
                             f"axis to run {'it' if len(unused) == 1 else 'them'})")
        return notes

    def data_configs(self) -> list[dict[str, Any]]:
        """The distinct data configs of the sweep (checked for presence before running)."""
        units = self.groups if self.adaptive else self.cells
        seen: dict[str, dict[str, Any]] = {}
        for unit in units:
            seen.setdefault(repr(sorted(unit.config["data"].items())), unit.config["data"])
        return list(seen.values())


def load_plan(path: str | Path) -> Plan:
    """Read, validate and expand a sweep file; UserError (one line) on any problem."""
    spec = load_spec(path)
    plan = build_plan(spec, source=str(path))
    plan.file_text = Path(path).read_text()
    return plan


def build_plan(spec: SweepSpec, source: str = "sweep",
               known_lrs: set[float] | None = None) -> Plan:
    """The plan of a sweep; `known_lrs`: the LRs its store already ran, onto which grid LRs
    a last bit away snap (axes.snap_lrs)."""
    try:
        axes = snap_lrs(parse_axes(spec.axes, parameterizations(spec)), known_lrs or set())
        check_analysis(spec.analysis, axes)
        plan = Plan(spec, source, axes)
        if plan.adaptive:
            plan.groups = _groups(spec, axes)
        else:
            check_whole_steps(axes)
            plan.cells = _cells(spec, axes)
        if plan.part_of_grid and not any(a.lr is not None for a in axes):
            raise UserError(f"axes.lr: a {spec.search.kind} search needs an LR axis to search")
    except UserError as exc:
        raise UserError(f"{source}: {exc}") from None
    return plan


def _combinations(axes: list[Axis]) -> list[dict[str, Any]]:
    """Every assignment of the non-LR axes, in file order (the first axis varies slowest)."""
    plain = [a for a in axes if a.lr is None]
    return [dict(zip([a.name for a in plain], combo))
            for combo in itertools.product(*[a.values for a in plain])]


def _assign(spec: SweepSpec, axes: list[Axis], values: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(spec.base_config())
    for axis in axes:
        if axis.name in values:
            set_dotted(data, axis.path, copy.deepcopy(values[axis.name]))
    return data


def _resolve(spec: SweepSpec, axes: list[Axis], values: dict[str, Any]) -> TrialConfig:
    try:
        return TrialConfig.model_validate(_assign(spec, axes, values))
    except ValidationError as exc:
        raise UserError(_cell_error(exc, axes, values)) from None


def _cells(spec: SweepSpec, axes: list[Axis]) -> list[Cell]:
    lr_axis = next((a for a in axes if a.lr is not None), None)
    cells: dict[str, Cell] = {}
    made_by: dict[str, dict[str, Any]] = {}  # trial id -> the axis values of its cell
    for combo in _combinations(axes):
        lrs: tuple[Any, ...] = (None,)
        if lr_axis is not None:
            pname = str(_assign(spec, axes, combo)["param"].get("name", "sp"))
            lrs = lr_axis.lr_for(pname).values
        for lr in lrs:
            values = combo if lr_axis is None else {**combo, lr_axis.name: lr}
            dumped = _resolve(spec, axes, values).model_dump(mode="json")
            cell = Cell(trial_id(dumped), dumped, columns_of(dumped, axes))
            _check_new(made_by, cell.trial_id, values, axes)
            cells[cell.trial_id] = cell
    _check_token_budgets(list(cells.values()), axes)
    return sorted(cells.values(), key=_cost_order)


def _groups(spec: SweepSpec, axes: list[Axis]) -> list[Group]:
    lr_axis = next((a for a in axes if a.lr is not None), None)
    if lr_axis is None:
        raise UserError("axes.lr: adaptive search needs an LR range, e.g. "
                        "lr: {log2: [-12, -4]}")
    groups: dict[str, Group] = {}
    made_by: dict[str, dict[str, Any]] = {}  # group id -> the axis values of its group
    for combo in _combinations(axes):
        pname = str(_assign(spec, axes, combo)["param"].get("name", "sp"))
        choice = lr_axis.lr_for(pname)
        if choice.log2_hi <= choice.log2_lo:
            raise UserError(f"axes.{lr_axis.name}: adaptive search needs a range with "
                            f"low < high (got a single LR for {pname})")
        _resolve(spec, axes, {**combo, lr_axis.name: 2.0 ** choice.log2_hi})  # both ends valid
        config = _resolve(spec, axes, {**combo, lr_axis.name: 2.0 ** choice.log2_lo})
        dumped = config.model_dump(mode="json")
        columns = {k: v for k, v in columns_of(dumped, axes).items() if k != "lr"}
        gid = group_id(dumped)
        _check_new(made_by, gid, combo, axes)
        groups[gid] = Group(gid, dumped, columns, choice.log2_lo, choice.log2_hi,
                            spec.search.trials_per_width)
    _check_token_budgets(list(groups.values()), axes)
    return sorted(groups.values(), key=_cost_order)


def _check_new(made_by: dict[str, dict[str, Any]], uid: str, values: dict[str, Any],
               axes: list[Axis]) -> None:
    """Two cells of different axis values that are one trial once validated (`[0.001,
    "1e-3"]`, `[true, 1]`, `param: [{name: sp}, {name: sp, depth: none}]`) are refused, as a
    repeated value is: before, the second was dropped without a word, the count said N cells
    and N-1 ran."""
    if uid not in made_by:
        made_by[uid] = values
        return
    first = made_by[uid]
    differ = [a for a in axes if a.name in values
              and canonical_value(first.get(a.name)) != canonical_value(values[a.name])]
    what = ", ".join(f"axes.{a.name}: {first.get(a.name)!r} and {values[a.name]!r}"
                     for a in differ) or f"{first!r} and {values!r}"
    raise UserError(f"{what} give the same trial (one config once validated); give each "
                    f"value once")


def _check_token_budgets(units: list[Cell] | list[Group], axes: list[Axis]) -> None:
    """A token budget trains whole steps (tokens // (batch_size x seq_len)) and sets the run's
    length whatever train.steps says: two cells that differ only in train.tokens giving the
    same number of steps, or only in train.steps beside one budget, would be one run under
    two trial ids, its losses shown at two lengths the run never had. Refused, naming both."""
    seen: dict[str, dict[str, Any]] = {}
    for unit in units:
        train = unit.config["train"]
        if train.get("tokens") is None:
            continue
        steps = train["tokens"] // (train["batch_size"] * train["seq_len"])
        key = repr(sorted({**unit.config, "train": {**train, "tokens": None, "steps": steps}
                           }.items()))
        other = seen.setdefault(key, train)
        if other is not train:
            raise UserError(_one_run(other, train, steps, axes))


def _one_run(a: dict[str, Any], b: dict[str, Any], steps: int, axes: list[Axis]) -> str:
    """The line for two train sections whose token budget trains one run of `steps` steps."""
    per_step = a["batch_size"] * a["seq_len"]
    field = "tokens" if a["tokens"] != b["tokens"] else "steps"
    axis = next((x for x in axes if x.path in (f"train.{field}", "train")), None)
    where = f"axes.{axis.name}" if axis is not None else f"train.{field}"
    low, high = sorted((a[field], b[field]))
    if field == "tokens":
        return (f"{where}: {low} and {high} tokens both train {steps} steps of {per_step} "
                f"tokens (batch_size {a['batch_size']} x seq_len {a['seq_len']}): one run "
                f"under two trial ids; give budgets at least one step apart")
    return (f"{where}: {low} and {high} steps are not used: train.tokens {a['tokens']} sets "
            f"the run's length ({steps} steps of {per_step} tokens), so both are one run under "
            f"two trial ids; sweep train.tokens, or leave it out to sweep train.steps")


def _cost_order(unit: Cell | Group) -> tuple[int, int]:
    """Widest (and longest) first: the big trials start early, which shortens the sweep."""
    steps = unit.config["train"].get("steps") or 0
    return (-unit.width, -int(steps))


def value_at(config: dict[str, Any], path: str) -> Any:
    node: Any = config
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


def columns_of(config: dict[str, Any], axes: list[Axis]) -> dict[str, Any]:
    """The trials-table columns of a resolved config: the fixed ones (the axis shortcuts),
    then one per extra axis."""
    cols = {name: value_at(config, path) for name, path in SHORTCUTS.items()}
    for axis in axes:
        if axis.column not in cols:
            cols[axis.column] = value_at(config, axis.path)
    return cols


def _cell_error(exc: ValidationError, axes: list[Axis], values: dict[str, Any]) -> str:
    """One line: the axis and value responsible when there is one, else the field."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    msg = re.sub(r"^(Value|Assertion) error, ", "", str(err.get("msg", "invalid value")))
    axis = _blame(loc, msg, axes, values)
    if axis is not None:
        where = f"{loc}: " if loc and loc != axis.path else ""
        return f"axes.{axis.name}: {values[axis.name]!r}: {where}{msg}"
    return f"{loc}: {msg}" if loc else msg


def _blame(loc: str, msg: str, axes: list[Axis], values: dict[str, Any]) -> Axis | None:
    """The axis whose path holds the failing field, or for a whole-config check (no field)
    the axis whose last name the message mentions (e.g. `width 32 is below base_width`)."""
    for axis in axes:
        if axis.name in values and loc and (loc == axis.path or loc.startswith(axis.path + ".")):
            return axis
    for axis in axes:  # a check of a whole section (`model`): the axis its message names
        if axis.name in values and loc and axis.path.startswith(loc + ".") \
                and _names(msg, loc, axis.path):
            return axis
    if not loc:
        for axis in axes:
            leaf = axis.path.rsplit(".", 1)[-1]
            if axis.name in values and re.search(rf"\b{re.escape(leaf)}\b", msg):
                return axis
    return None


def _names(msg: str, loc: str, path: str) -> bool:
    """Whether `msg` names the field `path` inside section `loc`: its dotted path, a section
    that holds it (`model.s4d` for `model.s4d.init`) or its last name."""
    parts = path[len(loc) + 1:].split(".")
    fields = {".".join(parts[:i]) for i in range(1, len(parts) + 1)} | {parts[-1]}
    fields |= {f"{loc}.{f}" for f in fields}
    return any(re.search(rf"(?<![\w.]){re.escape(f)}(?![\w])", msg) for f in fields)
