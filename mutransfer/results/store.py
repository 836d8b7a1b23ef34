"""The Parquet results store: per-trial parts written atomically, read back as DataFrames.

Layout and columns: docs/results-format.md. A trial's rows are tied to one *attempt* (a random
token per run of the trial): step parts are written per attempt while it runs, and only the
attempt named in the finished trial part counts. A crash, a retry or a driver restart therefore
never duplicates step rows, whatever partial parts it leaves behind.
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from mutransfer.errors import UserError, first_line
from mutransfer.results.fs import absolute_location, join, resolve

TRIAL_COLUMNS = [
    "trial_id", "sweep", "width", "parameterization", "lr", "seed", "optimizer", "status",
    "diverged", "diverge_step", "final_eval_loss", "best_eval_loss", "initial_loss",
    "last_finite_loss",  # diverged trials: the last finite loss (final/best are then null)
    "steps_done", "tokens", "wall_time_s", "tokens_per_s", "search", "host", "versions", "config",
    "attempt", "evals", "error",
]
STEP_COLUMNS = [
    "trial_id", "step", "tokens", "train_loss", "eval_loss", "lr", "grad_norm", "tokens_per_s",
    "attempt",
]
DONE_STATUSES = ("complete", "diverged")  # a diverged trial is a result, not a failure

_INT = ("width", "seed", "steps_done", "tokens", "evals")
_FLOAT = ("lr", "final_eval_loss", "best_eval_loss", "last_finite_loss", "initial_loss",
          "wall_time_s", "tokens_per_s")
_STEP_INT = ("step", "tokens")
_STEP_FLOAT = ("train_loss", "eval_loss", "lr", "grad_norm", "tokens_per_s")


@dataclass
class Tables:
    trials: pd.DataFrame
    steps: pd.DataFrame


@dataclass
class StoreState:
    """What a scan of the store found."""

    complete: dict[str, dict[str, Any]] = field(default_factory=dict)  # trial_id -> trial row
    failed: dict[str, str] = field(default_factory=dict)  # trial_id -> error of the last failure
    set_aside: list[str] = field(default_factory=list)  # parts renamed to *.corrupt
    corrupt: list[str] = field(default_factory=list)  # unreadable parts (dry scan: left in place)


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})


def trial_frame(row: dict[str, Any]) -> pd.DataFrame:
    """One trials row with the documented dtypes (extra axis columns keep their own)."""
    df = pd.DataFrame([row])
    for col in _INT:
        if col in df:
            df[col] = df[col].astype("int64")
    for col in _FLOAT:
        if col in df:
            df[col] = df[col].astype("float64")
    if "diverged" in df:
        df["diverged"] = df["diverged"].astype(bool)
    if "diverge_step" in df:
        df["diverge_step"] = df["diverge_step"].astype("Int64")
    return df


def step_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Steps rows with the documented dtypes; a missing value (e.g. no train loss yet) is NaN."""
    df = pd.DataFrame(rows, columns=list(dict.fromkeys([*STEP_COLUMNS, *_keys(rows)])))
    for col in _STEP_INT:
        df[col] = df[col].astype("int64")
    for col in _STEP_FLOAT:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    return df


def _keys(rows: list[dict[str, Any]]) -> list[str]:
    return [k for r in rows for k in r]


def write_part_atomic(df: pd.DataFrame, target: str | Path,
                      filesystem: pafs.FileSystem | None = None) -> None:
    """Write a Parquet part to a temp file beside `target`, then rename it into place.

    Readers never see a half-written part: they skip dot-files, and the rename is atomic on
    local filesystems (object stores publish a whole object at once anyway). The temp name is
    unique so two writers of the same part cannot interleave bytes.
    """
    fs = filesystem or pafs.LocalFileSystem()
    target = str(Path(target).resolve()) if filesystem is None else str(target)
    _write_atomic(fs, target,
                  lambda out: pq.write_table(pa.Table.from_pandas(df, preserve_index=False), out))


