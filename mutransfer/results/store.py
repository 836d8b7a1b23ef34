"""The Parquet results store: per-trial parts written atomically, read back as DataFrames.

Layout and columns: docs/results-format.md. A trial's rows are tied to one *attempt* (a random
token per run of the trial): step parts are written per attempt while it runs, and only the
attempt named in the finished trial part counts. A crash, a retry or a driver restart therefore
never duplicates step rows, whatever partial parts it leaves behind.

The table folders hold nothing else: a running attempt writes its per-eval parts to `running/`
(its steps reach `steps/` when it finishes), and damaged parts move to `quarantine/`. So every
file in `trials/` and `steps/` is a Parquet part of the one schema (mutransfer/results/schema.py)
and any Parquet reader reads either folder as a table.
"""

from __future__ import annotations

import json
import os
import posixpath
import time
import uuid
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from mutransfer import __version__
from mutransfer.errors import UserError, first_line
from mutransfer.results.fs import (
    absolute_location,
    delete_quietly,
    join,
    not_a_folder,
    resolve,
    write_atomic,
    write_part_atomic,
)
from mutransfer.results.lease import LEASE
from mutransfer.results.provenance import git_commit
from mutransfer.results.schema import (
    STEP_COLUMNS,
    STEP_FIELDS,
    TRIAL_COLUMNS,
    TRIAL_FIELDS,
    step_table,
    trial_table,
)

__all__ = ["DONE_STATUSES", "STEP_COLUMNS", "TRIAL_COLUMNS", "Store", "Tables", "duplicates_note",
           "each_trial_once", "read_tables"]

# a diverged trial is a result, not a failure; so is one stopped early by search.stop
DONE_STATUSES = ("complete", "diverged", "stopped")
# The columns without which a Parquet file in trials/ or steps/ is not a part of that table
# (another program's file put there): skipped, like an unreadable part.
TRIAL_KEY = ("trial_id", "width", "lr", "seed")
STEP_KEY = ("trial_id", "step")
# Written when a store is created: a non-empty folder without it (and not made by an older
# version: trials/ and steps/) is not a results store, and a sweep refuses to write there.
MARKER = "mutransfer-store.json"
# The marker's "format": what a store's rows mean. 2 since e45de27 (a diverged trial stores no
# final or best loss, and its last finite loss); 1 before. A sweep appends only to its own
# format; analysis reads older formats too, never a newer one.
STORE_FORMAT = 2
RUNNING = "running"  # per-eval step parts of attempts not finished yet
CHECKPOINTS = "checkpoints"  # a trial's resumable state (results/checkpoints.py)
QUARANTINE = "quarantine"  # damaged parts, moved out of the table folders
LEGACY_SET_ASIDE = ".corrupt"  # how older versions marked damaged parts, inside the tables
# the folders a sweep writes into (docs/results-format.md): a file at one of these names
# would fail every trial's writes
STORE_FOLDERS = ("trials", "steps", RUNNING, CHECKPOINTS, QUARANTINE, "history", "tune")
# ... and the files it writes (the marker is checked on its own: Store._check_marker)
STORE_FILES = ("sweep.yaml", LEASE)


@dataclass
class Tables:
    trials: pd.DataFrame
    steps: pd.DataFrame
    # trials rows left out as a second row of a trial id (each_trial_once): none in a store
    # a sweep wrote (one part per trial); a part copied beside itself, two stores merged
    duplicates: pd.DataFrame = field(default_factory=pd.DataFrame)


@dataclass
class StoreState:
    """What a scan of the store found."""

    complete: dict[str, dict[str, Any]] = field(default_factory=dict)  # trial_id -> trial row
    failed: dict[str, str] = field(default_factory=dict)  # trial_id -> error of the last failure
    set_aside: list[str] = field(default_factory=list)  # parts renamed to *.corrupt
    corrupt: list[str] = field(default_factory=list)  # unreadable parts (dry scan: left in place)
    foreign: list[str] = field(default_factory=list)  # another program's Parquet files there
    foreign_aside: list[str] = field(default_factory=list)  # where repair moved them


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})


