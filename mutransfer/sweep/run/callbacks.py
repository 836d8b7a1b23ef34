"""Tune callbacks on the driver: feed the progress line, record trials that failed for good."""

from __future__ import annotations

from typing import Any

from ray.tune import Callback

from mutransfer.results.store import Store
from mutransfer.sweep.plan.listing import fmt_value
from mutransfer.sweep.run.progress import Progress
from mutransfer.sweep.run.trainable import TrialUnit, failure_row, payload_for


class TuneProgress(Callback):
    def __init__(self, progress: Progress, store: Store, units: dict[str, TrialUnit],
                 sweep: str):
        self.progress = progress
        self.store = store
        self.units = units
        self.sweep = sweep
        self.ended = False  # set when Tune says every trial has ended
        # trial ids whose result the store held already when the trial ended (`skipped`):
        # counted apart, as this run stored nothing for them
        self.skipped: set[str] = set()

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.ended = True

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        self.progress.refresh()

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.progress.started(trial.trial_id)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        result = trial.last_result or {}
        status = result.get("status", "complete")
        if status == "failed":  # a UserError, recorded by the trial itself: never retried
            self.progress.finished(trial.trial_id, "failed")
            self.progress.message(f"trial {_describe(trial, self.units)} failed (not retried: "
                                  f"bad config or data): {result.get('error')}")
            return
        if result.get("skipped"):  # the store held its result already: nothing stored now
            self.skipped.add(_cell_id(trial, self.units))
            self.progress.finished(trial.trial_id, "skipped")
            return
        self.progress.finished(trial.trial_id, status if status in ("diverged", "stopped")
                               else "complete")

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.progress.retrying(trial.trial_id)
        self.progress.message(f"trial {_describe(trial, self.units)} failed (attempt "
                              f"{trial.num_failures}), retrying: {error_reason(trial)}")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        reason = error_reason(trial)
        self.progress.finished(trial.trial_id, "failed")
        self.progress.message(f"trial {_describe(trial, self.units)} failed for good after "
                              f"{trial.num_failures} attempt(s): {reason}")
        try:
            payload = payload_for(trial.config, self.units)
            self.store.write_failure(failure_row(payload, self.sweep, reason),
                                     payload.axes)
        except Exception as exc:  # the store may be what failed; the message above stands
            self.progress.message(f"  (could not record the failure in {self.store.location}: "
                                  f"{exc})")


def _cell_id(trial: Any, units: dict[str, TrialUnit]) -> str:
    """The store's trial id of a Tune trial (the result's own `trial_id` is Tune's: Tune
    writes its trial id into every result)."""
    try:
        return payload_for(trial.config, units).trial_id
    except (KeyError, TypeError, ValueError):  # names no unit: no stored trial to count
        return ""


def _describe(trial: Any, units: dict[str, TrialUnit]) -> str:
    try:
        payload = payload_for(trial.config, units)
    except Exception:
        return str(trial.trial_id)
    cols = payload.columns
    shown = ", ".join(f"{k}={fmt_value(v)}" for k, v in cols.items() if k != "optimizer")
    return f"{payload.trial_id} ({shown})"


def error_reason(trial: Any) -> str:
    """One line: the exception the trial raised, from the text trace Tune keeps for it
    (Ray's wrapping and the traceback come first, then `Type: message`, whose message may
    run over several lines)."""
    path = getattr(trial, "error_file", None)
    try:
        with open(path) as f:  # Tune's own text file, appended at each failure
            text = f.read()
    except (OSError, TypeError):
        text = ""
    return exception_line(text) or "unknown error (see Ray's logs)"


def exception_line(trace: str) -> str:
    """`Type: message` of the last failure in Tune's error text, its message's lines joined
    into one; "" when there is none. The exception starts at the first line without
    indentation after the traceback's last frame (`  File ...`, then its indented source
    line and markers); a trace without frames (a worker that died) gives its last line."""
    lines = trace.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Failure # ")]
    lines = lines[starts[-1] + 1:] if starts else lines  # the latest attempt's failure
    frames = [i for i, ln in enumerate(lines)
              if ln[:1].isspace() and ln.lstrip().startswith('File "')]
    if frames:
        rest = lines[frames[-1] + 1:]
        first = next((j for j, ln in enumerate(rest) if ln.strip() and not ln[0].isspace()),
                     None)
        if first is not None:
            return _first_line(" ".join(ln.strip() for ln in rest[first:] if ln.strip()))
    nonblank = [ln.strip() for ln in lines if ln.strip()]
    return _first_line(nonblank[-1]) if nonblank else ""


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line if len(line) <= limit else line[: limit - 3] + "..."
