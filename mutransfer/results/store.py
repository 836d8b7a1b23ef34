"""The Parquet results store: per-trial parts written atomically, read back as DataFrames.

Layout and columns: docs/results-format.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

TRIAL_COLUMNS = [
    "trial_id", "sweep", "width", "parameterization", "lr", "seed", "optimizer", "status",
    "diverged", "diverge_step", "final_eval_loss", "best_eval_loss", "initial_loss",
    "steps_done", "tokens", "wall_time_s", "tokens_per_s", "search", "host", "versions", "config",
]
STEP_COLUMNS = [
    "trial_id", "step", "tokens", "train_loss", "eval_loss", "lr", "grad_norm", "tokens_per_s",
]


@dataclass
class Tables:
    trials: pd.DataFrame
    steps: pd.DataFrame


def _read_parts(folder: Path, columns: list[str]) -> pd.DataFrame:
    parts = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    frames = [pq.read_table(p).to_pandas() for p in parts]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})
    return pd.concat(frames, ignore_index=True)


def read_tables(path: str | Path) -> Tables:
    """Both tables of a results folder (empty frames with the documented columns if absent)."""
    root = Path(path)
    return Tables(_read_parts(root / "trials", TRIAL_COLUMNS),
                  _read_parts(root / "steps", STEP_COLUMNS))


def write_part_atomic(df: pd.DataFrame, target: Path) -> None:
    """Write a Parquet part to a temp file beside `target`, then rename it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp)
    tmp.replace(target)
