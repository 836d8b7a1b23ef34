"""The Python API's entry points that differ from the modules' own: what a notebook or script
calls, checked and left as the CLI would not need to leave it (the CLI's process ends).

`run`: what `mutransfer sweep FILE` checks before it runs, then the driver's run
(mutransfer/sweep/run/driver.py). The factory probe imports the user's model code, which the
sweep layer below may not do (it knows trials only as configs).

`run_trial`: a trial in the caller's process, with subnormal floats flushed while it trains
and the calling thread set back afterwards (mutransfer/denormals.py). Before, a notebook that
ran one computed with subnormals flushed to zero from then on (numpy's float32 1e-39 * 1 was
0). Nothing here imports the coordinate check: its figures' module sets matplotlib's backend
when imported (mutransfer/analysis/plotstyle.py), which `mutransfer.run` must not do."""

from __future__ import annotations

from typing import TextIO

from mutransfer import train
from mutransfer.commands.sweep import probe_factories
from mutransfer.config import TrialConfig
from mutransfer.denormals import denormals_flushed
from mutransfer.sweep.run import driver


def run(spec: driver.SpecLike, *, storage: str | None = None, address: str | None = None,
        num_cpus: int | None = None, num_gpus: int | None = None,
        max_cells: int | None = None, out: TextIO | None = None) -> driver.SweepResult:
    """`mutransfer.run`: `mutransfer.sweep.run.driver.run` (its arguments, its SweepResult),
    after the check `mutransfer sweep` makes of a `package.module:factory` model (imported
    and probed before the store is created or Ray starts: before, the API created the store
    and every trial failed on a factory that does not import)."""
    probe_factories(spec, storage)
    return driver.run(spec, storage=storage, address=address, num_cpus=num_cpus,
                      num_gpus=num_gpus, max_cells=max_cells, out=out)


def run_trial(config: TrialConfig, report: train.Report | None = None,
              checkpoint: train.Checkpointer | None = None) -> train.TrialResult:
    """`mutransfer.run_trial`: `mutransfer.train.run_trial` (its arguments, its TrialResult),
    this thread's subnormal setting as it was afterwards."""
    with denormals_flushed():
        return train.run_trial(config, report, checkpoint)
