"""Helpers shared by the sweep tests: the tiny sweep file, trial ids from part names, the
every-cell-once check; and the planted sweep results the analysis and report tests read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from mutransfer.errors import UserError
from mutransfer.results.store import read_tables
from mutransfer.sweep.plan.cells import build_plan, load_plan
from mutransfer.sweep.plan.spec import SweepSpec
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results

EVAL_EVERY = 5
TINY_MODEL = {"n_layer": 1, "d_state": 4, "base_width": 16}


def tiny_sweep(name: str, axes: dict | None = None, *, steps: int = 10,
               eval_every: int = EVAL_EVERY, **top) -> dict:
    """A sweep document of one-layer models (base width 16; width 128, the default, unless
    `width` is an axis or given in `top`) that train in seconds."""
    doc = {"name": name, "model": dict(TINY_MODEL),
           "train": {"steps": steps, "batch_size": 2, "seq_len": 16, "eval_every": eval_every,
                     "eval_batches": 1}}
    if axes is not None:
        doc["axes"] = axes
    return {**doc, **top}


def write_sweep(folder: Path, name: str, axes: dict, storage: Path | None = None, *,
                steps: int = 10, eval_every: int = EVAL_EVERY, **top) -> Path:
    """folder/NAME.yaml of `tiny_sweep`, storing to `storage` (default folder/NAME)."""
    doc = tiny_sweep(name, axes, steps=steps, eval_every=eval_every,
                     storage=str(storage or folder / name), **top)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def trial_ids(folder: Path) -> set[str]:
    """Trial ids named by the parts in a trials/ or steps/ folder (part-ID[-...].parquet)."""
    return {p.name.split("-")[1].split(".")[0] for p in folder.glob("part-*.parquet")}


def assert_every_cell_once(path: Path, steps: int, every: int = EVAL_EVERY, parts: bool = True):
    """Every cell of the sweep file at `path` complete exactly once, with each of its steps
    rows once; with `parts`, also on disk one trial part and one steps part per cell (nothing
    left over). Returns the tables."""
    results = Path(yaml.safe_load(path.read_text())["storage"])
    cells = sorted(c.trial_id for c in load_plan(path).cells)
    tables = read_tables(results)
    assert sorted(tables.trials["trial_id"]) == cells
    assert (tables.trials["status"] == "complete").all()
    assert not tables.steps.duplicated(["trial_id", "step"]).any()
    expected = list(range(0, steps + 1, every))
    for tid, rows in tables.steps.groupby("trial_id"):
        assert rows["step"].tolist() == expected, tid
    assert sorted(set(tables.steps["trial_id"])) == cells
    assert len(tables.steps) == len(cells) * len(expected)
    if parts:
        assert len(list((results / "trials").glob("*.parquet"))) == len(cells)
        assert len(list((results / "steps").glob("*.parquet"))) == len(cells)
        assert sorted(trial_ids(results / "steps")) == cells
    return tables


# -- planted results for the analysis: lr* ~ width^-1 under sp, constant under mup -------------

LR_GRID = [2.0**e for e in np.arange(-12, -3.9, 1.0)]
SP = Planted("sp", 2**-8, -1.0, stable_base=2**-5.5, stable_exponent=-1.0)
MUP = Planted("mup", 2**-7, 0.0, stable_base=2**-4.5)


def planted_results(root: Path, widths, families=(SP, MUP), seeds=(0, 1), **kw) -> Path:
    """Synthetic results of `families` at `widths` over LR_GRID, written to `root` in the
    store's layout (`per_trial=True`: one part per trial)."""
    return write_results(root, synthetic_tables(list(families), list(widths), LR_GRID,
                                                list(seeds)), **kw)


def window_of(trials, family, width: int, lo: float, hi: float):
    """Rows of `trials` to drop so that (family, width) ran only LRs in [lo, hi], as a
    transfer search's window does."""
    return ((trials.parameterization == family.parameterization) & (trials.width == width)
            & ((trials.lr < lo) | (trials.lr > hi)))


def transfer_search_results(root: Path, widths=(64, 128, 256, 512), seeds=(0, 1),
                            **kw) -> Path:
    """Planted results as a transfer search leaves them: the full LR_GRID at the smallest
    width, then at each wider width only the LRs within 2 octaves of the planted lr*; one
    trial of the second seed failed (sp, widest width, at its planted optimum)."""
    t = synthetic_tables([SP, MUP], list(widths), LR_GRID, list(seeds), **kw)
    tr = t.trials
    drop = np.zeros(len(tr), bool)
    for fam in (SP, MUP):
        for w in widths[1:]:
            opt = fam.lr_opt(w, widths[0])
            drop |= window_of(tr, fam, w, opt / 4.01, opt * 4.01)
    tr = tr[~drop].copy()
    w = widths[-1]
    failed = ((tr.parameterization == "sp") & (tr.width == w) & (tr.seed == seeds[-1])
              & np.isclose(tr.lr, SP.lr_opt(w, widths[0])))
    tr.loc[failed, ["status", "diverged", "final_eval_loss", "best_eval_loss"]] = \
        ["failed", False, np.nan, np.nan]
    t.trials = tr
    t.steps = t.steps[t.steps.trial_id.isin(tr.trial_id)]
    return write_results(root, t)


def plan_accepts(doc: dict) -> bool:
    """Whether a sweep document builds a plan (what `mutransfer sweep` would refuse: False)."""
    try:
        build_plan(SweepSpec.model_validate(doc))
    except (UserError, ValueError):
        return False
    return True
