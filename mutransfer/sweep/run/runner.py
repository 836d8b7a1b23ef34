"""Running the cells that are not complete yet as trials of one Ray Tune `Tuner`.

What runs, and Tune's searcher and scheduler, come from the sweep's search strategy
(mutransfer/sweep/search/: grid, optuna, transfer; `strategy_for(search.kind)`). Each trial
writes its own parts into the store (mutransfer/sweep/run/trainable.py) and reports every eval
point to Tune, whose folder (experiment state, the `loggers:` files) is STORAGE/tune/; the
driver only watches (progress line) and records trials that failed for good.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from mutransfer.errors import UserError, first_line
from mutransfer.results.fs import join
from mutransfer.results.schema import axis_types
from mutransfer.results.store import Store
from mutransfer.sweep.plan.cells import Plan
from mutransfer.sweep.plan.packing import check_fits_in, gpus_for
from mutransfer.sweep.run.cluster import (
    Capacity,
    check_nodes_see,
    is_remote_address,
    ray_session,
)
from mutransfer.sweep.run.loggers import logger_callbacks
from mutransfer.sweep.run.progress import Progress
from mutransfer.sweep.run.trainable import TrialUnit, tune_trainable
from mutransfer.sweep.search.base import Work
from mutransfer.sweep.search.objective import OBJECTIVE
from mutransfer.sweep.search.registry import strategy_for

# Ray Tune's own folder under the store (its experiment state and the loggers' files); the
# store's tables never read it
TUNE_FOLDER = "tune"


@dataclass
class RunOptions:
    address: str | None = None
    num_cpus: int | None = None
    num_gpus: int | None = None
    out: TextIO = field(default_factory=lambda: sys.stdout)


@dataclass
class RunOutcome:
    to_run: int
    complete: int = 0
    diverged: int = 0
    failed: int = 0
    stopped: int = 0  # ended early by the search's stopping rule: finished, not complete
    # of `complete`: trials that ended finding their result stored already (a twin: an
    # earlier attempt's or a copied store's part), so this run stored nothing for them. Kept
    # inside `complete` so that sums of outcomes (horizon.run_phases) still count them as
    # finished; SweepResult counts them apart.
    skipped: int = 0
    elapsed_s: float = 0.0

    @property
    def unfinished(self) -> int:
        """Trials that neither finished nor failed: the run was stopped (Ctrl-C)."""
        return max(0, self.to_run - self.complete - self.diverged - self.stopped - self.failed)


def units_of(plan: Plan, work: Work) -> dict[str, TrialUnit]:
    """What each trial needs on its worker, keyed by trial id (grid) or group id (adaptive).
    `axes`: the types of the sweep's extra axis columns, the same in every part it writes."""
    axes = axis_types(u.columns for u in [*plan.cells, *plan.groups])
    kind = plan.spec.search.kind
    stops = strategy_for(kind).stop_contexts(plan)
    units = {c.trial_id: TrialUnit(c.config, c.columns, c.trial_id, kind, axes,
                                   horizon=work.horizon.get(c.trial_id),
                                   stop=stops.get(c.trial_id))
             for c in work.cells}
    for g in work.groups:
        units[g.group_id] = TrialUnit(g.config, g.columns, "", kind, axes)
    return units


class ResourcesFor:
    """Per-trial resources by width (`tune.with_resources` calls this with a trial's config)."""

    def __init__(self, plan: Plan, work: Work):
        res = plan.spec.resources
        self.by_key: dict[str, dict[str, float]] = {}
        for unit, key in [(c, c.trial_id) for c in work.cells] + \
                         [(g, g.group_id) for g in work.groups]:
            self.by_key[key] = {"cpu": res.cpus_for(unit.width), "gpu": gpus_for(res, unit.config)}

    def __call__(self, config: dict[str, Any]) -> dict[str, float]:
        return self.by_key[config.get("trial_id") or config["group"]]

    def check(self, cap: Capacity) -> None:
        """A trial no node can host would wait forever: refuse it in one line instead."""
        for need in self.by_key.values():
            for kind, have, field_name in (("cpu", cap.cpus, "cpus_per_trial"),
                                           ("gpu", cap.gpus, "gpus_per_trial")):
                if need[kind] > have + 1e-9:
                    raise UserError(f"resources.{field_name}: a trial needs {need[kind]:g} "
                                    f"{kind.upper()}s but {cap.largest} has {have:g}")