def _with_dtypes(df: pd.DataFrame, fields: list[tuple[str, pa.DataType]]) -> pd.DataFrame:
    """The documented pandas dtypes, whatever the parts were written with (older versions
    wrote nulls as Arrow null columns): int64 (Int64 where a value is missing), float64, bool.
    An integer column holding a value that is not whole (a part written by another program,
    width 64.5) stays float64, for the analysis to leave those rows out naming why (before: a
    TypeError traceback from every reader of the store)."""
    for name, typ in fields:
        if name not in df:
            continue
        if pa.types.is_integer(typ):
            values = pd.to_numeric(df[name], errors="coerce")
            if values.dtype.kind == "f" and (values.dropna() % 1 != 0).any():
                df[name] = values.astype("float64")
                continue
            col = values.astype("Int64")
            df[name] = col if col.isna().any() or name == "diverge_step" else col.astype("int64")
        elif pa.types.is_floating(typ):
            df[name] = pd.to_numeric(df[name], errors="coerce").astype("float64")
        elif pa.types.is_boolean(typ) and not df[name].isna().any():
            df[name] = df[name].astype(bool)
    return df


class Store:
    """One results folder: `trials/` and `steps/` parts plus the sweep file as run."""

    def __init__(self, location: str | Path):
        self.location = absolute_location(location)
        self.fs, self.root = resolve(self.location)
        self._made_above: list[str] = []  # folders above the root ensure_writable made

    # -- paths -------------------------------------------------------------------------------
    @property
    def trials_dir(self) -> str:
        return join(self.root, "trials")

    @property
    def steps_dir(self) -> str:
        return join(self.root, "steps")

    @property
    def running_dir(self) -> str:
        return join(self.root, RUNNING)

    def trial_part(self, trial_id: str) -> str:
        return join(self.trials_dir, f"part-{trial_id}.parquet")

    def step_part(self, trial_id: str, attempt: str, k: int | None = None) -> str:
        """A finished attempt's steps: steps/part-ID-ATTEMPT; while it runs, one part per
        report: running/part-ID-ATTEMPT-K."""
        if k is None:
            return join(self.steps_dir, f"part-{trial_id}-{attempt}.parquet")
        return join(self.running_dir, f"part-{trial_id}-{attempt}-{k:05d}.parquet")

    # -- files -------------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.fs.get_file_info(self.root).type != pafs.FileType.NotFound

    def check_is_store(self) -> None:
        """Refuse (UserError) a non-empty folder that is not a results store: one with the
        marker file, or one made by an older version (trials/ and steps/ folders)."""
        what = not_a_folder(self.fs, self.root)
        if what is not None:  # a file, a device, a FIFO: nothing to list or write folders in
            raise UserError(f"storage {self.location}: is {what}, not a folder")
        outer = self._store_above()
        if outer is not None:  # its parts would sit in the other store's tables (steps/x/...)
            raise UserError(f"storage {self.location}: inside the results store {outer}; give "
                            f"a folder outside it")
        infos = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
        names = {i.path.rsplit("/", 1)[-1]: i.type for i in infos}
        if MARKER in names:
            self._check_marker()
            self._check_layout(names)
            return
        if not names:
            return
        if self.is_store():
            self._check_layout(names)
            return  # made by a version before the marker
        shown = ", ".join(sorted(names)[:3]) + (", ..." if len(names) > 3 else "")
        raise UserError(f"storage {self.location}: a folder that is not empty ({shown}) and "
                        f"not a mutransfer results store (no {MARKER}); give an empty or new "
                        f"folder, or an existing results folder")

    def _check_layout(self, names: dict[str, pafs.FileType]) -> None:
        """UserError when a name the store writes a folder at is taken by a file, or one it
        writes a file at by a folder (before: with a file at trials/ every trial trained, then
        failed three times writing its part, and the sweep ended with all of them failed; a
        file at quarantine/, or a folder at driver.lease or sweep.yaml, was a traceback)."""
        for name in STORE_FOLDERS:
            kind = names.get(name)
            if kind is not None and kind != pafs.FileType.Directory:
                raise UserError(f"storage {self.location}: {name} is a file, not a folder (the "
                                f"store keeps its {name}/ folder there); move that file away")
        for name in STORE_FILES:
            if names.get(name) == pafs.FileType.Directory:
                raise UserError(f"storage {self.location}: {name} is a folder (the store "
                                f"writes its {name} file there); move that folder away")

    def is_store(self) -> bool:
        """Whether the root is a results store's: it holds the marker file, or trials/ and
        steps/ folders (a store made by a version before the marker)."""
        marker, trials, steps = self.fs.get_file_info(
            [join(self.root, MARKER), self.trials_dir, self.steps_dir])
        return marker.type == pafs.FileType.File or (
            trials.type == steps.type == pafs.FileType.Directory)

    def _store_above(self) -> str | None:
        """The nearest folder above the root that is a results store (holds the marker)."""
        path = self.root.rstrip("/")
        while True:
            parent = posixpath.dirname(path)
            if not parent or parent == path:
                return None
            if self.fs.get_file_info(join(parent, MARKER)).type == pafs.FileType.File:
                return parent
            path = parent

    def _check_marker(self) -> None:
        """UserError naming the marker when it is not the JSON object a store writes (a
        truncated or overwritten file): said once, not a crash of every later sweep; or when
        its format is not the one this version writes (a sweep would mix two meanings)."""
        fmt = self._marker_format()
        if fmt < STORE_FORMAT:
            raise UserError(f"storage {self.location}: a results store of format {fmt}, "
                            f"written by an older mutransfer (this one writes format "
                            f"{STORE_FORMAT}: a diverged trial keeps no final loss); a sweep "
                            f"adds to its own format only: give a new folder (analyze and "
                            f"plot still read this one)")

    def _marker_format(self) -> int:
        """The marker's format number (UserError when the marker is damaged, or is of a
        newer format than this version reads)."""
        try:
            with self.fs.open_input_stream(join(self.root, MARKER)) as f:
                data = json.loads(f.read().decode("utf-8"))
            problem = None if isinstance(data, dict) else f"holds a JSON {type(data).__name__}"
        except UnicodeDecodeError as exc:
            problem = f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at {exc.start})"
        except ValueError as exc:  # json.JSONDecodeError
            problem = f"not JSON ({exc})"
        except OSError as exc:
            problem = f"unreadable ({first_line(exc)})"
        fmt = data.get("format") if problem is None else None
        if problem is None and (type(fmt) is not int or fmt < 1):
            problem = f"its format is {json.dumps(fmt)[:20]}, not a format number"
        if problem is not None:
            raise UserError(f"storage {self.location}: its marker {MARKER} is damaged "
                            f"({problem}); delete that file (it holds no results; the next "
                            f"sweep writes it again)")
        if fmt > STORE_FORMAT:
            raise UserError(f"storage {self.location}: a results store of format {fmt}, "
                            f"written by a newer mutransfer (this one reads formats 1-"
                            f"{STORE_FORMAT}); upgrade mutransfer to read or add to it")
        return fmt

    def ensure_writable(self) -> None:
        """Create the folders and the marker file, proving that a file can be written there,
        or raise a UserError and leave no folder this call made (a full disk takes folders
        but not the marker: a refused sweep must not leave empty trials/ and steps/)."""
        made: list[str] = []
        probe = join(self.root, f".write-probe-{uuid.uuid4().hex[:8]}")
        try:
            for folder in (*self._missing_above(), self.root, self.trials_dir, self.steps_dir):
                if self.fs.get_file_info(folder).type == pafs.FileType.NotFound:
                    self.fs.create_dir(folder, recursive=True)
                    made.append(folder)
            if self.read_text(MARKER) is None:
                created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                self.write_text(MARKER, json.dumps(
                    {"format": STORE_FORMAT, "created": created,
                     "versions": json.loads(versions())}, indent=1) + "\n")
            with self.fs.open_output_stream(probe) as out:
                out.write(b"ok")
            self.fs.delete_file(probe)
            self._made_above = [f for f in made
                                if f not in (self.root, self.trials_dir, self.steps_dir)]
        except OSError as exc:
            delete_quietly(self.fs, probe)
            self._remove_made(made)
            raise UserError(f"storage {self.location}: not writable "
                            f"({first_line(exc)})") from None

    def _missing_above(self) -> list[str]:
        """The folders above the root that are not there yet, outermost first."""
        missing: list[str] = []
        parent = self.root.rsplit("/", 1)[0]
        while parent and parent != self.root and \
                self.fs.get_file_info(parent).type == pafs.FileType.NotFound:
            missing.insert(0, parent)
            parent = parent.rsplit("/", 1)[0] if "/" in parent else ""
        return missing

    def _remove_made(self, made: list[str]) -> None:
        """Remove the folders ensure_writable made (steps/, trials/, the root, then the ones
        above it), each only when empty: a file another process wrote meanwhile stays, with
        its folders."""
        for folder in reversed(made):
            try:
                if not self.fs.get_file_info(pafs.FileSelector(folder, recursive=True)):
                    self.fs.delete_dir(folder)
            except OSError:
                pass

    def delete_if_no_results(self) -> bool:
        """Remove the whole folder when it holds no Parquet part and no trial checkpoint
        (only what a run set up: empty tables, sweep.yaml), and the folders above it that
        ensure_writable made, each when empty; True when removed. Results are never deleted."""
        if not self.exists():
            return False
        infos = self.fs.get_file_info(pafs.FileSelector(self.root, recursive=True))
        if any(_is_result(i.path) for i in infos):
            return False
        self.fs.delete_dir(self.root)
        self._remove_made(self._made_above)  # e.g. the results/ of a default results/NAME
        return True

    def write_text(self, name: str, text: str | bytes) -> None:
        """A small text file under the root, written atomically (bytes as they are)."""
        data = text.encode() if isinstance(text, str) else text
        write_atomic(self.fs, join(self.root, name), lambda out: out.write(data))

    def read_text(self, name: str) -> str | None:
        data = self.read_bytes(name)
        return None if data is None else data.decode()

    def read_bytes(self, name: str) -> bytes | None:
        """A small file under the root as it is (None when there is none): a file edited by
        hand need not be UTF-8."""
        path = join(self.root, name)
        try:
            if self.fs.get_file_info(path).type != pafs.FileType.File:
                return None
            with self.fs.open_input_stream(path) as f:
                return f.read()
        except FileNotFoundError:  # removed between the two calls
            return None

    def delete_text(self, name: str) -> None:
        delete_quietly(self.fs, join(self.root, name))

    def list_parts(self, folder: str, suffix: str = ".parquet") -> list[str]:
        """Parquet parts in a folder, sorted; temp files (dot-files) are not parts."""
        if self.fs.get_file_info(folder).type != pafs.FileType.Directory:
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        names = [i.path for i in infos if i.type == pafs.FileType.File]
        return sorted(p for p in names
                      if p.endswith(suffix) and not p.rsplit("/", 1)[1].startswith("."))

    def running_trial_ids(self) -> set[str]:
        """The trials with per-eval parts in running/: attempts that started and have not
        finished (a live sweep's, or those a stopped sweep left; the sweep's next scan tidies
        them away)."""
        return {_parse_step_name(p)[0] for p in self.list_parts(self.running_dir)}

    def read_part(self, path: str) -> pd.DataFrame:
        """A part as a DataFrame; raises (OSError / ArrowInvalid) when it is unreadable."""
        return pq.read_table(path, filesystem=self.fs).to_pandas()

    def set_aside(self, path: str) -> str:
        """Move a damaged part from its table folder to quarantine/<table>/ (kept for
        inspection; no reader of the table folders sees it). Returns the new path."""
        table = path.rsplit("/", 2)[-2]
        name = path.rsplit("/", 1)[-1].removesuffix(LEGACY_SET_ASIDE)
        folder = join(self.root, QUARANTINE, table)
        self.fs.create_dir(folder, recursive=True)
        target, n = join(folder, name), 1
        while self.fs.get_file_info(target).type != pafs.FileType.NotFound:
            target, n = join(folder, f"{name}.{n}"), n + 1
        self.fs.move(path, target)
        return target

    def _read_all(self, paths: Iterable[str], key: tuple[str, ...] = ()
                  ) -> tuple[list[pd.DataFrame], list[str], list[str]]:
        """The parts that read, the paths that do not, and the paths of Parquet files that
        lack a column of `key` (another program's file in a table folder: not a part). A part
        gone since it was listed is none of these: a live sweep removed it (an attempt's
        per-eval parts once its steps part is written, the parts of an attempt that lost)."""
        frames, bad, foreign = [], [], []
        for path in paths:
            try:
                frame = self.read_part(path)
            except (OSError, ValueError, pa.ArrowException):
                if not self._gone(path):
                    bad.append(path)
                continue
            if any(c not in frame.columns for c in key):
                foreign.append(path)
            else:
                frames.append(frame)
        return frames, bad, foreign

    # -- tables ------------------------------------------------------------------------------
    def _trial_rows(self) -> tuple[pd.DataFrame, pd.DataFrame, list[str], list[str]]:
        """Each trial's row (each_trial_once), the rows left out as duplicates, and the
        paths that do not read and that are no parts (`_read_all`)."""
        frames, bad, foreign = self._read_all(self.list_parts(self.trials_dir), TRIAL_KEY)
        frames = [f for f in frames if len(f)]
        if not frames:
            empty = _empty(TRIAL_COLUMNS)
            return empty, empty, bad, foreign
        trials, duplicates = each_trial_once(_with_dtypes(_concat(frames), TRIAL_FIELDS))
        return trials, duplicates, bad, foreign

    def _gone(self, path: str) -> bool:
        try:
            return self.fs.get_file_info(path).type == pafs.FileType.NotFound
        except OSError:
            return False

    def _step_rows(self, include_running: bool = False
                   ) -> tuple[pd.DataFrame, list[str], list[str]]:
        # running/ before steps/: an attempt that finishes meanwhile writes its steps part
        # before it deletes its per-eval parts, so the steps listed after them hold every row
        # of the per-eval parts that vanished before they were read
        frames, bad, foreign = self._read_all(
            self.list_parts(self.running_dir), STEP_KEY) if include_running else ([], [], [])
        more = self._read_all(self.list_parts(self.steps_dir), STEP_KEY)
        frames, bad, foreign = more[0] + frames, more[1] + bad, more[2] + foreign
        frames = [f for f in frames if len(f)]
        if not frames:
            return _empty(STEP_COLUMNS), bad, foreign
        steps = _with_dtypes(_concat(frames), STEP_FIELDS)
        if "attempt" not in steps:
            steps["attempt"] = ""
        # The per-report parts and the compacted part of one attempt hold the same rows.
        steps = steps.drop_duplicates(["trial_id", "attempt", "step"], keep="last")
        return steps, bad, foreign

    def tables(self, include_running: bool = False) -> Tables:
        """Both tables. Trials: each trial id once (each_trial_once; the rows left out are
        `duplicates`). Steps: the rows of each trial's finished attempt only, unless
        `include_running` (then also rows of attempts that have not finished, e.g. live ones).
        Unreadable parts are skipped with a warning (the sweep sets them aside); UserError when
        every trials part is unreadable, or the store is of a newer format (its marker)."""
        if self.fs.get_file_info(join(self.root, MARKER)).type == pafs.FileType.File:
            self._marker_format()
        trials, duplicates, bad_t, foreign_t = self._trial_rows()
        if bad_t and trials.empty:  # not "no trials": there are some, none of them readable
            raise UserError(f"{self.location}: every trials part is unreadable ({len(bad_t)}: "
                            f"{', '.join(bad_t[:3])}{', ...' if len(bad_t) > 3 else ''}); "
                            f"a sweep re-run sets them aside and runs their cells again")
        steps, bad_s, foreign_s = self._step_rows(include_running)
        if bad_t or bad_s:
            warnings.warn(f"{len(bad_t) + len(bad_s)} unreadable parts skipped in "
                          f"{self.location}: {', '.join((bad_t + bad_s)[:3])}", stacklevel=2)
        if foreign_t or foreign_s:
            warnings.warn(f"{len(foreign_t) + len(foreign_s)} Parquet files skipped in "
                          f"{self.location}: not parts of its tables (no "
                          f"{'/'.join(TRIAL_KEY if foreign_t else STEP_KEY)} columns): "
                          f"{', '.join((foreign_t + foreign_s)[:3])}", stacklevel=2)
        if len(steps) and not include_running:
            steps = steps[_finished_attempt_mask(trials, steps)]
        steps = steps.sort_values(["trial_id", "step"], kind="stable").reset_index(drop=True)
        return Tables(trials.reset_index(drop=True), steps, duplicates.reset_index(drop=True))

    def scan(self, repair: bool = True) -> StoreState:
        """Which trials are complete. A trial is complete when its part reads, its status is
        complete or diverged, and all its steps rows (`evals` of them) are there.

        With `repair` (only while no trial of this store runs: the sweep driver, holding the
        store's lease, before it starts any), unreadable parts and trial parts whose steps are
        missing move to quarantine/ so their cells run again, and step parts that do not count
        are deleted: those of attempts that lost (a retry or restart finished the trial
        another way) and the per-eval parts of attempts that never finished.
        """
        state = StoreState()
        if repair:
            state.set_aside += [self.set_aside(p) for p in self._legacy_set_aside()]
        trials, _, bad_t, foreign_t = self._trial_rows()  # a trial's copied row: not run again
        steps, bad_s, foreign_s = self._step_rows()
        state.corrupt = bad_t + bad_s
        state.foreign = foreign_t + foreign_s  # not parts: no cell runs again for them
        if repair:
            state.set_aside += [self.set_aside(p) for p in state.corrupt]
            state.foreign_aside = [self.set_aside(p) for p in state.foreign]
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
            self._tidy_steps(state)
        return state

    def _legacy_set_aside(self) -> list[str]:
        """Parts older versions set aside inside the table folders (*.corrupt)."""
        return [p for d in (self.trials_dir, self.steps_dir)
                for p in self.list_parts(d, suffix=LEGACY_SET_ASIDE)]

    def _tidy_steps(self, state: StoreState) -> None:
        """steps/ keeps the finished attempts of complete trials only: the steps of a trial
        whose part was set aside join it in quarantine/; parts of attempts that lost or never
        finished, and everything in running/, are deleted."""
        for path in self.list_parts(self.running_dir):
            delete_quietly(self.fs, path)
        set_aside = {p.rsplit("/", 1)[-1].removeprefix("part-").split(".")[0]
                     for p in state.set_aside if "/trials/" in p}
        parts = self.list_parts(self.steps_dir)
        for path in parts:
            tid, attempt = _parse_step_name(path)
            row = state.complete.get(tid)
            counts = row is not None and _attempt_of(row) in ("", attempt)
            if counts and not _is_report_part(path, parts):
                continue
            if tid in set_aside:
                state.set_aside.append(self.set_aside(path))
            else:
                delete_quietly(self.fs, path)

    def finished_row(self, trial_id: str) -> dict[str, Any] | None:
        """The trial's row when its part exists, reads, holds a finished (complete or
        diverged) trial, and the steps of its attempt are all there; else None."""
        row = self._done_row(trial_id)
        return row if row is not None and self._has_steps(row) else None

    def _done_row(self, trial_id: str) -> dict[str, Any] | None:
        """The trial part's row when it reads and its status is complete or diverged."""
        try:
            df = self.read_part(self.trial_part(trial_id))
        except (OSError, ValueError, pa.ArrowException):
            return None
        # a part without a status column (written by another program, or edited) holds no
        # finished trial, as the scan reads it: the cell runs again and its new part replaces
        # this one (before: KeyError 'status' in every attempt, the cell failed for good)
        if not len(df) or "status" not in df or str(df["status"].iloc[0]) not in DONE_STATUSES:
            return None
        return df.iloc[0].to_dict()

    def _has_steps(self, row: dict[str, Any]) -> bool:
        """The steps part of the row's attempt holds its `evals` rows (read from the part's
        footer). Without this, a trial part written by an attempt whose steps a newer attempt
        had just deleted (a worker of a killed driver finishing late) would count as done, and
        the newer attempt would throw its own steps away."""
        attempt, evals = _attempt_of(row), _count(row.get("evals"))
        if not attempt or not evals:  # written without attempts (older versions), no steps
            return True
        path = self.step_part(str(row["trial_id"]), attempt)
        try:
            return pq.read_metadata(path, filesystem=self.fs).num_rows >= evals
        except (OSError, ValueError, pa.ArrowException):
            return False

    def is_complete(self, trial_id: str) -> bool:
        """The trial is stored whole: see `finished_row`."""
        return self.finished_row(trial_id) is not None

    # -- writing trials ----------------------------------------------------------------------
    def start_attempt(self, trial_id: str) -> Attempt:
        """A new attempt at a trial; step parts of earlier attempts of it are removed, except
        those of the attempt a finished trial part names (stored results are never lost)."""
        done = self._done_row(trial_id)
        keep = _attempt_of(done) if done is not None else ""
        for path in self.list_parts(self.running_dir) + self.list_parts(self.steps_dir):
            tid, attempt = _parse_step_name(path)
            if tid == trial_id and not (keep and attempt == keep and "/steps/" in path):
                delete_quietly(self.fs, path)
        return Attempt(self, trial_id)

    def write_failure(self, row: dict[str, Any], axes: dict[str, str] | None = None) -> bool:
        """Record a trial that failed for good; never replaces a finished trial's part.
        `axes`: the types of the sweep's extra axis columns (schema.axis_types)."""
        tid = row["trial_id"]
        if self.is_complete(tid):
            return False
        table = trial_table([{**row, "status": "failed"}], axes)
        write_part_atomic(table, self.trial_part(tid), self.fs)
        return True