def _write_atomic(fs: pafs.FileSystem, target: str, write: Callable[[Any], None]) -> None:
    """`write(stream)` into a unique dot-file beside `target`, then rename it into place; the
    temp file is removed when anything fails."""
    folder, name = target.rsplit("/", 1)
    fs.create_dir(folder, recursive=True)
    tmp = join(folder, f".{name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with fs.open_output_stream(tmp) as out:
            write(out)
        fs.move(tmp, target)
    except BaseException:
        _delete_quietly(fs, tmp)
        raise


def _delete_quietly(fs: pafs.FileSystem, path: str) -> None:
    try:
        fs.delete_file(path)
    except OSError:
        pass


class Store:
    """One results folder: `trials/` and `steps/` parts plus the sweep file as run."""

    def __init__(self, location: str | Path):
        self.location = absolute_location(location)
        self.fs, self.root = resolve(self.location)

    # -- paths -------------------------------------------------------------------------------
    @property
    def trials_dir(self) -> str:
        return join(self.root, "trials")

    @property
    def steps_dir(self) -> str:
        return join(self.root, "steps")

    def trial_part(self, trial_id: str) -> str:
        return join(self.trials_dir, f"part-{trial_id}.parquet")

    def step_part(self, trial_id: str, attempt: str, k: int | None = None) -> str:
        """Per report: part-ID-ATTEMPT-K; compacted at the end: part-ID-ATTEMPT."""
        suffix = "" if k is None else f"-{k:05d}"
        return join(self.steps_dir, f"part-{trial_id}-{attempt}{suffix}.parquet")

    # -- files -------------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.fs.get_file_info(self.root).type != pafs.FileType.NotFound

    def ensure_writable(self) -> None:
        """Create the folders and prove a file can be written there, or raise a UserError."""
        probe = join(self.root, f".write-probe-{uuid.uuid4().hex[:8]}")
        try:
            for folder in (self.trials_dir, self.steps_dir):
                self.fs.create_dir(folder, recursive=True)
            with self.fs.open_output_stream(probe) as out:
                out.write(b"ok")
            self.fs.delete_file(probe)
        except OSError as exc:
            raise UserError(f"storage {self.location}: not writable "
                            f"({first_line(exc)})") from None

    def delete_if_no_results(self) -> bool:
        """Remove the whole folder when it holds no Parquet part (only what a run set up:
        empty tables, sweep.yaml); True when removed. Results are never deleted."""
        if not self.exists():
            return False
        infos = self.fs.get_file_info(pafs.FileSelector(self.root, recursive=True))
        if any(i.path.endswith(".parquet") or ".parquet." in i.path for i in infos):
            return False
        self.fs.delete_dir(self.root)
        return True

    def write_text(self, name: str, text: str) -> None:
        """A small text file under the root, written atomically."""
        _write_atomic(self.fs, join(self.root, name), lambda out: out.write(text.encode()))

    def read_text(self, name: str) -> str | None:
        path = join(self.root, name)
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            return None
        with self.fs.open_input_stream(path) as f:
            return f.read().decode()

    def list_parts(self, folder: str) -> list[str]:
        """Parquet parts in a folder, sorted; temp files (dot-files) are not parts."""
        if self.fs.get_file_info(folder).type != pafs.FileType.Directory:
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        names = [i.path for i in infos if i.type == pafs.FileType.File]
        return sorted(p for p in names
                      if p.endswith(".parquet") and not p.rsplit("/", 1)[1].startswith("."))

    def read_part(self, path: str) -> pd.DataFrame:
        """A part as a DataFrame; raises (OSError / ArrowInvalid) when it is unreadable."""
        return pq.read_table(path, filesystem=self.fs).to_pandas()

    def set_aside(self, path: str) -> str:
        """Rename a damaged part to *.corrupt (kept for inspection, ignored by readers)."""
        target, n = f"{path}.corrupt", 1
        while self.fs.get_file_info(target).type != pafs.FileType.NotFound:
            target, n = f"{path}.{n}.corrupt", n + 1
        self.fs.move(path, target)
        return target

    def _read_all(self, paths: Iterable[str]) -> tuple[list[pd.DataFrame], list[str]]:
        frames, bad = [], []
        for path in paths:
            try:
                frames.append(self.read_part(path))
            except (OSError, ValueError, pa.ArrowException):
                bad.append(path)
        return frames, bad

    # -- tables ------------------------------------------------------------------------------
    def _trial_rows(self) -> tuple[pd.DataFrame, list[str]]:
        frames, bad = self._read_all(self.list_parts(self.trials_dir))
        frames = [f for f in frames if len(f)]
        if not frames:
            return _empty(TRIAL_COLUMNS), bad
        return pd.concat(frames, ignore_index=True), bad

    def _step_rows(self) -> tuple[pd.DataFrame, list[str]]:
        frames, bad = self._read_all(self.list_parts(self.steps_dir))
        frames = [f for f in frames if len(f)]
        if not frames:
            return _empty(STEP_COLUMNS), bad
        steps = pd.concat(frames, ignore_index=True)
        if "attempt" not in steps:
            steps["attempt"] = ""
        # The per-report parts and the compacted part of one attempt hold the same rows.
        steps = steps.drop_duplicates(["trial_id", "attempt", "step"], keep="last")
        return steps, bad

    def tables(self, include_running: bool = False) -> Tables:
        """Both tables. Steps: the rows of each trial's finished attempt only, unless
        `include_running` (then also rows of attempts that have not finished, e.g. live ones).
        Unreadable parts are skipped with a warning (the sweep sets them aside)."""
        trials, bad_t = self._trial_rows()
        steps, bad_s = self._step_rows()
        if bad_t or bad_s:
            warnings.warn(f"{len(bad_t) + len(bad_s)} unreadable parts skipped in "
                          f"{self.location}: {', '.join((bad_t + bad_s)[:3])}", stacklevel=2)
        if len(steps) and not include_running:
            steps = steps[_finished_attempt_mask(trials, steps)]
        steps = steps.sort_values(["trial_id", "step"], kind="stable").reset_index(drop=True)
        return Tables(trials.reset_index(drop=True), steps)

    def scan(self, repair: bool = True) -> StoreState:
        """Which trials are complete. A trial is complete when its part reads, its status is
        complete or diverged, and all its steps rows (`evals` of them) are there.

        With `repair`, unreadable parts and trial parts whose steps are missing are set aside
        (*.corrupt) so their cells run again, and step parts of attempts that lost (a retry or
        restart finished the trial another way) are deleted.
        """
        state = StoreState()
        trials, bad_t = self._trial_rows()
        steps, bad_s = self._step_rows()
        state.corrupt = bad_t + bad_s
        if repair:
            state.set_aside += [self.set_aside(p) for p in state.corrupt]
        counts = (steps.groupby(["trial_id", "attempt"]).size().to_dict() if len(steps) else {})
        for row in trials.to_dict("records"):
            tid = str(row["trial_id"])
            if row.get("status") not in DONE_STATUSES:
                state.failed[tid] = str(row.get("error") or "failed")
                continue
            attempt = _attempt_of(row)
            if attempt:
                have = counts.get((tid, attempt), 0)
            else:  # written without attempts: count every row of the trial
                have = sum(n for (t, _), n in counts.items() if t == tid)
            if have < _count(row.get("evals")):
                state.corrupt.append(self.trial_part(tid))
                if repair:
                    state.set_aside.append(self.set_aside(self.trial_part(tid)))
                continue
            state.complete[tid] = row
        if repair:
            self._delete_stale_steps(state.complete)
        return state

    def _delete_stale_steps(self, complete: dict[str, dict[str, Any]]) -> None:
        for path in self.list_parts(self.steps_dir):
            tid, attempt = _parse_step_name(path)
            row = complete.get(tid)
            if row is not None and _attempt_of(row) and attempt != _attempt_of(row):
                _delete_quietly(self.fs, path)

    def finished_row(self, trial_id: str) -> dict[str, Any] | None:
        """The trial's row when its part exists, reads, and holds a finished (complete or
        diverged) trial; else None."""
        try:
            df = self.read_part(self.trial_part(trial_id))
        except (OSError, ValueError, pa.ArrowException):
            return None
        if not len(df) or str(df["status"].iloc[0]) not in DONE_STATUSES:
            return None
        return df.iloc[0].to_dict()

    def is_complete(self, trial_id: str) -> bool:
        """The trial part exists, reads, and holds a finished (complete or diverged) trial."""
        return self.finished_row(trial_id) is not None

    # -- writing trials ----------------------------------------------------------------------
    def start_attempt(self, trial_id: str) -> Attempt:
        """A new attempt at a trial; step parts of earlier attempts of it are removed."""
        for path in self.list_parts(self.steps_dir):
            if _parse_step_name(path)[0] == trial_id:
                _delete_quietly(self.fs, path)
        return Attempt(self, trial_id)

    def write_failure(self, row: dict[str, Any]) -> bool:
        """Record a trial that failed for good; never replaces a finished trial's part."""
        tid = row["trial_id"]
        if self.is_complete(tid):
            return False
        write_part_atomic(trial_frame({**row, "status": "failed"}), self.trial_part(tid), self.fs)
        return True


class Attempt:
    """One run of one trial: step parts flushed at each report, then the trial part."""

    def __init__(self, store: Store, trial_id: str):
        self.store = store
        self.trial_id = trial_id
        self.token = uuid.uuid4().hex[:12]
        self.rows: list[dict[str, Any]] = []

    def write_step(self, report: dict[str, Any]) -> None:
        """Flush one report as its own part, so a crash loses at most one eval interval."""
        row = {**_scalars(report), "trial_id": self.trial_id, "attempt": self.token}
        k = len(self.rows)
        self.rows.append(row)
        write_part_atomic(step_frame([row]), self.store.step_part(self.trial_id, self.token, k),
                          self.store.fs)

    def finish(self, row: dict[str, Any]) -> bool:
        """Compact the steps into one part, write the trial part, drop the per-report parts.

        Returns False (and writes nothing) when the trial is already complete in the store:
        what is stored is never rewritten. The trial part is written last, so a crash before
        it leaves an incomplete trial, never a complete one without its steps.
        """
        store, tid = self.store, self.trial_id
        if store.is_complete(tid):
            self.discard()
            return False
        if self.rows:
            write_part_atomic(step_frame(self.rows), store.step_part(tid, self.token), store.fs)
        full = {**row, "trial_id": tid, "attempt": self.token, "evals": len(self.rows)}
        write_part_atomic(trial_frame(full), store.trial_part(tid), store.fs)
        self._delete_report_parts()
        return True

    def discard(self) -> None:
        self._delete_report_parts()
        _delete_quietly(self.store.fs, self.store.step_part(self.trial_id, self.token))

    def _delete_report_parts(self) -> None:
        """The per-report step parts of this attempt (the compacted part stays)."""
        for k in range(len(self.rows)):
            _delete_quietly(self.store.fs, self.store.step_part(self.trial_id, self.token, k))


def _scalars(report: dict[str, Any]) -> dict[str, Any]:
    """Keep the report's plain values (numbers, strings, None); drop nested structures."""
    return {k: v for k, v in report.items()
            if v is None or isinstance(v, (bool, int, float, str))}


def _parse_step_name(path: str) -> tuple[str, str]:
    """(trial_id, attempt) from `.../part-ID-ATTEMPT[-K].parquet`."""
    stem = path.rsplit("/", 1)[1][len("part-"):-len(".parquet")]
    parts = stem.split("-")
    return parts[0], parts[1] if len(parts) > 1 else ""


def _count(value: Any) -> int:
    """An integer column that may be missing (None / NaN) in rows written by older versions."""
    return 0 if value is None or value != value else int(value)


def _attempt_of(row: dict[str, Any]) -> str:
    """The finished attempt of a trial row; "" for rows written without one (any attempt)."""
    value = row.get("attempt")
    return "" if value is None or value != value else str(value)  # NaN != NaN


def _finished_attempt_mask(trials: pd.DataFrame, steps: pd.DataFrame) -> pd.Series:
    done = trials[trials["status"].isin(DONE_STATUSES)] if len(trials) else trials
    attempt = {str(r["trial_id"]): _attempt_of(r) for r in done.to_dict("records")}
    pairs = zip(steps["trial_id"].astype(str), steps["attempt"].fillna("").astype(str))
    keep = [tid in attempt and attempt[tid] in ("", att) for tid, att in pairs]
    return pd.Series(keep, index=steps.index, dtype=bool)


def read_tables(path: str | Path, include_running: bool = False) -> Tables:
    """Both tables of a results folder or URI (empty frames with the documented columns if
    absent). Steps hold each finished trial's rows once; see `Store.tables`."""
    return Store(path).tables(include_running=include_running)


def versions() -> str:
    """JSON of the versions that produced a result (no heavy imports)."""
    import platform
    from importlib import metadata

    found = {"python": platform.python_version()}
    for dist in ("mutransfer", "torch", "ray"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    if found["mutransfer"] is None:
        from mutransfer import __version__
        found["mutransfer"] = __version__
    return json.dumps(found, sort_keys=True)
