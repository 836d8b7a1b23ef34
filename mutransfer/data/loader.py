"""`load_data(cfg)`: the DataSource a DataConfig names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from mutransfer.data.base import DataSource
from mutransfer.data.config import DataConfig

# use: read the token cache, preparing it when missing (trials, the sweep's pre-flight);
# read: read it when present, else tokenize in memory and write nothing (validate, dry runs);
# off: always tokenize on the fly (the streaming path, for benchmarks and comparisons)
CacheMode = Literal["use", "read", "off"]


def _loaders() -> dict[str, Callable[[DataConfig], DataSource]]:
    # imported here so that a source's dependencies load only when it is used
    from mutransfer.data.hf import load_hf
    from mutransfer.data.parquet import load_parquet
    from mutransfer.data.stdlib import load_stdlib
    from mutransfer.data.synthetic import load_synthetic
    from mutransfer.data.text import load_text

    return {"stdlib": load_stdlib, "parquet": load_parquet, "hf": load_hf, "text": load_text,
            "synthetic": load_synthetic}


def load_data(cfg: DataConfig, cache: CacheMode = "use") -> DataSource:
    """The source of `cfg`; UserError (one line) on a missing path, an empty or column-less
    Parquet file, a missing tokenizer or dataset. Text sources read their token cache
    (mutransfer/data/cache.py) as `cache` says; in-memory corpora are cached per process."""
    # imported here, like the sources: the cache's readers import torch and pyarrow
    from mutransfer.data.cached import CACHED_SOURCES, load_cached

    if cache != "off" and cfg.source in CACHED_SOURCES:
        import sys

        # a trial that finds no cache says so while it prepares it (once per cache)
        source = load_cached(cfg, prepare=cache == "use", out=sys.stderr)
        if source is not None:
            return source
    return _loaders()[cfg.source](cfg)


def describe(data: DataConfig | DataSource) -> str:
    """One line for progress output: source, size, tokens."""
    source = load_data(data) if isinstance(data, DataConfig) else data
    return source.description
