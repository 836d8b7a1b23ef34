"""Check files (`mutransfer check FILE`): a trial config, the widths and seeds, and the stages.

    name: tiny_gpt_check
    model: {arch: "examples.tiny_gpt:tiny_gpt", base_width: 64}
    param: {name: mup}
    train: {steps: 60, batch_size: 8, seq_len: 64, ...}
    data: {source: stdlib}
    check:
      widths: [32, 64, 128, 256, 512]
      seeds: [0, 1]                       # the transfer search's seeds
      lr: {log2: [-10, -3], per_octave: 1}
      tolerance: 0.12          # ±δ: the drift (octaves of lr* per doubling) that passes
      budget: {minutes: 9, seeds: 8}      # how far the sequential test may go
      coord: {steps: 3, seeds: [0, 1, 2, 3], batch_size: 4, seq_len: 32}
      search: {window: 3}      # options of the transfer search (search.kind transfer)

The transfer stage is an equivalence test run sequentially: the search runs with `seeds`; while
the drift's 95% interval straddles ±tolerance, the next seed set (as many new seeds) is added
and the search resumes, until the interval decides (PASS inside, FAIL outside) or the budget
(minutes from the start, trial-steps, or seeds in all) would be exceeded by another round.

A sweep file's sections (`model`, `train`, `data`, `param`) mean what they mean there; the
transfer stage is a sweep (`search: {kind: transfer}`) stored under STORAGE/sweep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from mutransfer.analysis_defaults import COORD_ALPHA, COORD_TOLERANCE
from mutransfer.config import trial_config_problem
from mutransfer.configbase import StrictModel, read_yaml, validate
from mutransfer.errors import UserError
from mutransfer.sweep.plan.spec import LRRange, RunSpec


class CoordStage(StrictModel):
    """The coordinate check: a few steps per width and seed, at a fixed LR."""

    steps: int = Field(3, ge=1)
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2, 3], min_length=2)
    batch_size: int = Field(4, ge=1)
    seq_len: int = Field(32, ge=2)
    lr: float | None = Field(None, gt=0, description="default: 3e-3 (Adam), 0.1 (SGD)")
    tolerance: float = Field(COORD_TOLERANCE, gt=0)
    alpha: float = Field(COORD_ALPHA, gt=0, lt=1, description=(
        "family-wise error rate of the coordinate violations (t test, Holm)"))

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, value: list[int]) -> list[int]:
        """A seed given twice runs the same model twice, and the slopes' table holds it once:
        [1, 1] was a one-seed check at two widths (no standard error), where every slope
        outside the tolerance counts as a violation (a correct model FAILed), though two
        seeds are required. Refused as `mutransfer coord-check --seeds` refuses it."""
        seen = set()
        for seed in value:
            if seed in seen:
                raise ValueError(f"seed {seed} is given twice (each seed is its own init and "
                                 f"batches; give at least two different seeds)")
            seen.add(seed)
        return value


# The drift tolerance (octaves of lr* per doubling of width) that keeps the regret at 8x the
# tuned width at or below 0.01 nats: a drift d puts the LR 3d octaves off there, and the
# fitted loss-vs-log2(lr) curves of real 60-step Mamba sweeps (benchmarks/check_tolerance.py)
# rise by 0.01 nats 0.34-0.41 octave from their optimum, so d <= 0.34 / 3 = 0.11-0.14
# (docs/models.md, "The transfer stage's tolerance").
TOLERANCE = 0.12


class CheckBudget(StrictModel):
    """How far the sequential transfer stage may go; another seed set runs only when it is
    expected to fit. `mutransfer check --budget` replaces minutes or trial_steps."""

    minutes: float | None = Field(9.0, gt=0, description="wall minutes from the check's start")
    trial_steps: int | None = Field(None, gt=0, description=(
        "coordinate steps + transfer trials x steps, in all"))
    seeds: int = Field(8, ge=1, description="seeds in all (the first set included)")


# Four doublings of width by default: the drift's standard error falls as 1/(the widths'
# spread in log2), and the narrowest width costs the least (sum c_w^2 = 0.1 over 32-512, 0.2
# over 64-512: the same seeds give a 0.71x smaller s.e. from the data for ~4% more
# trial-seconds; benchmarks/README.md, "Why a correct model could not PASS").
DEFAULT_WIDTHS = [32, 64, 128, 256, 512]
MIN_LRS = 3  # check.lr: the fewest LRs that can hold an optimum inside the grid


class CheckOptions(StrictModel):
    widths: list[int] = Field(default_factory=lambda: list(DEFAULT_WIDTHS), min_length=2,
                              max_length=8)
    seeds: list[int] = Field(default_factory=lambda: [0, 1], min_length=1)
    lr: LRRange | list[float] = LRRange(log2=(-10, -3), per_octave=1)
    tolerance: float = Field(TOLERANCE, gt=0, description=(
        "±δ: the lr* drift per doubling of width that counts as transfer (equivalence test)"))
    budget: CheckBudget = CheckBudget()
    coord: CoordStage = CoordStage()
    search: dict[str, Any] = Field(default_factory=lambda: {"window": 3})

    @model_validator(mode="after")
    def _one_seed_set(self) -> CheckOptions:
        if self.budget.seeds < len(set(self.seeds)):
            raise ValueError(f"budget.seeds {self.budget.seeds} is too small for one seed set "
                             f"({len(set(self.seeds))} seeds in check.seeds)")
        return self

    def seed_rounds(self) -> list[list[int]]:
        """The seeds of each round of the sequential test: check.seeds, then as many new
        seeds per round (the next integers), up to budget.seeds in all."""
        first = sorted(set(self.seeds))
        rounds, seeds, nxt = [first], list(first), max(first) + 1
        while len(seeds) + len(first) <= self.budget.seeds:
            seeds = seeds + list(range(nxt, nxt + len(first)))
            nxt += len(first)
            rounds.append(seeds)
        return rounds

    @field_validator("search")
    @classmethod
    def _transfer_search(cls, value: dict[str, Any]) -> dict[str, Any]:
        kind = value.get("kind", "transfer")
        if kind != "transfer":  # before: "search: seed_tolerance is an option of kind ..."
            raise ValueError(f"kind {kind}: the check's search is a transfer search; give "
                             f"only its options (e.g. window), or leave out kind")
        return value

    @field_validator("lr")
    @classmethod
    def _three_lrs(cls, value: LRRange | list[float]) -> LRRange | list[float]:
        """An optimum inside the grid needs an LR on each side of it: with fewer than 3 every
        lr* is an edge bound, and the check could only end INCONCLUSIVE."""
        # an upside-down range, a repeat or a value that is no LR: refused by the sweep's own
        # reading of the grid, which names the entry
        if isinstance(value, LRRange):
            n = round((value.log2[1] - value.log2[0]) * value.per_octave) + 1
        else:
            n = len(value)
        if 0 < n < MIN_LRS:
            raise ValueError(f"{n} LR{'s' * (n != 1)}: give at least {MIN_LRS} (an optimum "
                             "inside the grid needs an LR on each side of it; with fewer, every "
                             "lr* is an edge bound and the check can only end INCONCLUSIVE)")
        return value

    @field_validator("widths")
    @classmethod
    def _widths(cls, value: list[int]) -> list[int]:
        """The widths in increasing order (any order reads as the same set), each given once:
        a repeat (a typo, 128 for 256) is refused, as the sweep's own width axis and
        check.seeds refuse one (before, it was merged without a word, and the check ran fewer
        widths than the file lists)."""
        seen: dict[int, int] = {}
        for i, width in enumerate(value):
            if width in seen:
                raise ValueError(f"width {width} is given twice (entries {seen[width]} and "
                                 f"{i}); give each width once")
            seen[width] = i
        if len(set(value)) < 2:
            raise ValueError("give at least two different widths")
        if min(value) < 8:
            raise ValueError(f"{min(value)} is below the minimum width 8")
        return sorted(set(value))


class CheckSpec(RunSpec):
    check: CheckOptions = CheckOptions()
    storage: str | None = Field(None, min_length=1)  # default results/check/NAME
    cpus_per_trial: float = Field(1.0, gt=0)

    @field_validator("storage")
    @classmethod
    def _a_local_folder(cls, value: str | None) -> str | None:
        """Before: '' was read as no storage (the default folder), a URI as a local path
        (s3://b/x made a folder s3:, then the transfer stage's Ray ended in a traceback)."""
        if value is not None:
            local_folder_problem(value)
        return value

    @property
    def out(self) -> Path:
        """The output folder, `~` expanded as the transfer stage's store expands it (before,
        `~/x` put the coordinate stage's files and the verdict into ./~/x, its sweep into
        $HOME/x/sweep)."""
        return Path(self.storage or f"results/check/{self.name}").expanduser()

    def unused(self) -> list[str]:
        """Notes on the file's train entries the check sets itself (a trial config copied in
        keeps its own `lr` and `seed`; before, they were dropped without a word)."""
        sets = {"lr": "each trial's LR (check.lr; the coordinate stage: check.coord.lr)",
                "seed": "each trial's seed (check.seeds; the coordinate stage: "
                        "check.coord.seeds)"}
        return [f"note: train.{k} {self.train[k]!r} is not used: the check sets {what}"
                for k, what in sets.items() if k in self.train]

    def trial(self, width: int, **train: Any) -> dict[str, Any]:
        """A trial config (as a dict) at `width`, `train` entries set over the file's."""
        return {"width": width, "model": dict(self.model), "param": dict(self.param),
                "data": dict(self.data), "train": {**self.train, **train}}

    def sweep(self) -> dict[str, Any]:
        """The transfer stage as a sweep spec: widths x LRs x seeds, transfer search."""
        c = self.check
        lr = c.lr.model_dump() if isinstance(c.lr, LRRange) else list(c.lr)
        return {"name": self.name, "model": self.model, "train": self.train,
                "data": self.data, "param": self.param,
                "axes": {"width": c.widths, "lr": lr, "seed": c.seeds},
                # every seed at every LR (`seed_tolerance: null`): the drift interval's
                # calibration and the verdicts were measured so; `check.search` may change it
                "search": {"kind": "transfer", "seed_tolerance": None, **c.search},
                "storage": str(self.out / "sweep"),
                "resources": {"cpus_per_trial": self.cpus_per_trial, "gpus_per_trial": 0}}


def local_folder_problem(value: str) -> None:
    """ValueError when `value` cannot name the check's output folder: a URI (a check writes its
    files with the local filesystem), or a path holding a control character (a typo)."""
    from mutransfer.results.fs import is_uri

    if is_uri(value):
        raise ValueError(f"{value}: a check writes to a folder on this machine; give a path, "
                         f"not a URI")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"{value!r} holds a control character; give a path without one")


def load_check(path: str | Path) -> CheckSpec:
    data = read_yaml(path)
    problem = trial_config_problem(data, str(path), "check file")
    if problem:
        raise UserError(problem)
    return validate(CheckSpec, data, source=str(path))


def is_check_file(path: str | Path) -> bool:
    """Whether `path` is a check file (a top-level `check:` section), not a sweep file or a
    trial config; a file that does not read (missing, not YAML, not a mapping): UserError."""
    return "check" in read_yaml(path)