class Attempt:
    """One run of one trial: step parts flushed at each report, then the trial part."""

    def __init__(self, store: Store, trial_id: str):
        self.store = store
        self.trial_id = trial_id
        self.token = uuid.uuid4().hex[:12]
        self.rows: list[dict[str, Any]] = []

    def write_step(self, report: dict[str, Any]) -> None:
        """Flush one report as its own part (in running/), so a crash loses at most one eval
        interval."""
        row = {**_scalars(report), "trial_id": self.trial_id, "attempt": self.token}
        k = len(self.rows)
        self.rows.append(row)
        write_part_atomic(step_table([row]), self.store.step_part(self.trial_id, self.token, k),
                          self.store.fs)

    def finish(self, row: dict[str, Any], axes: dict[str, str] | None = None) -> bool:
        """Write the steps as one part into steps/, then the trial part, then drop the
        per-report parts. `axes`: the types of the sweep's extra axis columns.

        Returns False (and writes nothing) when the trial is already complete in the store:
        what is stored is never rewritten. The trial part is written last, so a crash before
        it leaves an incomplete trial, never a complete one without its steps.
        """
        store, tid = self.store, self.trial_id
        if store.is_complete(tid):
            self.discard()
            return False
        full = {**row, "trial_id": tid, "attempt": self.token, "evals": len(self.rows)}
        table = trial_table([full], axes)  # a row the schema refuses fails before any write
        if self.rows:
            write_part_atomic(step_table(self.rows), store.step_part(tid, self.token), store.fs)
        write_part_atomic(table, store.trial_part(tid), store.fs)
        self._delete_report_parts()
        return True

    def discard(self) -> None:
        self._delete_report_parts()
        delete_quietly(self.store.fs, self.store.step_part(self.trial_id, self.token))

    def _delete_report_parts(self) -> None:
        """The per-report step parts of this attempt (the compacted part stays)."""
        for k in range(len(self.rows)):
            delete_quietly(self.store.fs, self.store.step_part(self.trial_id, self.token, k))


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    with warnings.catch_warnings():  # all-NA columns of older parts: their dtype is irrelevant
        warnings.simplefilter("ignore", FutureWarning)
        return pd.concat(frames, ignore_index=True)


