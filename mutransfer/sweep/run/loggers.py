"""The sweep file's `loggers:` as Ray Tune's logger callbacks.

Tune gets a report at every eval point (mutransfer/sweep/run/trainable.py), so each logger sees
the whole loss curve of every trial; the Parquet store stays the record the analysis reads.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from mutransfer.errors import UserError

# logger -> the package it needs beyond Ray (tensorboard: tensorboardX, Tune's own writer)
PACKAGES = {"tensorboard": "tensorboardX", "wandb": "wandb", "mlflow": "mlflow"}


def check_loggers(loggers: list[str]) -> None:
    """A logger whose package is missing would fail once trials run: refuse it up front."""
    for name in loggers:
        package = PACKAGES.get(name)
        if package is not None and importlib.util.find_spec(package) is None:
            raise UserError(f"loggers: {name} needs the {package} package, which is not "
                            f"installed (pip install {package.lower()}), or remove it")


def logger_callbacks(loggers: list[str], sweep: str) -> list[Any]:
    """Tune callbacks for `loggers`, in the order given; wandb and mlflow log to a project
    (experiment) named after the sweep and read their usual environment (WANDB_API_KEY,
    MLFLOW_TRACKING_URI, ...)."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback

    callbacks: list[Any] = []
    for name in dict.fromkeys(loggers):  # a name given twice logs once
        if name == "tensorboard":
            callbacks.append(TBXLoggerCallback())
        elif name == "csv":
            callbacks.append(CSVLoggerCallback())
        elif name == "json":
            callbacks.append(JsonLoggerCallback())
        elif name == "wandb":
            from ray.air.integrations.wandb import WandbLoggerCallback

            callbacks.append(WandbLoggerCallback(project=sweep))
        elif name == "mlflow":
            from ray.air.integrations.mlflow import MLflowLoggerCallback

            callbacks.append(MLflowLoggerCallback(experiment_name=sweep))
    return callbacks
