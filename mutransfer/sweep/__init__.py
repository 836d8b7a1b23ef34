"""Sweeps on Ray Tune: `mutransfer.run(spec | dict | path, ...) -> SweepResult` and
`dry_run` (mutransfer/sweep/run/driver.py).

Three rooms, each importing only the ones below it (pyproject.toml's contracts): plan/ (the
sweep file and what it expands into; pure), search/ (which trials run: the strategies behind
one seam) and run/ (Ray). The names below are looked up on first use, so that importing a
submodule (a Ray worker imports mutransfer.sweep.run.trainable) does not import the driver
and everything it needs.
"""

from __future__ import annotations

from typing import Any

# `run` itself is the room mutransfer/sweep/run/: the function is `mutransfer.run`
__all__ = ["SweepResult", "dry_run"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from mutransfer.sweep.run import driver

        return getattr(driver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
