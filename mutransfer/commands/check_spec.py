"""Check files (`mutransfer check FILE`): a trial config, the widths and seeds, and the stages.

    name: tiny_gpt_check
    model: {arch: "examples.tiny_gpt:tiny_gpt", base_width: 64}
    param: {name: mup}
    train: {steps: 60, batch_size: 8, seq_len: 64, ...}
    data: {source: stdlib}
    check:
      widths: [64, 128, 256, 512]
      seeds: [0, 1]                       # the transfer search's seeds
      lr: {log2: [-10, -3], per_octave: 1}
      drift_tolerance: 0.25               # |lr* drift| per doubling of width that passes
      coord: {steps: 3, seeds: [0, 1, 2, 3], batch_size: 4, seq_len: 32}
      search: {window: 3}      # options of the transfer search (search.kind transfer)

A sweep file's sections (`model`, `train`, `data`, `param`) mean what they mean there; the
transfer stage is a sweep (`search: {kind: transfer}`) stored under STORAGE/sweep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from mutransfer.analysis_defaults import COORD_ALPHA, COORD_TOLERANCE
from mutransfer.configbase import StrictModel, read_yaml, validate
from mutransfer.sweep.plan.spec import LRRange


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


class CheckOptions(StrictModel):
    widths: list[int] = Field(default_factory=lambda: [64, 128, 256, 512], min_length=2,
                              max_length=8)
    seeds: list[int] = Field(default_factory=lambda: [0, 1], min_length=1)
    lr: LRRange | list[float] = LRRange(log2=(-10, -3), per_octave=1)
    drift_tolerance: float = Field(0.25, gt=0)
    coord: CoordStage = CoordStage()
    search: dict[str, Any] = Field(default_factory=lambda: {"window": 3})

    @field_validator("widths")
    @classmethod
    def _widths(cls, value: list[int]) -> list[int]:
        if len(set(value)) < 2:
            raise ValueError("give at least two different widths")
        if min(value) < 8:
            raise ValueError(f"{min(value)} is below the minimum width 8")
        return sorted(set(value))


class CheckSpec(StrictModel):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", max_length=100)
    model: dict[str, Any] = {}
    train: dict[str, Any] = {}
    data: dict[str, Any] = {}
    param: dict[str, Any] = {}
    check: CheckOptions = CheckOptions()
    storage: str | None = None  # default results/check/NAME
    cpus_per_trial: float = Field(1.0, gt=0)

    @property
    def out(self) -> Path:
        return Path(self.storage or f"results/check/{self.name}")

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
                "search": {"kind": "transfer", **c.search},
                "storage": str(self.out / "sweep"),
                "resources": {"cpus_per_trial": self.cpus_per_trial, "gpus_per_trial": 0}}


def load_check(path: str | Path) -> CheckSpec:
    return validate(CheckSpec, read_yaml(path), source=str(path))
