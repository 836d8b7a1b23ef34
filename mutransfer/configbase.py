"""Base class of every config model, YAML loading with one-line errors, and the user folder
where mutransfer keeps what it makes outside a results store."""

from __future__ import annotations

import functools
import math
import os
import re
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from mutransfer.errors import UserError, format_validation_error

M = TypeVar("M", bound=BaseModel)


def user_dir() -> Path:
    """$MUTRANSFER_DATA_DIR, else ~/.cache/mutransfer: downloads, token caches, the scan
    backend `mutransfer doctor` chose for each device."""
    root = os.environ.get("MUTRANSFER_DATA_DIR")
    return Path(root) if root else Path.home() / ".cache" / "mutransfer"


# The largest integer a config field holds: every integer up to it is exact as a float64 (what
# JSON readers and float columns make of it), and no count of steps, tokens or widths nears it.
MAX_INT = 2**53


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo in a sweep file must not be silently ignored. Every
    number is a number of its type: finite, not a boolean (YAML's `true` would pass as 1), and
    an integer at most MAX_INT in size (`steps: 1.0e+18` would pass as a whole float); no
    string holds a NUL byte. Text that YAML 1.2 reads as a number (`tokens: 1e9`, which
    YAML 1.1 leaves as text) is that number where a field takes one."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_of_their_type(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return value  # the common case, first: this runs for every field of every config
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and value.__class__ is str:
            value = yaml12_number(value, field.annotation)
        if field is not None:
            problem = number_problem(value, field.annotation)
            if problem:
                raise PydanticCustomError("number", problem)
        return value


# A number as YAML 1.2 (and JSON, and the editors' schema check) reads it, which YAML 1.1's
# safe_load leaves as text: an exponent without a dot or without a sign (`1e6`, `1.0e6`).
_YAML12_NUMBER = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def yaml12_float(text: str) -> float | None:
    """The number YAML 1.2 reads `text` as (None: not a number to it)."""
    return float(text) if _YAML12_NUMBER.fullmatch(text) else None


def yaml12_number(value: str, annotation: Any) -> Any:
    """`value` as a float where `annotation` takes a number and no text and YAML 1.2 reads
    `value` as a number, else `value`: `tokens: 1e9` was refused as "unable to parse string as
    an integer" (an int field parses no exponent) though every editor shows a number."""
    number = yaml12_float(value)
    if number is None:
        return value
    try:
        anything, numeric, _, _, _ = _shape(annotation)
    except TypeError:  # an unhashable annotation
        anything, numeric, _, _, _ = _shape.__wrapped__(annotation)
    if anything or not numeric or str in _arms(annotation):
        return value
    return number


def _arms(annotation: Any) -> tuple[Any, ...]:
    """The alternatives of an annotation: `int | None` -> (int, NoneType); Annotated
    unwrapped. Cached: every field of every config asks at every validation."""
    try:
        return _cached_arms(annotation)
    except TypeError:  # an unhashable annotation
        return _arms_of(annotation)


def _arms_of(annotation: Any) -> tuple[Any, ...]:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _arms(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return tuple(arm for arg in get_args(annotation) for arm in _arms(arg))
    return (annotation,)


_cached_arms = functools.lru_cache(maxsize=1024)(_arms_of)


def _items(value: Sequence, arm: Any) -> list[tuple[int, Any, Any]]:
    """(index, item, its annotation) of a list or tuple given where `arm` is a sequence type."""
    args, origin = get_args(arm), get_origin(arm)
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        return [(i, v, a) for i, (v, a) in enumerate(zip(value, args))]
    return [(i, v, args[0]) for i, v in enumerate(value)]


@functools.lru_cache(maxsize=1024)
def _shape(annotation: Any) -> tuple[bool, bool, bool, bool, tuple[Any, ...]]:
    """(takes anything, takes a number, takes a float, takes a bool, the alternatives that
    are containers or models) of an annotation; cached: asked for every field at every
    validation."""
    arms = _arms(annotation)
    containers = tuple(a for a in arms if get_origin(a) is not None and get_args(a)
                       or isinstance(a, type) and issubclass(a, BaseModel))
    return (Any in arms, int in arms or float in arms, float in arms, bool in arms, containers)


def number_problem(value: Any, annotation: Any) -> str | None:
    """What is wrong with a number given where `annotation` takes one, or with a string that
    holds a NUL byte (None: nothing, or not a number where one is asked: pydantic says what is
    wrong with those)."""
    if isinstance(value, str):  # no path, name or word of a config holds one; the OS refuses it
        return "holds a NUL byte" if "\0" in value else None
    try:
        anything, numeric, floats, bools, containers = _shape(annotation)
    except TypeError:  # an unhashable annotation
        anything, numeric, floats, bools, containers = _shape.__wrapped__(annotation)
    if anything:
        return None
    if isinstance(value, bool):
        return (f"{str(value).lower()} is a boolean, not a number"
                if numeric and not bools else None)
    if isinstance(value, int | float):
        if not numeric:
            return None
        if isinstance(value, float) and not math.isfinite(value):
            return f"{value} is not a finite number"
        if not floats and abs(value) > MAX_INT:
            return f"{value:g} is out of range for an integer (at most 2**53 in size)"
        return None
    if not containers or not isinstance(value, list | tuple | Mapping):
        return None
    # a container: a problem only when every alternative that takes its shape sees one (a
    # union may hold the right one; a model checks its own fields)
    found = [_container_problem(value, arm) for arm in containers]
    taken = [f for f in found if f is not _NOT_THIS]
    if not taken or any(f is None for f in taken):
        return None
    return taken[0]


_NOT_THIS = "<not this alternative>"


def _container_problem(value: Any, arm: Any) -> str | None:
    """number_problem of each item of a list, tuple or mapping given where `arm` is asked;
    _NOT_THIS when `arm` is not a container of that shape (a model: None, it checks itself)."""
    if isinstance(arm, type) and issubclass(arm, BaseModel):
        return None if isinstance(value, Mapping) else _NOT_THIS
    origin, args = get_origin(arm), get_args(arm)
    if isinstance(value, Mapping):
        if not (isinstance(origin, type) and issubclass(origin, Mapping) and len(args) == 2):
            return _NOT_THIS
        for key, item in value.items():
            problem = number_problem(key, args[0]) or number_problem(item, args[1])
            if problem:
                return f"{key}: {problem}"
        return None
    if not (isinstance(origin, type) and issubclass(origin, Sequence | set)) or not args:
        return _NOT_THIS
    for i, item, item_ann in _items(value, arm):
        problem = number_problem(item, item_ann)
        if problem:
            return f"item {i}: {problem}"
    return None


class StrictLoader(yaml.SafeLoader):
    """`yaml.safe_load`, except that a key given twice in one mapping is an error (the safe
    loader keeps the last: a different experiment than the one written). Keys brought in by a
    merge (`<<: *base`) may still be overridden: that is what a merge is for."""


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: the safe loader says what is wrong with it
            continue
        if first is not None:
            raise DuplicateKeyError(key, first + 1, key_node.start_mark.line + 1)
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: Any, first: int, second: int):
        super().__init__(f"key {key!r} is given twice (lines {first} and {second}): keep one")
        self.key, self.first, self.second = key, first, second


class ShapeError(yaml.YAMLError):
    """A document no config has the shape of: nested too deeply, more values than any config
    holds once its aliases are expanded (a 'billion laughs' bomb), or an alias inside its own
    anchor. Each would end deep inside validation or serialization, in a RecursionError or
    after minutes and gigabytes; safe_load builds them in an instant."""


# The deepest nesting of lists and mappings a document may have (a config needs 6 or so:
# axes.lr.sp.log2 is 4; model.options holds whatever a factory takes), well inside pydantic's
# serialization depth and Python's recursion limit.
MAX_DEPTH = 32
# The most values (scalars, lists and mappings) a document may hold with its aliases expanded:
# far above any sweep (a 10,000-point axis, thousands of data files), far below a bomb's
# billions.
MAX_VALUES = 100_000
# The largest config file read: twice what MAX_VALUES values of 10 bytes take, parsed in a
# few seconds.
MAX_YAML_BYTES = 2 * 2**20


def shape_problem(data: Any) -> str | None:
    """What makes `data` (a loaded document) no config, naming where (see ShapeError); None
    when fine. One visit per distinct list or mapping, so a bomb's shared nodes cost nothing
    to measure."""
    done: dict[int, tuple[int, int]] = {}  # id -> (values with aliases expanded, depth)
    path: set[int] = set()  # the lists and mappings around the one being visited
    stack: list[tuple[Any, str, bool]] = [(data, "", False)]
    while stack:
        node, where, leaving = stack.pop()
        if not leaving and id(node) in done:  # pushed twice (one list, aliased twice) before
            continue  # its first visit ended: visiting it again would cost its length again
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        at = f"{where}: " if where else ""
        if leaving:
            values, depth = 1, 0
            for _, child in items:
                v, d = done.get(id(child), (1, 0))
                values, depth = values + v, max(depth, d)
            path.discard(id(node))
            done[id(node)] = (values, depth + 1)
            if values > MAX_VALUES:
                return (f"{at}more than {MAX_VALUES:,} values once its aliases are expanded "
                        "(an alias of an alias of ...: a YAML bomb?)")
            continue
        if id(node) in path:
            return f"{at}an alias inside its own anchor: the value would contain itself"
        if len(path) >= MAX_DEPTH:
            at = f"{where[:40]}...: " if len(where) > 40 else at
            return f"{at}nested more than {MAX_DEPTH} levels deep"
        path.add(id(node))
        stack.append((node, where, True))
        stack.extend((child, f"{where}.{key}" if where else str(key), False)
                     for key, child in items
                     if isinstance(child, list | dict) and id(child) not in done)
    return None


def load_yaml(text: str) -> Any:
    """`yaml.safe_load(text)`, refusing duplicate keys (DuplicateKeyError) and documents no
    config has the shape of (ShapeError)."""
    loader = StrictLoader(text)  # a SafeLoader: what yaml.safe_load does, with its constructor
    try:
        data = loader.get_single_data()
    except RecursionError:  # the parser recurses once per level: [[[[...]]]] deep enough
        raise ShapeError(f"nested more than {MAX_DEPTH} levels deep") from None
    finally:
        loader.dispose()
    if isinstance(data, list | dict):
        problem = shape_problem(data)
        if problem:
            raise ShapeError(problem)
    return data


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from a file, through `yaml.safe_load` with duplicate keys refused;
    UserError on any problem."""
    p = Path(path)
    if not p.is_file():  # a folder or a device (/dev/null) is there, but is no file to read
        raise UserError(f"{path}: " + ("not a file" if p.exists() else "no such file"))
    size = p.stat().st_size
    if size > MAX_YAML_BYTES:  # YAML parses at about 0.5 MB/s: 100 MB would take minutes
        raise UserError(f"{path}: {size / 2**20:.1f} MiB, larger than a config file can be "
                        f"(at most {MAX_YAML_BYTES >> 20} MiB): a data file?")
    try:
        data = load_yaml(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at "
                        f"offset {exc.start}); save the file as UTF-8") from None
    except (DuplicateKeyError, ShapeError) as exc:
        raise UserError(f"{path}: {exc}") from None
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
        if not all(part.strip() for part in key.split(".")):
            raise UserError(f"--set {item!r}: an empty key or key part (expected e.g. "
                            "train.lr=0.003)")
        try:
            value = load_yaml(raw)
        except ShapeError as exc:  # not a word either: [[[...]]] or an alias of an alias ...
            raise UserError(f"--set {key.strip()}: {exc}") from None
        except yaml.YAMLError:
            value = raw
        out.append((key.strip(), value))
    return out


def cooldown_steps(total: int, fraction: float) -> int:
    """The steps of a wsd cooldown (train.schedule: wsd): `fraction` of a run of `total`
    steps, rounded half up, at least 1; shared by the config's checks and the LR schedule."""
    # the product rounded to 9 places first: 0.29 * 50 is 14.499999999999998 in floats
    return max(1, min(total, math.floor(round(fraction * total, 9) + 0.5)))