def _scalars(report: dict[str, Any]) -> dict[str, Any]:
    """Keep the report's plain values (numbers, strings, None); drop nested structures."""
    return {k: v for k, v in report.items()
            if v is None or isinstance(v, (bool, int, float, str))}


def _parse_step_name(path: str) -> tuple[str, str]:
    """(trial_id, attempt) from `.../part-ID-ATTEMPT[-K].parquet`."""
    stem = path.rsplit("/", 1)[1][len("part-"):-len(".parquet")]
    parts = stem.split("-")
    return parts[0], parts[1] if len(parts) > 1 else ""


def _is_result(path: str) -> bool:
    """A file a run must never delete: a Parquet part (or one being written) or a trial's
    checkpoint, whose hours of training a re-run resumes from."""
    name = path.rsplit("/", 1)[-1]
    return (name.endswith(".parquet") or ".parquet." in name
            or path.rsplit("/", 2)[-2:-1] == [CHECKPOINTS])


def _is_report_part(path: str, parts: list[str]) -> bool:
    """A per-report part left in steps/ by an older version beside its attempt's compacted
    part (which holds the same rows)."""
    stem = path.rsplit("/", 1)[1]
    pieces = stem.removesuffix(".parquet").split("-")
    return len(pieces) == 4 and path.replace(f"-{pieces[3]}.parquet", ".parquet") in parts


