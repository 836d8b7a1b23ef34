"""Sweep files: the pydantic model and loading with one-line errors.

A sweep file holds the base trial config (`model`, `train`, `data`, `param`, `width`), the
`axes` to sweep (see mutransfer/sweep/plan/axes.py), and how to run it (`resources`, `search`,
`retries`, `storage`, `loggers`). Every cell is validated as a full TrialConfig in
mutransfer/sweep/plan/cells.py.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from mutransfer.analysis_defaults import FIT_WINDOW, AnalysisSection
from mutransfer.config import ModelConfig, TrainConfig, trial_config_problem
from mutransfer.configbase import StrictModel, read_yaml, validate
from mutransfer.data.config import DataConfig
from mutransfer.errors import UserError
from mutransfer.param.config import ParamConfig, ParamName

# {width: amount}; its keys, text in JSON and YAML, are whole numbers (the schema says so)
WidthMap = Annotated[dict[int, float], Field(json_schema_extra={
    "propertyNames": {"pattern": r"^[-+]?[0-9]+$"}})]
Logger = Literal["tensorboard", "csv", "json", "wandb", "mlflow"]


class Resources(StrictModel):
    """Per-trial resources. A mapping {width: amount} gives the amount of the largest listed
    width at or below the trial's width (widths below the smallest key take its amount), so
    `gpus_per_trial: {64: 0.25, 1024: 1}` packs four small trials on a GPU up to width 1023."""

    cpus_per_trial: float | WidthMap = 1.0  # floats: an int default warns when serialized
    gpus_per_trial: float | WidthMap | Literal["auto"] = Field(0.0, description=(
        "GPUs per trial: a number, {width: amount}, or auto: the largest 1/k of a GPU that "
        "holds the trial's estimated peak memory (mutransfer/cost) with a 20% margin, "
        "given gpu_memory_gb"))
    gpu_memory_gb: float | None = Field(None, gt=0, description=(
        "memory of one GPU of the cluster: gpus_per_trial auto packs by it, and a trial whose "
        "estimated peak memory does not fit its share is refused before the sweep starts"))
    max_concurrent: int | None = Field(None, ge=1)  # cap on trials at once (None: what fits)

    @field_validator("cpus_per_trial", "gpus_per_trial")
    @classmethod
    def _amounts(cls, value: float | WidthMap | str, info: ValidationInfo
                 ) -> float | WidthMap | str:
        if value == "auto":
            if info.field_name == "cpus_per_trial":
                raise PydanticCustomError("amount", "auto is for gpus_per_trial only")
            return value
        amounts = value.values() if isinstance(value, dict) else [value]
        if isinstance(value, dict) and not value:
            raise PydanticCustomError("empty", "empty mapping; give a number or {width: amount}")
        for amount in amounts:
            if not math.isfinite(amount) or amount < 0:
                raise PydanticCustomError("amount", f"{amount} is not a non-negative amount")
            if info.field_name == "cpus_per_trial" and amount <= 0:
                raise PydanticCustomError("amount", "a trial needs more than 0 CPUs")
            if 0 < amount < 1e-4:  # Ray refuses it as the first trial starts: a traceback
                raise PydanticCustomError(
                    "amount", f"{amount:g} is less than the smallest fraction of a CPU or GPU "
                    "Ray schedules (0.0001)")
        return value

    def cpus_for(self, width: int) -> float:
        return amount_for(self.cpus_per_trial, width)

    def gpus_for(self, width: int) -> float:
        """A fixed or per-width amount (auto: mutransfer/sweep/plan/packing.py, per trial)."""
        return amount_for(self.gpus_per_trial, width)

    @model_validator(mode="after")
    def _auto_needs_memory(self) -> Resources:
        if self.gpus_per_trial == "auto" and self.gpu_memory_gb is None:
            raise PydanticCustomError("auto", "gpus_per_trial auto needs gpu_memory_gb (the "
                                              "memory of one GPU, e.g. 80)")
        return self


def amount_for(value: float | WidthMap, width: int) -> float:
    """A fixed amount, or the entry of the largest key <= width (else the smallest key)."""
    if not isinstance(value, dict):
        return float(value)
    keys = sorted(value)
    at_most = [k for k in keys if k <= width]
    return float(value[at_most[-1] if at_most else keys[0]])


class Stop(StrictModel):
    """Early stopping (mutransfer/sweep/search/stopping.py): a trial is stopped at an eval point
    when its LR is at least `protect_octaves` from the best LR of its width and seed at that
    step and its loss is behind that LR's by more than `safety` x the crossing allowance (the
    most a gap has closed by the end on the curves complete at the family's other widths)."""

    protect_octaves: float = Field(FIT_WINDOW, gt=0, le=64, allow_inf_nan=False, description=(
        "LRs nearer than this (octaves) to the step's best LR are never stopped; the default, "
        "the analysis's fit window, never stops an LR the fit weighs"))
    safety: float = Field(1.0, ge=0, le=100, allow_inf_nan=False, description=(
        "multiplies the crossing allowance; 0 stops whatever is behind (biased: short runs "
        "favour high LRs)"))


