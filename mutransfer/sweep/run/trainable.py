"""One cell on a worker: run the trainer and write its parts into the store.

`run_unit` knows nothing of Ray (it is what the Ray trainable calls, and what tests can call
directly); `tune_trainable` is the function Ray Tune runs. Any exception out of the trainer
is a failure that Tune retries, but a UserError (bad config or data: it would fail again the
same way) is recorded as failed at once; a diverged trial is a result like any other.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mutransfer.config import TrainConfig, TrialConfig
from mutransfer.data.cached import corpus_fingerprint
from mutransfer.data.config import DataConfig
from mutransfer.errors import UserError, first_line
from mutransfer.results.checkpoints import MAX_OVERHEAD, TrialCheckpoint
from mutransfer.results.provenance import environment_json
from mutransfer.results.store import Store, versions
from mutransfer.sweep.plan.identity import canonical_json, trial_id
from mutransfer.sweep.run.horizon import HorizonCheckpoint, diverged_in_trunk, row_columns
from mutransfer.sweep.search.objective import OBJECTIVE, finite, objective
from mutransfer.sweep.search.stopping import StopContext, decide


@dataclass(frozen=True)
class TrialUnit:
    """What a trial needs on its worker (Ray pickles it there): a grid cell, or an adaptive
    group, whose trials get their LR from the searcher (`at_lr`)."""

    config: dict[str, Any]  # the trial config, JSON-like (mutransfer/config.py TrialConfig)
    columns: dict[str, Any]  # the cell's axis columns in the trials table
    trial_id: str = ""  # "": a group (each of its trials' ids follows from its LR)
    search: str = "grid"  # the sweep's search kind, stored with each trial
    axes: dict[str, str] | None = None  # column types of the sweep's extra axes
    horizon: dict[str, Any] | None = None  # its horizon role (mutransfer/sweep/plan/horizon.py)
    stop: StopContext | None = None  # search.stop (mutransfer/sweep/search/stopping.py)

    @classmethod
    def of(cls, config: dict[str, Any], columns: dict[str, Any], search: str = "grid",
           axes: dict[str, str] | None = None) -> TrialUnit:
        """The unit of one trial config (validated; its id is its identity hash)."""
        resolved = _validated(config)
        return cls(resolved, dict(columns), trial_id(resolved), search, axes)

    def at_lr(self, lr: float) -> TrialUnit:
        """The trial of this group at `lr` (the searcher's choice)."""
        config = json.loads(json.dumps(self.config))
        config["train"]["lr"] = lr
        return TrialUnit(config, {**self.columns, "lr": lr}, trial_id(_validated(config)),
                         self.search, self.axes)


def payload_for(tune_config: dict[str, Any], units: dict[str, TrialUnit]) -> TrialUnit:
    """The cell to run: a grid cell by id, or an adaptive group at the LR the searcher chose."""
    if "trial_id" in tune_config:
        return units[tune_config["trial_id"]]
    return units[tune_config["group"]].at_lr(float(tune_config["lr"]))


def _validated(config: dict[str, Any]) -> dict[str, Any]:
    return TrialConfig.model_validate(config).model_dump(mode="json")


def run_unit(payload: TrialUnit, store_location: str, sweep: str,
             save_every_eval: bool = False,
             on_eval: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run one trial unless the store already holds it; return the metrics for Tune.
    Each eval point goes to the store first (the record), then to `on_eval` (Tune).

    A trial that an earlier attempt checkpointed (a retry, a lost node, a killed driver)
    resumes from its checkpoint; the resumed attempt writes every step row again under its
    own token, so the store holds each once. The checkpoint is removed once the trial part is
    stored. Checkpoints are written at eval points, as often as costs at most
    checkpoints.MAX_OVERHEAD of the trial's time (`save_every_eval`: at every one).
    """
    from mutransfer.train import run_trial  # the one bridge to the trainer (pyproject.toml)

    store = Store(store_location)
    tid = payload.trial_id
    overhead = None if save_every_eval else MAX_OVERHEAD
    if payload.horizon:
        checkpoint: TrialCheckpoint = HorizonCheckpoint(store, tid, payload.config,
                                                        payload.horizon, overhead)
    else:
        checkpoint = TrialCheckpoint(store, tid, overhead)
    stored = store.finished_row(tid)
    if stored is not None:  # e.g. an Optuna proposal equal to a stored trial
        checkpoint.remove()
        return metrics_of(stored, skipped=True)
    attempt = store.start_attempt(tid)
    if payload.horizon and (copied := diverged_in_trunk(store, tid, payload.horizon)):
        outcome, points = copied  # diverged in its trunk before its branch point
        for point in points:
            attempt.write_step(point)
        row = {**base_row(payload, sweep, outcome, host=host_name()),
               **length_columns(payload.config, outcome.get("params")), **provenance(payload),
               "error": None}
        written = attempt.finish(row, payload.axes)
        checkpoint.remove()
        return metrics_of(row, skipped=not written)
    config = TrialConfig.model_validate(payload.config)
    seen: list[dict[str, Any]] = []
    start = time.perf_counter()

    def report(point: dict[str, Any]) -> None:
        attempt.write_step(point)
        seen.append(point)
        if on_eval is not None:
            on_eval(point)
        if payload.stop is not None:
            if decide(payload.stop, store, int(point["step"]), point.get("eval_loss")):
                raise _Stopped

    try:
        result = run_trial(config, report=report, checkpoint=checkpoint)
    except _Stopped:  # search.stop: a result, with its last losses, that never enters lr*
        row = stopped_row(payload, seen, time.perf_counter() - start, sweep)
        written = attempt.finish(row, payload.axes)
        checkpoint.remove()
        return metrics_of(row, skipped=not written)
    except UserError as exc:  # deterministic: not retried
        attempt.discard()
        row = failure_row(payload, sweep, f"UserError: {first_line(exc)}")
        store.write_failure(row, payload.axes)
        return {**metrics_of(row), "error": row["error"]}
    row = {**trial_row(payload, result, sweep), **row_columns(checkpoint)}
    written = attempt.finish(row, payload.axes)
    checkpoint.remove()  # stored now (by this attempt or another): nothing left to resume
    return metrics_of(row, skipped=not written, resumed_from=result.resumed_from)


class _Stopped(Exception):
    """Raised from a trial's report when search.stop stops it."""


def stopped_row(payload: TrialUnit, points: list[dict[str, Any]], wall_s: float,
                sweep: str) -> dict[str, Any]:
    """The trials-table row of a trial stopped early: status `stopped`, no final loss (it
    never enters lr* as trained), its last and best eval losses, what it ran."""
    losses = [float(p["eval_loss"]) for p in points if finite(p.get("eval_loss"))]
    last = points[-1]
    tokens = int(last.get("tokens") or 0)
    outcome = {
        "status": "stopped", "diverged": False, "diverge_step": None,
        "final_eval_loss": None, "best_eval_loss": min(losses) if losses else None,
        "last_finite_loss": losses[-1] if losses else None,
        "initial_loss": losses[0] if losses else None, "steps_done": int(last["step"]),
        "tokens": tokens, "wall_time_s": wall_s,
        "tokens_per_s": tokens / wall_s if wall_s > 0 else 0.0,
    }
    return {**base_row(payload, sweep, outcome, host=host_name()), **provenance(payload),
            "error": None}


def base_row(payload: TrialUnit, sweep: str, outcome: dict[str, Any],
             host: str | None = None) -> dict[str, Any]:
    """A trials-table row (docs/results-format.md): the cell's id, sweep and axis columns,
    then `outcome` (what the run gave), then where it came from: search, host, versions and
    config. A finished trial and a failure record share this layout."""
    return {"trial_id": payload.trial_id, "sweep": sweep,
            **{k: _flat(v) for k, v in payload.columns.items()}, **outcome,
            "search": payload.search, "host": host, "versions": versions(),
            "config": canonical_json(payload.config)}


def failure_row(payload: TrialUnit, sweep: str, reason: str) -> dict[str, Any]:
    """The trials-table row of a trial that failed for good (no losses, status failed)."""
    outcome = {"status": "failed", "diverged": False, "diverge_step": None}
    return {**base_row(payload, sweep, outcome), "attempt": "", "evals": 0, "error": reason}


def trial_row(payload: TrialUnit, result: Any, sweep: str) -> dict[str, Any]:
    """The trials-table row of a finished trial (docs/results-format.md); a diverged trial's
    final and best losses are None (stored as nulls)."""
    outcome = {
        "status": result.status, "diverged": bool(result.diverged),
        "diverge_step": result.diverge_step, "final_eval_loss": result.final_eval_loss,
        "best_eval_loss": result.best_eval_loss, "last_finite_loss": result.last_finite_loss,
        "initial_loss": result.initial_loss, "max_excursion": result.max_excursion,
        "steps_above_bound": result.steps_above_bound,
        "steps_done": result.steps_done, "tokens": result.tokens,
        "wall_time_s": result.wall_time_s, "tokens_per_s": result.tokens_per_s,
        **{f"tau_{role}": tau for role, tau in getattr(result, "tau", {}).items()},
    }
    return {**base_row(payload, sweep, outcome, host=host_name()),
            **length_columns(payload.config, getattr(result, "params", None)),
            **provenance(payload),
            "error": None}


def length_columns(config: dict[str, Any], params: int | None) -> dict[str, Any]:
    """`planned_tokens` (steps x batch x seq_len of the run as configured, diverged or not),
    `params` and `tokens_per_param`."""
    t = TrainConfig.model_validate(config.get("train") or {})
    planned = t.total_steps * t.batch_size * t.seq_len
    return {"planned_tokens": planned, "params": params,
            "tokens_per_param": planned / params if params else None}


def provenance(payload: TrialUnit) -> dict[str, Any]:
    """The corpus and environment fingerprints of a trial, as JSON (the `corpus` and `env`
    columns): what two runs that disagree are compared on."""
    try:  # provenance, not a result: a data folder gone since the run must not lose it
        corpus = corpus_fingerprint(DataConfig.model_validate(payload.config["data"]))
    except Exception:
        corpus = None
    return {"corpus": None if corpus is None else json.dumps(corpus, sort_keys=True),
            "env": environment_json()}


def host_name() -> str:
    """The hostname, and inside Ray the node's id (first 8 hex digits) after a slash: two
    Ray nodes on one machine (containers, test clusters) are then told apart."""
    host = socket.gethostname()
    ray = sys.modules.get("ray")  # a Ray worker has imported it; never import it here
    try:
        if ray is not None and ray.is_initialized():
            return f"{host}/{ray.get_runtime_context().get_node_id()[:8]}"
    except Exception:  # outside Ray or an older API: the hostname alone
        pass
    return host


def _flat(value: Any) -> Any:
    """Axis values that are lists or mappings are stored as JSON text (flat columns)."""
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def metrics_of(row: dict[str, Any], skipped: bool = False,
               resumed_from: int | None = None) -> dict[str, Any]:
    """What Tune gets back; a missing final loss (a diverged trial) is NaN; `resumed_from`:
    the step this attempt resumed at from a checkpoint (None: it started at step 0)."""
    final = row.get("final_eval_loss")
    return {"trial_id": str(row["trial_id"]), "status": str(row["status"]),
            "final_eval_loss": float(final) if finite(final) else float("nan"),
            OBJECTIVE: objective(row), "skipped": skipped, "resumed_from": resumed_from}


def eval_metrics(trial: str, point: dict[str, Any]) -> dict[str, Any]:
    """What Tune gets at an eval point: the step's losses, and the objective so far (what
    Tune's metric check asks of every result); `timesteps_total` is the training step, the
    x axis Tune's loggers plot against."""
    loss = point.get("eval_loss")
    return {"trial_id": trial, **{k: v for k, v in point.items() if _scalar(v)},
            OBJECTIVE: float(loss) if finite(loss) else 1e6,
            "timesteps_total": int(point["step"])}


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def tune_trainable(tune_config: dict[str, Any], units: dict[str, TrialUnit],
                   store_location: str, sweep: str) -> None:
    """The function Ray Tune runs for each trial (wrapped by `tune.with_parameters`): a
    report at every eval point, then the trial's result (`metrics_of`) as the last one, which
    is the result the searchers (Optuna, transfer) and the driver's callbacks read."""
    from ray import tune

    payload = payload_for(tune_config, units)

    def at_eval(point: dict[str, Any]) -> None:
        tune.report(eval_metrics(payload.trial_id, point))

    tune.report(run_unit(payload, store_location, sweep, on_eval=at_eval))