def _count(value: Any) -> int:
    """An integer column that may be missing (None / NaN) in rows written by older versions."""
    return 0 if value is None or value != value else int(value)


def _attempt_of(row: dict[str, Any]) -> str:
    """The finished attempt of a trial row; "" for rows written without one (any attempt)."""
    value = row.get("attempt")
    return "" if value is None or value != value else str(value)  # NaN != NaN


def _finished(trials: pd.DataFrame) -> pd.Series:
    """Which rows of a trials table hold a finished trial (DONE_STATUSES). A trials row is
    written when its trial ends: a table whose parts carry no status (not one this version
    writes) counts each row as finished, not as a KeyError."""
    if "status" not in trials:
        return pd.Series(True, index=trials.index, dtype=bool)
    return trials["status"].astype(str).isin(DONE_STATUSES)


def each_trial_once(trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The first row of each trial id, a finished row before a failed one (the finished
    attempt is the one that counts), in the table's order; and the rows left out. A sweep
    writes one part per trial, so only a part copied beside itself or two stores merged
    give a trial id two rows: counted twice, it would be one more seed of its cell. Rows
    without a trial id are all kept (the analysis says what is wrong with them)."""
    order = np.argsort(~_finished(trials).to_numpy(), kind="stable")
    ordered = trials.iloc[order]
    again = (ordered["trial_id"].notna() & ordered.duplicated("trial_id")).to_numpy()
    return trials.iloc[np.sort(order[~again])], trials.iloc[np.sort(order[again])]


def duplicates_note(left_out: pd.DataFrame) -> str | None:
    """What `each_trial_once` left out, in one line; None when nothing."""
    if left_out.empty:
        return None
    return (f"{len(left_out)} trial rows left out as duplicates: "
            f"{left_out['trial_id'].nunique()} trial ids appear in more than one row of "
            "trials/ (a copied part?); each is read once, a finished row before a failed one")


def _finished_attempt_mask(trials: pd.DataFrame, steps: pd.DataFrame) -> pd.Series:
    done = trials[_finished(trials)] if len(trials) else trials
    attempt = {str(r["trial_id"]): _attempt_of(r) for r in done.to_dict("records")}
    pairs = zip(steps["trial_id"].astype(str), steps["attempt"].fillna("").astype(str))
    keep = [tid in attempt and attempt[tid] in ("", att) for tid, att in pairs]
    return pd.Series(keep, index=steps.index, dtype=bool)


def read_tables(path: str | Path, include_running: bool = False) -> Tables:
    """Both tables of a results folder or URI (empty frames with the documented columns if
    absent). Trials hold each trial id once, steps each finished trial's rows once; see
    `Store.tables` (a trial id in several rows: warned, the rows left out in `duplicates`).
    A path that is no path ('', a number) or a file: UserError (before: empty tables, as if
    absent)."""
    if not isinstance(path, (str, os.PathLike)) or not str(os.fspath(path)).strip():
        raise UserError(f"read_tables: expected a results folder or URI, got {path!r}")
    store = Store(path)
    what = not_a_folder(store.fs, store.root)
    if what is not None:
        raise UserError(f"{store.location}: is {what}, not a results folder")
    tables = store.tables(include_running=include_running)
    note = duplicates_note(tables.duplicates)
    if note:  # as the unreadable parts Store.tables skips: the reader is told
        warnings.warn(f"{store.location}: {note}", stacklevel=2)
    return tables


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
        found["mutransfer"] = __version__
    found["git"] = git_commit()  # the checkout's commit, when run from one
    return json.dumps(found, sort_keys=True)
