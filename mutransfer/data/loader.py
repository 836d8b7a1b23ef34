"""`load_data(cfg)`: the DataSource a DataConfig names."""

from __future__ import annotations

from collections.abc import Callable

from mutransfer.data.base import DataSource
from mutransfer.data.config import DataConfig


def _loaders() -> dict[str, Callable[[DataConfig], DataSource]]:
    # imported here so that a source's dependencies load only when it is used
    from mutransfer.data.hf import load_hf
    from mutransfer.data.parquet import load_parquet
    from mutransfer.data.stdlib import load_stdlib
    from mutransfer.data.synthetic import load_synthetic
    from mutransfer.data.text import load_text

    return {"stdlib": load_stdlib, "parquet": load_parquet, "hf": load_hf, "text": load_text,
            "synthetic": load_synthetic}


def load_data(cfg: DataConfig) -> DataSource:
    """The source of `cfg`; UserError (one line) on a missing path, an empty or column-less
    Parquet file, a missing tokenizer or dataset. In-memory corpora are cached per process."""
    return _loaders()[cfg.source](cfg)


def describe(data: DataConfig | DataSource) -> str:
    """One line for progress output: source, size, tokens."""
    source = load_data(data) if isinstance(data, DataConfig) else data
    return source.description