@dataclass(frozen=True)
class Kind:
    """What a `search.kind` is to the plan: which options of `search:` it takes, and what
    units it runs (its strategy, mutransfer/sweep/search/, decides which of them run)."""

    options: tuple[str, ...] = ()
    adaptive: bool = False      # groups with an LR range, each trial at an LR it picks
    part_of_grid: bool = False  # a subset of the grid's cells, decided as it goes


# Every search kind, in the order the schema lists them; an option of `search:` written for
# another kind is an error. A new strategy adds its kind here (docs/search-strategies.md).
KINDS: dict[str, Kind] = {
    "grid": Kind(options=("stop",)),
    "optuna": Kind(options=("trials_per_width", "max_concurrent", "seed"), adaptive=True),
    "transfer": Kind(options=("full_widths", "window", "settle_octaves", "seed_tolerance",
                              "probe_stability", "stop"), part_of_grid=True),
}


def _kinds_enum(schema: dict[str, Any]) -> None:
    schema["enum"] = list(KINDS)


class Search(StrictModel):
    """How the LR axis is searched. `grid` runs every cell. `optuna` runs, per group of
    non-LR axis values (width, parameterization, seed, ...), `trials_per_width` trials whose
    LRs Optuna's TPE sampler proposes in the group's LR range. `transfer` runs, per family
    (parameterization and every other axis but width, LR and seed), at its smallest width a
    walk from the grid's middle towards the lower loss until the optimum is bracketed (the
    whole grid at its `full_widths` smallest widths instead) and, at each wider width, a window
    of the grid around the lr* predicted from the widths below (the drift fit); each width then
    runs the LRs the analysis's fit weighs around its optimum, widened in grid steps until they
    have all run, with one seed beyond its first LRs and every seed where the seeds' scatter
    could move lr* (`seed_tolerance`); its cells are the grid's (same trial ids, so grid and
    transfer results mix in one store)."""

    kind: str = Field("grid", json_schema_extra=_kinds_enum)  # a key of KINDS
    trials_per_width: int = Field(12, ge=1, description="optuna: trials per group")
    max_concurrent: int = Field(2, ge=1, description="optuna: trials of one study at once")
    seed: int = Field(0, description="optuna: seed of the samplers (each study adds its "
                                     "group id's first 32 bits, and a resumed one a hash of "
                                     "its stored LRs; modulo 2^32)")
    full_widths: int = Field(0, ge=0, description=(
        "transfer: how many of each family's smallest widths run the whole LR grid (0: the "
        "smallest width walks from the grid's middle towards the lower loss instead)"))
    window: int = Field(3, ge=1, description=(
        "transfer: LRs of the grid first run at each wider width, nearest the predicted lr* "
        "(more where the prediction's standard error spans more of the grid)"))
    settle_octaves: float | None = Field(None, gt=0, le=64, allow_inf_nan=False, description=(
        "transfer: a width is settled once every grid LR less than this many octaves from "
        "its best LR and from the fitted optimum has run (the window widens one grid step at "
        "a time until they have; above the optimum an LR where every seed diverged closes "
        "the side), and two usable LRs a side inside the analysis's fit window. Default "
        "1.22 octaves: the LRs beyond it weigh little in the fit, and lr* came out within "
        "0.07 octave of the grid's on the benchmark sweeps at about a third of their cost; "
        "more costs more (at the analysis's fit window, 2.5 octaves on half-octave and finer "
        "grids, it runs every LR the fit can weigh, and lr* is then the grid's exactly)"))
    # 0.02: replayed on four grids it cost 5-12% less than every seed at every LR (trial-s at
    # width-median prices), and no grid's largest lr* gap grew (0.01 saved nothing on two of
    # them; 0.05 moved lr* up to 0.06 octave further; benchmarks/README.md "Seeds where they
    # matter")
    seed_tolerance: float | None = Field(0.02, gt=0, le=64, allow_inf_nan=False, description=(
        "transfer: at each width above the smallest (which walks, with every seed), beyond its "
        "first LRs (its window) run one seed at each LR and its other seeds only where their "
        "absence could move the width's fitted lr* by more than this many octaves (the fit's "
        "sensitivity to that LR times the standard error the missing seeds leave in its "
        "mean). None: every seed at every LR"))
    stop: Stop | None = Field(None, description=(
        "grid, transfer: stop trials early that cannot matter to lr* (off unless given: "
        "benchmarks/README.md measures what it saves and how far it moves lr*)"))
    probe_stability: bool = Field(False, description=(
        "transfer: at each settled width, also run upward from the best LR, one grid step at "
        "a time, until an LR diverges or the grid ends, so the analysis locates the stability "
        "boundary at every width"))

    @property
    def adaptive(self) -> bool:
        """Trials at sampled LRs per group, not cells of the grid (the kind says)."""
        return KINDS[self.kind].adaptive

    @property
    def part_of_grid(self) -> bool:
        """A subset of the grid's cells, decided as the search goes (the kind says)."""
        return KINDS[self.kind].part_of_grid

    @field_validator("kind", mode="before")
    @classmethod
    def _known_kind(cls, value: Any) -> Any:
        if not isinstance(value, str) or value not in KINDS:
            names = [repr(k) for k in KINDS]
            expected = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1
                                   else names)
            raise PydanticCustomError("literal_error", "Input should be {expected}",
                                      {"expected": expected})
        return value

    @model_validator(mode="before")
    @classmethod
    def _no_margin(cls, data: Any) -> Any:
        if isinstance(data, dict) and "margin" in data:
            raise PydanticCustomError(
                "search_option", "margin was removed: the transfer search now settles a width "
                "once every grid LR within settle_octaves octaves of its optimum has run (a "
                "distance, not a count of LRs); delete margin")
        return data

    @model_validator(mode="after")
    def _options_of_kind(self) -> Search:
        for name in sorted(self.model_fields_set - {"kind"}):
            kinds = [k for k, kind in KINDS.items() if name in kind.options]
            if self.kind not in kinds:
                raise PydanticCustomError(
                    "search_option",
                    f"{name} is an option of kind {' or '.join(kinds)}, not {self.kind}")
        return self



