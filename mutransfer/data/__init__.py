"""Data sources of a trial: `load_data(DataConfig) -> DataSource`.

Sources (`data: {source: ...}`): stdlib (the default, offline: the Python standard library's
.py files), parquet (local shards with a text column, streamed), hf (a Hugging Face dataset
fetched into a local cache, then read as parquet), text (local plain-text files), synthetic
(memory and copy tasks). Each gives a DataSpec and `batches(split, batch_size, seq_len, seed,
start=0)`, an infinite deterministic iterator of (inputs, targets) that resumes at batch
`start` without replaying the ones before.

Everything but DataConfig is imported lazily, so that reading a config does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mutransfer.data.config import DataConfig

if TYPE_CHECKING:
    from mutransfer.data.base import IGNORE_INDEX, DataSource, DataSpec
    from mutransfer.data.loader import describe, load_data

__all__ = ["IGNORE_INDEX", "DataConfig", "DataSource", "DataSpec", "describe", "load_data"]

_LAZY = {"IGNORE_INDEX": "base", "DataSource": "base", "DataSpec": "base",
         "describe": "loader", "load_data": "loader"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"mutransfer.data.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
