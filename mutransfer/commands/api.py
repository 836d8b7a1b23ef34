"""The Python API's `mutransfer.run`: what `mutransfer sweep FILE` checks before it runs, then
the driver's run (mutransfer/sweep/run/driver.py). The factory probe imports the user's model
code, which the sweep layer below may not do (it knows trials only as configs)."""

from __future__ import annotations

from typing import TextIO

from mutransfer.commands.sweep import probe_factories
from mutransfer.sweep.run import driver


def run(spec, *, storage: str | None = None, address: str | None = None,
        num_cpus: int | None = None, num_gpus: int | None = None,
        max_cells: int | None = None, out: TextIO | None = None):
    """`mutransfer.run`: `mutransfer.sweep.run.driver.run` (its arguments, its SweepResult),
    after the check `mutransfer sweep` makes of a `package.module:factory` model (imported
    and probed before the store is created or Ray starts: before, the API created the store
    and every trial failed on a factory that does not import)."""
    probe_factories(spec, storage)
    return driver.run(spec, storage=storage, address=address, num_cpus=num_cpus,
                      num_gpus=num_gpus, max_cells=max_cells, out=out)