class RunSpec(StrictModel):
    """What a sweep file and a check file share: a name and the sections of one trial's
    config, each checked when the trials are resolved."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", max_length=100)
    model: dict[str, Any] = {}
    train: dict[str, Any] = {}
    data: dict[str, Any] = {}
    param: dict[str, Any] = {}


class SweepSpec(RunSpec):
    width: int | None = Field(None, ge=8)  # the width of every cell unless `width` is an axis
    axes: dict[str, Any] = {}
    resources: Resources = Resources()
    search: Search = Search()
    analysis: AnalysisSection | None = Field(None, description=(
        "what the analysis reports: the target hyperparameter and the scale axes"))
    retries: int = Field(2, ge=0)  # a failed trial (an exception, a lost worker) runs again
    storage: str | None = Field(None, min_length=1)  # default results/NAME (local) or a URI
    loggers: list[Logger] = Field([], description=(
        "Ray Tune's logger callbacks, writing under STORAGE/tune/ (tensorboard, csv, json) or "
        "to their service (wandb, mlflow: their package must be installed); the store stays "
        "the record"))

    @field_validator("storage")
    @classmethod
    def _a_location(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if any(ord(c) < 32 or ord(c) == 127 for c in value):  # a newline, a tab: a typo,
            raise PydanticCustomError(  # and every line naming the store would break there
                "storage", "{value} holds a control character; give a path or URI "
                "without one", {"value": repr(value)})
        scheme, sep, rest = value.partition("://")
        if sep and not rest.strip("/") and scheme.replace("+", "").isalnum():
            # s3:// or file:// alone: no bucket, no path (s3: was taken as a local folder,
            # and Ray's pyarrow ended the sweep in an ArrowInvalid traceback)
            raise PydanticCustomError(
                "storage", "{value}: a URI with no location after {scheme}://; give e.g. "
                "s3://bucket/results, or a folder", {"value": value, "scheme": scheme})
        return value

    @model_validator(mode="before")
    @classmethod
    def _sections_are_mappings(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in ("model", "train", "data", "param", "axes"):
                if data.get(key) is None and key in data:
                    data = {**data, key: {}}
        return data

    @property
    def storage_location(self) -> str:
        return self.storage or f"results/{self.name}"

    def base_config(self) -> dict[str, Any]:
        """The trial config every cell starts from (axes then set their paths)."""
        base: dict[str, Any] = {"model": dict(self.model), "train": dict(self.train),
                                "data": dict(self.data), "param": dict(self.param)}
        if self.width is not None:
            base["width"] = self.width
        return base


# The log2 of the smallest normal and the largest float64 (2^-1022, 2^1023). Subnormal LRs are
# left out: every trial flushes subnormals to zero (mutransfer/denormals.py), and in a process
# that has (a driver that ran a trial in-process) 2^-1074 itself reads as 0.0.
LOG2_MIN, LOG2_MAX = -1022, 1023


class LRRange(StrictModel):
    """LRs 2^lo ... 2^hi, `per_octave` points per factor of two (both ends included)."""

    log2: tuple[float, float]
    per_octave: int = Field(1, ge=1, le=64)


def json_schema() -> dict[str, Any]:
    """The JSON schema of sweep files, with the typed trial sections and axes: what the
    models and the axes' reading (mutransfer/sweep/plan/axes.py) accept, as far as a schema
    can say it, and as an editor reads YAML (1.2, where mutransfer reads 1.1: _yaml11)."""
    schema_model = create_model(
        "SweepFile", __base__=SweepSpec,
        model=(ModelConfig | None, ModelConfig()), train=(TrainConfig | None, TrainConfig()),
        data=(DataConfig | None, DataConfig()), param=(ParamConfig | None, ParamConfig()),
        axes=(_axes_model() | None, {}))  # an empty section (`data:`) is {}
    return _yaml11(schema_model.model_json_schema())


def _axes_model() -> type:
    """The axes as the schema shows them (axes.py reads them): each a non-empty list of
    distinct values, `lr` also a log2 range or a mapping per parameterization, any other key
    a dotted path into a section (a section itself: a list of mappings)."""
    def values(item: Any) -> Any:
        return Annotated[list[item], Field(min_length=1, json_schema_extra={"uniqueItems": True})]

    log2 = Annotated[float, Field(ge=LOG2_MIN, le=LOG2_MAX)]
    lr_range = create_model("LRRange", __base__=LRRange, __doc__=LRRange.__doc__,
                            log2=(tuple[log2, log2], ...))
    lrs = values(Annotated[float, Field(gt=0)]) | lr_range
    by_param = Annotated[dict[ParamName, lrs], Field(min_length=1)]
    axes = create_model(
        "Axes", __config__=ConfigDict(extra="allow", json_schema_extra=_other_axes),
        width=(values(Annotated[int, Field(ge=8)]) | None, None),
        parameterization=(values(ParamName) | None, None),
        lr=(lrs | by_param | None, None), seed=(values(int) | None, None))
    axes.__doc__ = ("Each axis is a non-empty list of values; `lr` may also be a log2 range or "
                    "a mapping per parameterization. Any other key is a dotted path into the "
                    "trial config, e.g. param.overrides.ssm_B.lr_mult or train.steps.")
    return axes


# The dotted paths of the typed shortcuts: axes.py reads `train.lr` as it reads `lr` (a log2
# range, LRs per parameterization), so the schema gives each path its shortcut's schema (it
# flagged `train.lr: {log2: [-8, -5]}`, a file mutransfer reads)
SHORTCUT_PATHS = {"lr": "train.lr", "seed": "train.seed", "parameterization": "param.name"}


def _other_axes(schema: dict[str, Any]) -> None:
    """The keys axes.py takes besides the typed ones: the shortcut optimizer, the typed
    shortcuts' dotted paths, a section (a list of mappings, one per cell) or a dotted path
    into one (a list of values)."""
    nonempty = {"type": "array", "minItems": 1, "uniqueItems": True}
    for prop in schema["properties"].values():  # optional keys, but never null (axes.py
        prop.pop("default", None)  # refuses `lr: null`: "expected a list", the schema passed it)
        prop["anyOf"] = [a for a in prop["anyOf"] if a != {"type": "null"}]
    schema["propertyNames"] = {"pattern": r"^(width|parameterization|lr|seed|optimizer|"
                                          r"(model|param|train|data)(\.[^.]+)*)$"}
    schema["patternProperties"] = {
        r"^(model|param|train|data)$": {**nonempty, "items": {"type": "object"}},
        **{"^" + re.escape(path) + "$": schema["properties"][name]
           for name, path in SHORTCUT_PATHS.items()}}
    schema["additionalProperties"] = nonempty


# YAML 1.1 (yaml.safe_load, what mutransfer reads) takes these words as booleans; YAML 1.2 (an
# editor's language server) as text, which a schema of booleans alone flagged.
YAML11_BOOLEANS = ["yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"]
# Text that a number field reads as a number (quoted, or `1e-3`, text to YAML 1.1)
NUMBER_TEXT = r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$"


def _yaml11(node: Any) -> Any:
    """`node` with each boolean also taking YAML 1.1's words for one, and each number its
    text: a file mutransfer reads (`tie_embeddings: yes`, `lr: "1e-3"`) is no error to an
    editor that reads YAML 1.2."""
    if isinstance(node, list):
        return [_yaml11(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _yaml11(v) if k not in ("default", "enum", "const") else v
            for k, v in node.items()}
    kind = node.get("type")
    if kind not in ("boolean", "number", "integer"):
        return node
    # the field's title, description and default stay where an editor shows them
    about = {k: v for k, v in node.items() if k in ANNOTATIONS}
    value = {k: v for k, v in node.items() if k not in ANNOTATIONS}
    text = ({"enum": YAML11_BOOLEANS} if kind == "boolean"
            else {"type": "string", "pattern": NUMBER_TEXT})
    return {**about, "anyOf": [value, text]}


ANNOTATIONS = ("title", "description", "default", "examples", "deprecated")


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep file (the sections themselves are checked per cell)."""
    data = read_yaml(path)
    problem = trial_config_problem(data, str(path), "sweep file")
    if problem:
        raise UserError(problem)
    return validate(SweepSpec, data, source=str(path))
