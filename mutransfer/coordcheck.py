"""`coord_check(settings) -> CoordResult`: measure (mutransfer.coord, torch), then judge
(mutransfer.analysis.coordverdict, Parquet-shaped tables only), as `mutransfer coord-check`
does; the command only parses its options and prints this result."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pydantic import ValidationError

from mutransfer.analysis.checkverdict import diverged_at
from mutransfer.analysis.coordplot import plot_coord_check
from mutransfer.analysis.coordverdict import (
    AXES,
    judge,
    seed_ranges,
    slopes,
    strict_failures,
    verdict_text,
    verdicts,
)
from mutransfer.coord.check import check_settings
from mutransfer.coord.measure import run_coord_check, trial_config
from mutransfer.coord.settings import CoordSettings
from mutransfer.cost.machine import batch_beyond_memory, beyond_memory, memory_bytes
from mutransfer.data import load_data
from mutransfer.data.config import DataConfig
from mutransfer.denormals import denormals_flushed
from mutransfer.errors import UserError, format_validation_error
from mutransfer.paths import nearest_existing

Progress = Callable[[int, int, str], None]


@dataclass
class CoordResult:
    """A coordinate check's tables: `coord` (coord.parquet: RMS per run, step, activation),
    `slopes` (per slope: mean over seeds, s.e., df, p, Holm-adjusted p, status) and `verdicts`
    (PASS/FAIL/INCONCLUSIVE per parameterization)."""

    settings: CoordSettings
    coord: pd.DataFrame
    slopes: pd.DataFrame
    verdicts: pd.DataFrame
    elapsed_s: float
    files: list[Path] = field(default_factory=list)

    def verdict(self, param: str) -> str:
        """PASS, FAIL or INCONCLUSIVE of one parameterization (one the check did not run:
        UserError)."""
        table = self.verdicts.set_index("parameterization")
        if not isinstance(param, str) or param not in table.index:
            raise UserError(f"no verdict for {param!r}: this check ran "
                            f"{', '.join(map(str, table.index))}")
        return str(table.loc[param, "verdict"])

    def strict_failures(self) -> list[str]:
        """Expectations broken (coordverdict.strict_failures, by the check's axis)."""
        return strict_failures(self.verdicts, "n_layer" if self.settings.depths else "width")

    def summary(self) -> str:
        """What was run, in one line."""
        s = self.settings
        where = (f"width {s.widths[0]}, depths {sorted(set(s.depths))}" if s.depths
                 else f"widths {sorted(set(s.widths))}")
        steps = f"{s.steps} step{'s' * (s.steps != 1)}"
        return (f"coordinate check: {s.optimizer}, lr {s.lr:g}, {steps}, seeds "
                f"{seed_ranges(s.seeds)}, {where}, {self.elapsed_s:.0f} s")

    def text(self) -> str:
        """The slope table at the last step, the rule, and the verdict table."""
        s = self.settings
        text = verdict_text(self.slopes, self.verdicts, s.steps, s.tolerance, s.alpha, s.axis)
        diverged = self.verdicts[self.verdicts["largest"].str.startswith("diverged")]
        if len(diverged):
            text += (f"\n{', '.join(diverged['parameterization'])}: not finite already at the "
                     f"smallest {'depth' if s.depths else 'width'} (lr {s.lr:g}): the sizes "
                     "say nothing of scaling; lower --lr")
        return text

    def write(self, out: str | Path) -> list[Path]:
        """coord.parquet, slopes.parquet, verdicts.parquet and the figure, under `out` (a
        folder, made if missing; a file there, or no path at all: UserError, nothing
        written)."""
        out = _out_folder(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"out {out}: cannot make the folder ({exc.strerror or exc})") \
                from None
        self.coord.to_parquet(out / "coord.parquet", index=False)
        self.slopes.to_parquet(out / "slopes.parquet", index=False)
        self.verdicts.to_parquet(out / "verdicts.parquet", index=False)
        name = "coord_check_depth" if self.settings.depths else "coord_check"
        png = plot_coord_check(self.coord, out / f"{name}_{self.settings.optimizer}.png",
                               self.settings.axis)
        self.files = [out / "coord.parquet", out / "slopes.parquet", out / "verdicts.parquet",
                      png]
        return self.files


def _out_folder(out: object) -> Path:
    """The folder `CoordResult.write` writes to: a path whose nearest existing part is a
    folder ('' would be the current folder, not what was meant)."""
    if not isinstance(out, (str, os.PathLike)) or not os.fspath(out):
        raise UserError(f"out: expected a folder path, got {out!r}")
    path = Path(out).expanduser()
    part = nearest_existing(path)
    if part.exists() and not part.is_dir():
        what = "is a file" if part == path else f"{part} is a file, not a folder"
        raise UserError(f"out {out}: {what}")
    return path


def _check_every_model(s: CoordSettings, name: Callable[[str], str]) -> None:
    """Build every config the check will train before any work: the batch, then overrides and
    model fields (at the first point, the error as pydantic words it), then each width or depth,
    whose own refusal (a Mamba-2 head dim that does not divide that width, a model larger
    than the machine) names it."""
    first, *rest = s.points()
    memory = memory_bytes()
    why = batch_beyond_memory(s.batch_size, s.seq_len, (name("batch_size"), name("seq_len")),
                              memory)
    if why:  # before the corpus loads; `mutransfer coord-check` has no check of its own
        raise UserError(why)
    for param in s.params:
        try:
            cfg = trial_config(s, param, first[0], 0, first[1])
        except ValidationError as exc:  # an override or model field: pydantic's words
            where = f"{name('model')} " if exc.title == "ModelConfig" else ""
            raise UserError(where + format_validation_error(exc)) from None
        _check_memory(cfg, memory, s.depths)
        for width, depth in rest:
            try:
                cfg = trial_config(s, param, width, 0, depth)
            except ValidationError as exc:
                at = f"{name('depths')} {depth}" if s.depths else f"{name('widths')} {width}"
                raise UserError(f"{at}: {format_validation_error(exc)}") from None
            _check_memory(cfg, memory, s.depths)


def _check_memory(cfg, memory: int | None, by_depth: object) -> None:
    """A built-in model the machine cannot hold is refused before any model trains."""
    why = beyond_memory(cfg.model_dump(), memory)
    if why:
        at = f"depth {cfg.model.n_layer}" if by_depth else f"width {cfg.width}"
        raise UserError(f"{at}: {why}")


def coord_check(settings: CoordSettings | None = None, *, progress: Progress | None = None,
                name: Callable[[str], str] = str) -> CoordResult:
    """Run a coordinate check: every (parameterization, width or depth, seed) model trained
    `settings.steps` steps on the stdlib corpus, then the slopes and the verdict. Bad settings
    raise UserError (naming the setting through `name`) before anything runs."""
    s = CoordSettings() if settings is None else settings
    check_settings(s, name)
    _check_every_model(s, name)
    source = load_data(DataConfig())
    t0 = time.time()
    with denormals_flushed():  # flushed as every trial is; the caller's thread set back
        coord = run_coord_check(s, source, progress=progress)
    sl = slopes(coord, s.axis)
    v = verdicts(sl, tol=s.tolerance, alpha=s.alpha, seeds=s.seeds,
                 undecided_beyond=s.tolerance if s.axis == "width" else None)  # the band's width
    return CoordResult(settings=s, coord=coord, slopes=judge(sl, s.tolerance, s.alpha),
                       verdicts=_diverged_first(v, coord, s.axis), elapsed_s=time.time() - t0)


def _diverged_first(v: pd.DataFrame, coord: pd.DataFrame, axis: str) -> pd.DataFrame:
    """A parameterization whose sizes are not finite already at the smallest width (or depth),
    nearest the base model, diverged at this LR: its infinite slopes say nothing of scaling,
    so it is INCONCLUSIVE, `largest` 'diverged at width W' (before: FAIL, a slope of +inf,
    e.g. mup_ssm at --lr 1e30, which sp at that LR shares)."""
    v = v.copy()
    for i, r in v.iterrows():
        at = diverged_at(coord[coord["parameterization"] == r["parameterization"]], axis=axis)
        if at is not None:
            v.loc[i, ["verdict", "largest", "worst"]] = [
                "INCONCLUSIVE", f"diverged at {AXES[axis]} {at}", ""]
            v.loc[i, ["robust", "undecided"]] = 0
    return v
