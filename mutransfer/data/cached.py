"""Text sources read from their token cache: no tokenizing in a trial. Parquet sources read
slices of the memory-mapped shards; stdlib and text read their two buffers into memory.

The batches are the streaming sources' own, token for token: stdlib and text sample random
windows of the same two buffers (MemorySource), parquet and hf pack the same infinite stream
(each epoch visits the row groups in the order drawn from (seed, split, epoch) and emits each
one's documents in file order) with the same packing (mutransfer/data/packing.py). Resuming
at batch `start` is arithmetic on the index's token counts.

A trial that finds no cache (the first use of a source, a node whose cache_dir another node
does not share) prepares it, once per key: the others wait for it on the cache's lock.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from mutransfer.data.base import Batch, DataSource, DataSpec, Split, check_batch_args
from mutransfer.data.cache import (
    INDEX,
    MEMORY_SOURCES,
    STREAM_SOURCES,
    TokenCache,
    locate,
    open_cache,
    read_index,
)
from mutransfer.data.config import DataConfig
from mutransfer.data.memory import MemorySource
from mutransfer.data.packing import packed_batches
from mutransfer.data.parquet import check_split_tokens, epoch_order
from mutransfer.data.prepare import prepare_cache
from mutransfer.errors import UserError

CACHED_SOURCES = MEMORY_SOURCES + STREAM_SOURCES


class CachedStream:
    """The Parquet stream of a cache: row groups as [shard, offset, count] per split."""

    def __init__(self, name: str, cache: TokenCache):
        index = cache.index
        self.name, self.cache = name, cache
        self.spec = DataSpec(kind="tokens", vocab_size=int(index["vocab_size"]), input_dim=None,
                             output_dim=int(index["vocab_size"]), loss="ce")
        self.description = index["description"]
        fields = index["unit_fields"]
        rows = [dict(zip(fields, u)) for u in index["units"]]
        self.places = {split: [[r["shard"], r[f"{split}_offset"], r[f"{split}_tokens"]]
                               for r in rows] for split in ("train", "eval")}
        self.fingerprint = fingerprint_of_cache(cache)

    def batches(self, split: Split, batch_size: int, seq_len: int, seed: int,
                start: int = 0) -> Iterator[Batch]:
        check_batch_args(split, batch_size, seq_len, start)
        if not sum(p[2] for p in self.places[split]):
            raise UserError(f"{self.name}: the {split} split has no text")
        check_split_tokens(self.name, split, sum(p[2] for p in self.places[split]), seq_len)
        read_from = functools.partial(self._stream, split, seed)
        return packed_batches(read_from, split, batch_size, seq_len, seed, start)

    def _stream(self, split: Split, seed: int, pos: int) -> Iterator[np.ndarray]:
        places = self.places[split]
        epoch, pos = divmod(pos, sum(p[2] for p in places))
        while True:
            for i in epoch_order(len(places), split, seed, epoch):
                shard, offset, count = places[i]
                if pos >= count:
                    pos -= count
                    continue
                yield self.cache.tokens([shard, offset + pos, count - pos])
                pos = 0
            epoch += 1


def memory_source(name: str, cache: TokenCache) -> MemorySource:
    """stdlib and text: the two buffers read whole into memory (as the in-memory source holds
    them; random windows gather from anonymous memory about twice as fast as from a file
    map's 4 kB pages, measured on numpy 2.4)."""
    index = cache.index
    splits = index["splits"]
    train, eval_ = (np.array(cache.tokens(splits[s])) for s in ("train", "eval"))
    source = MemorySource(name, train, eval_, int(index["vocab_size"]), index["description"])
    source.fingerprint = fingerprint_of_cache(cache)
    return source


def fingerprint_of_cache(cache: TokenCache) -> dict[str, Any]:
    """What the trials table records of the corpus: the source and its root, file count,
    bytes and content hash, the tokenizer, the tokens per split, and the cache's key."""
    index = cache.index
    if index["kind"] == "memory":
        tokens = {s: int(index["splits"][s][2]) for s in ("train", "eval")}
    else:
        fields = index["unit_fields"]
        tokens = {s: sum(int(u[fields.index(f"{s}_tokens")]) for u in index["units"])
                  for s in ("train", "eval")}
    return {"source": index["source"], "root": index.get("root"), **index["fingerprint"],
            "tokenizer": index["tokenizer"], "train_tokens": tokens["train"],
            "eval_tokens": tokens["eval"], "cache": cache.path.name}


@functools.lru_cache(maxsize=8)
def _opened(name: str, path: str, mtime_ns: int) -> DataSource:
    """One source (and its maps) per process and cache folder: the trials of a worker share."""
    index = read_index(Path(path))
    if index is None:
        raise UserError(f"token cache {path}: its {INDEX} is gone (deleted while in use); "
                        f"run again to prepare it")
    cache = TokenCache(Path(path), index)
    return memory_source(name, cache) if cache.index["kind"] == "memory" else \
        CachedStream(name, cache)


def load_cached(cfg: DataConfig, prepare: bool = True, out: TextIO | None = None,
                workers: int | None = 1) -> DataSource | None:
    """The source of `cfg` read from its token cache; when there is none, prepared now
    (`prepare`) or None (the caller tokenizes in memory instead and writes nothing)."""
    ref = locate(cfg)
    if open_cache(ref) is None:  # checks the shards' sizes too
        if not prepare:
            return None
        prepare_cache(cfg, ref, workers=workers, out=out)
    return _opened(cfg.source, str(ref.path), (ref.path / INDEX).stat().st_mtime_ns)


def corpus_fingerprint(cfg: DataConfig) -> dict[str, Any] | None:
    """The corpus fingerprint of a text source's cache (None when it has none yet); for
    generated data, the task."""
    if cfg.source not in CACHED_SOURCES:
        return {"source": cfg.source, "task": cfg.task}
    cache = open_cache(locate(cfg))
    return None if cache is None else fingerprint_of_cache(cache)
