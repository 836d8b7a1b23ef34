"""Base class of every config model, YAML loading with one-line errors, and the user folder
where mutransfer keeps what it makes outside a results store."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from mutransfer.errors import UserError, format_validation_error

M = TypeVar("M", bound=BaseModel)


def user_dir() -> Path:
    """$MUTRANSFER_DATA_DIR, else ~/.cache/mutransfer: downloads, token caches, the scan
    backend `mutransfer doctor` chose for each device."""
    root = os.environ.get("MUTRANSFER_DATA_DIR")
    return Path(root) if root else Path.home() / ".cache" / "mutransfer"


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo in a sweep file must not be silently ignored."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from a file, through `yaml.safe_load`; UserError on any problem."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{path}: no such file")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at "
                        f"offset {exc.start}); save the file as UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise UserError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def validate(model: type[M], data: dict[str, Any], source: str | None = None) -> M:
    """`model.model_validate(data)` with a one-line UserError naming the field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UserError(format_validation_error(exc, source)) from None


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `a.b.c = value` in nested dicts, creating levels as needed."""
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        nxt = node.get(key)
        if nxt is None:
            nxt = node[key] = {}
        elif not isinstance(nxt, dict):
            raise UserError(f"{dotted}: {key} is not a mapping")
        node = nxt
    node[keys[-1]] = value


def parse_set(assignments: list[str]) -> list[tuple[str, Any]]:
    """`key=value` strings from the command line; values parsed as YAML scalars."""
    out = []
    for item in assignments:
        if "=" not in item:
            raise UserError(f"--set {item!r}: expected key=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        out.append((key.strip(), value))
    return out


def cooldown_steps(total: int, fraction: float) -> int:
    """The steps of a wsd cooldown (train.schedule: wsd): `fraction` of a run of `total`
    steps, rounded half up, at least 1; shared by the config's checks and the LR schedule."""
    return max(1, min(total, math.floor(fraction * total + 0.5)))
