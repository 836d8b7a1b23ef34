"""mutransfer: does a learning rate tuned on a small state-space model transfer to a large one?

The Python API (README.md, "From Python"): `run_trial` and `TrialConfig` (one trial), `run`
and `SweepResult` (a sweep on Ray), `read_tables` (a sweep's Parquet tables), `analyze`
(the transfer analysis) and `coord_check` with `CoordSettings` and `CoordResult` (the
coordinate check). They are imported on first use: `import mutransfer` stays cheap and
imports neither torch nor Ray.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "TrialConfig": "mutransfer.config",
    # mutransfer.commands.api: the modules' own, checked (run: the CLI's factory probe) or
    # leaving the caller's thread as it was (run_trial: its subnormal setting)
    "run_trial": "mutransfer.commands.api",
    "run": "mutransfer.commands.api",
    "SweepResult": "mutransfer.sweep.run.driver",
    "read_tables": "mutransfer.results.store",
    "analyze": "mutransfer.analysis",
    "coord_check": "mutransfer.coordcheck",
    "CoordResult": "mutransfer.coordcheck",
    "CoordSettings": "mutransfer.coord.settings",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
