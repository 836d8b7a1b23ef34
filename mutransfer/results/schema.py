"""The Arrow schemas of the two tables: every part is written with them, so that every part of
a folder has the same columns and types and any Parquet reader (pandas, pyarrow.dataset,
DuckDB, polars) reads a folder as one table. A value a row does not have (the losses of a
failed trial, the error of a finished one) is a typed null, never a column of Arrow type null.

Extra axis columns (one per sweep axis beyond width, parameterization, lr, seed, optimizer)
come after `optimizer`; their types are chosen once per sweep from all their values
(`axis_types`), so all parts of a sweep agree.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

# The parameter roles (mutransfer/param/config.py ROLES; a test keeps the two equal): one
# `tau_<role>` column each, the weight-decay timescale 1/(η_group·λ_group) in steps.
DECAY_ROLES = ("embedding", "hidden", "vector", "ssm_B", "ssm_C", "readout")

# The fixed trials columns; the extra axis columns go after AXES_AFTER.
TRIAL_FIELDS: list[tuple[str, pa.DataType]] = [
    ("trial_id", pa.string()), ("sweep", pa.string()), ("width", pa.int64()),
    ("parameterization", pa.string()), ("lr", pa.float64()), ("seed", pa.int64()),
    ("optimizer", pa.string()), ("status", pa.string()), ("diverged", pa.bool_()),
    ("diverge_step", pa.int64()), ("final_eval_loss", pa.float64()),
    ("best_eval_loss", pa.float64()), ("last_finite_loss", pa.float64()),
    ("max_excursion", pa.float64()), ("steps_above_bound", pa.int64()),
    ("initial_loss", pa.float64()), ("steps_done", pa.int64()), ("tokens", pa.int64()),
    ("wall_time_s", pa.float64()), ("tokens_per_s", pa.float64()),
    ("planned_tokens", pa.int64()), ("params", pa.int64()), ("tokens_per_param", pa.float64()),
    ("branched_from", pa.string()), ("branch_step", pa.int64()),
    *[(f"tau_{role}", pa.float64()) for role in DECAY_ROLES],
    ("search", pa.string()),
    ("host", pa.string()), ("versions", pa.string()), ("corpus", pa.string()),
    ("env", pa.string()), ("config", pa.string()),
    ("attempt", pa.string()), ("evals", pa.int64()), ("error", pa.string()),
]
AXES_AFTER = "optimizer"
STEP_FIELDS: list[tuple[str, pa.DataType]] = [
    ("trial_id", pa.string()), ("step", pa.int64()), ("tokens", pa.int64()),
    ("train_loss", pa.float64()), ("eval_loss", pa.float64()), ("lr", pa.float64()),
    ("grad_norm", pa.float64()), ("tokens_per_s", pa.float64()), ("attempt", pa.string()),
]
TRIAL_COLUMNS = [name for name, _ in TRIAL_FIELDS]
STEP_COLUMNS = [name for name, _ in STEP_FIELDS]
STEP_SCHEMA = pa.schema(STEP_FIELDS)

# axis column types by name (what `axis_types` returns and units carry to the workers)
_TYPES = {"bool": pa.bool_(), "int64": pa.int64(), "float64": pa.float64(),
          "string": pa.string()}


def axis_type(values: Iterable[Any]) -> str:
    """The column type of an axis from all its values: bool, int64 (integers only), float64
    (any other number) or string (text; lists and mappings are stored as JSON text). Nulls
    do not count; an axis of nulls only is string."""
    kinds = {_kind(v) for v in values if v is not None}
    if kinds == {"bool"}:
        return "bool"
    if kinds == {"int64"}:
        return "int64"
    if kinds and kinds <= {"int64", "float64"}:
        return "float64"
    return "string"


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    return "string"


def axis_types(rows: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """{column: type} of the extra axis columns of a sweep's trials rows (or cell columns)."""
    seen: dict[str, list[Any]] = {}
    fixed = set(TRIAL_COLUMNS)
    for row in rows:
        for name, value in row.items():
            if name not in fixed:
                seen.setdefault(name, []).append(value)
    return {name: axis_type(values) for name, values in seen.items()}


def trial_schema(axes: Mapping[str, str] | None = None) -> pa.Schema:
    """The trials schema with the sweep's extra axis columns (name -> type name) in place."""
    fields = []
    for name, typ in TRIAL_FIELDS:
        fields.append(pa.field(name, typ))
        if name == AXES_AFTER:
            fields += [pa.field(a, _TYPES[t]) for a, t in (axes or {}).items()
                       if a not in TRIAL_COLUMNS]
    return pa.schema(fields)


def trial_table(rows: list[Mapping[str, Any]], axes: Mapping[str, str] | None = None) -> pa.Table:
    """Trials rows as a table of `trial_schema`: missing columns are typed nulls, columns
    the schema does not know are an error (a row never silently loses a value). Extra axis
    columns with no type given are typed from these rows."""
    known = dict(axes or {})
    known.update({k: t for k, t in axis_types(rows).items() if k not in known})
    return _table(rows, trial_schema(known))


def step_table(rows: list[Mapping[str, Any]]) -> pa.Table:
    """Steps rows as a table of STEP_SCHEMA (other report fields are not stored)."""
    return _table([{k: r.get(k) for k in STEP_COLUMNS} for r in rows], STEP_SCHEMA)


def _table(rows: list[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    extra = {k for r in rows for k in r} - set(schema.names)
    if extra:
        raise ValueError(f"columns not in the schema: {sorted(extra)}")
    columns = {f.name: [_cell(r.get(f.name), f.type) for r in rows] for f in schema}
    return pa.Table.from_pydict(columns, schema=schema)


def _cell(value: Any, typ: pa.DataType) -> Any:
    """A Python value as `typ` takes it: NaN (pandas' missing number) is null in integer and
    text columns; numbers in text columns become text."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalars
    if isinstance(value, float) and math.isnan(value) and not pa.types.is_floating(typ):
        return None
    if pa.types.is_string(typ) and not isinstance(value, str):
        return str(value)
    if pa.types.is_integer(typ):
        return int(value)
    if pa.types.is_floating(typ):
        return float(value)
    if pa.types.is_boolean(typ):
        return bool(value)
    return value


def stored_config(text: object) -> dict[str, Any] | None:
    """A trial's `config` column (its resolved config as JSON text) as a dict; None for a
    trial without one (a null, an empty or unreadable text, JSON that is not an object)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        config = json.loads(text)
    except ValueError:
        return None
    return config if isinstance(config, dict) else None