def execute(plan: Plan, store: Store, work: Work, options: RunOptions) -> RunOutcome:
    """Run `work` on Ray (a local instance unless `options.address`) and wait for it."""
    outcome = RunOutcome(to_run=work.n_trials)
    start = time.monotonic()
    with ray_session(options.address, options.num_cpus, options.num_gpus) as cap:
        resources = ResourcesFor(plan, work)
        resources.check(cap)
        if options.address not in (None, "local"):  # a run here: checked before Ray started
            try:
                check_fits_in([u.config for u in [*work.cells, *work.groups]], cap.memory,
                              cap.largest)
            except UserError as exc:
                raise UserError(f"{plan.source}: {exc}") from None
        if is_remote_address(options.address):
            check_nodes_see(store.location)
        # a strategy that decides as it goes knows no total up front (its searcher reports)
        progress = Progress(None if work.state else work.n_trials, out=options.out)
        tuner, watcher = _tuner(plan, store, work, resources, progress)
        try:
            _fit(tuner, watcher, options)
        finally:
            progress.close()
    outcome.complete, outcome.diverged = progress.complete, progress.diverged
    outcome.failed, outcome.stopped = progress.failed, progress.stopped
    outcome.complete += progress.skipped  # finished, though not by this run (RunOutcome)
    outcome.skipped = progress.skipped
    if not plan.adaptive:  # the store is the truth (a stop can skip Tune's callbacks)
        done = store.scan(repair=False).complete
        found = [c.trial_id for c in work.cells if c.trial_id in done]
        outcome.skipped = sum(1 for t in found if t in watcher.skipped)
        rows = [done[t] for t in found if t not in watcher.skipped]
        outcome.diverged = sum(1 for r in rows if r.get("status") == "diverged")
        outcome.stopped = sum(1 for r in rows if r.get("status") == "stopped")
        outcome.complete = len(found) - outcome.diverged - outcome.stopped
    if work.state is not None:  # known now: what the search started, and what it still wants
        outcome.to_run = work.state.started_count() + len(work.state.to_run())
    outcome.elapsed_s = time.monotonic() - start
    return outcome


def _fit(tuner: Any, watcher: Any, options: RunOptions) -> None:
    """Run the Tuner. Tune's own files live under STORAGE/tune: on a full disk they can be
    left truncated, and after the last trial has ended Tune fails reading them back into a
    ResultGrid, which the sweep never uses (the store and the callbacks are the truth). Such
    an error, after the experiment ended, is a note; any earlier one is raised."""
    try:
        tuner.fit()
    except Exception as exc:
        if not watcher.ended:
            raise
        print(f"note: Tune could not read back its own files under {TUNE_FOLDER}/ after the "
              f"run ({type(exc).__name__}: {first_line(exc)}); the store holds every result",
              file=options.out)


def _tuner(plan: Plan, store: Store, work: Work, resources: ResourcesFor, progress: Progress):
    """The Tuner of this run and its progress callback."""
    from ray import tune  # Ray and Tune's callbacks: only when a sweep runs

    from mutransfer.sweep.run.callbacks import TuneProgress

    spec = plan.spec
    units = units_of(plan, work)
    trainable = tune.with_parameters(tune_trainable, units=units, store_location=store.location,
                                     sweep=spec.name)
    trainable = tune.with_resources(trainable, resources)
    setup = strategy_for(spec.search.kind).tune_setup(plan, work, progress)
    tune_config = tune.TuneConfig(search_alg=setup.search_alg, scheduler=setup.scheduler,
                                  num_samples=setup.num_samples,
                                  **({"metric": OBJECTIVE, "mode": "min"}
                                     if setup.search_alg is not None else {}))
    # Actors are reused between trials of equal resources: a new worker process per trial
    # costs ~2 CPU-s (measured with Ray 2.60 on 2 cores: 20 trials of 0.2 s took 20.2 s one
    # process per trial, 4.9 s with reuse).
    tune_config.reuse_actors = True
    tune_config.max_concurrent_trials = spec.resources.max_concurrent
    tune_config.trial_name_creator = _trial_name
    tune_config.trial_dirname_creator = _trial_name
    run_config = tune.RunConfig(
        name=tune_run_name(), storage_path=join(store.location, TUNE_FOLDER), verbose=0,
        failure_config=tune.FailureConfig(max_failures=spec.retries),
        callbacks=[watcher := TuneProgress(progress, store, units, spec.name),
                   *logger_callbacks(spec.loggers, spec.name)])
    return tune.Tuner(trainable, param_space=setup.param_space, tune_config=tune_config,
                      run_config=run_config), watcher


def tune_run_name() -> str:
    """Tune's experiment folder of this run, under STORAGE/tune/: one per run, so that a
    re-run's trials (a retry of a failed cell) do not write over the last run's logs."""
    return time.strftime("run-%Y%m%dT%H%M%SZ", time.gmtime())


def _trial_name(trial: Any) -> str:
    config = trial.config
    return str(config.get("trial_id") or f"{config.get('group')}-{trial.trial_id}")
