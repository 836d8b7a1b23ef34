"""Before a sweep runs: does each data source give batches of the shape its trials ask for?

A source that cannot (a text file shorter than one sequence, an eval split too small) would
fail every trial of the sweep, each after a worker started and loaded the data; here it fails
once, on the driver, before any trial.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from mutransfer.data.base import SPLITS
from mutransfer.data.cache import CacheRef, locate, open_cache
from mutransfer.data.config import DataConfig
from mutransfer.data.loader import load_data
from mutransfer.data.prepare import prepare_cache
from mutransfer.errors import UserError
from mutransfer.paths import folder_problem


def check_batches(data: DataConfig, shapes: list[tuple[int, int]]) -> None:
    """Draw one batch of each split for each (batch_size, seq_len); UserError when the source
    cannot give one or gives another shape. Reads the token cache when there is one, else
    tokenizes what the batches need in memory: nothing is written."""
    source = load_data(data, cache="read")
    for batch_size, seq_len in shapes:
        for split in SPLITS:
            inputs, targets = next(source.batches(split, batch_size, seq_len, seed=0))
            for name, tensor in (("inputs", inputs), ("targets", targets)):
                if tuple(tensor.shape[:2]) != (batch_size, seq_len):
                    raise UserError(f"the {split} split gives {name} of shape "
                                    f"{tuple(tensor.shape)}, not batch_size x seq_len = "
                                    f"({batch_size}, {seq_len})")


def check_cache_folders(datas: list[dict[str, Any]]) -> None:
    """Each text source whose token cache is not prepared yet has a cache folder the sweep
    can write it into (before: validate and --dry-run said ok, the sweep refused). Nothing
    is created."""
    from mutransfer.data.cached import CACHED_SOURCES  # imports torch (see prepare_caches)

    for raw in datas:
        cfg = DataConfig.model_validate(raw)
        if cfg.source not in CACHED_SOURCES:
            continue
        ref = locate(cfg)
        if open_cache(ref) is None and (problem := folder_problem(ref.root)):
            raise UserError(f"token cache {ref.root}: {problem}; set data.cache_dir to a "
                            "writable folder (the sweep tokenizes its data there before the "
                            "first trial)")


def shapes_by_data(configs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list]]:
    """The distinct data configs of trial configs, each with its distinct (batch_size,
    seq_len) pairs, in first-seen order."""
    found: dict[str, tuple[dict[str, Any], list[tuple[int, int]]]] = {}
    for config in configs:
        key = repr(sorted(config["data"].items()))
        shape = (int(config["train"]["batch_size"]), int(config["train"]["seq_len"]))
        entry = found.setdefault(key, (config["data"], []))
        if shape not in entry[1]:
            entry[1].append(shape)
    return list(found.values())


def prepare_caches(datas: list[dict[str, Any]], out: TextIO | None = None,
                   workers: int | None = None, written: list[CacheRef] | None = None,
                   took: dict[str, float] | None = None, announce: bool = True) -> list[str]:
    """Tokenize each distinct text source into its token cache unless it is there (the
    sweep's pre-flight, `mutransfer prepare`); the cache folder of each, in order.
    `written`: gets each cache this call wrote as it is written (also when a later source is
    refused), so that a caller whose own check then fails can remove them again; `took`: the
    seconds each took, by folder; `announce`: each progress line ends saying its cache is
    ready (False: the caller says so once its own checks passed)."""
    # imported here: data.cached (for CACHED_SOURCES) imports torch, this module does not
    from mutransfer.data.cached import CACHED_SOURCES

    folders = []
    for raw in datas:
        cfg = DataConfig.model_validate(raw)
        if cfg.source not in CACHED_SOURCES:
            continue
        ref = locate(cfg)
        if open_cache(ref) is None:
            start = time.monotonic()
            _, wrote = prepare_cache(cfg, ref, workers=workers, out=out, announce=announce)
            if wrote and written is not None:
                written.append(ref)
            if wrote and took is not None:
                took[str(ref.path)] = time.monotonic() - start
        folders.append(str(ref.path))
    return folders
