"""Sweeps on Ray Tune: `run(spec | dict | path, ...) -> SweepResult` (mutransfer/sweep/driver.py).

The names are looked up on first use, so that importing a submodule (a Ray worker imports
mutransfer.sweep.trainable) does not import the driver and everything it needs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SweepResult", "dry_run", "run"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from mutransfer.sweep import driver

        return getattr(driver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
