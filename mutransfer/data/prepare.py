"""Tokenizing a text source into its token cache (mutransfer/data/cache.py), once.

What is stored is exactly what the streaming sources would produce, so that a trial reading
the cache draws the same batches as one tokenizing on the fly:
- stdlib and text: the train and eval token buffers of `corpus_from_files` (files split by
  a hash of their names, or one file cut at its last eval_fraction of tokens), one shard.
- parquet and hf: per row group, the split's documents in file order (what the stream emits
  of it), one shard per Parquet file, written by a pool of processes (one file each at a
  time); the index keeps every row group's place, so the epoch order is drawn as before.
The corpus fingerprint (file count, bytes, a content hash of every file) is taken on the way.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, TextIO

from mutransfer.data.cache import (
    FORMAT,
    MEMORY_SOURCES,
    CacheRef,
    Checksum,
    TokenCache,
    open_cache,
    preparing,
    shard_name,
    write_index,
)
from mutransfer.data.config import DataConfig
from mutransfer.data.tokenizers import make_tokenizer, token_dtype
from mutransfer.errors import UserError
from mutransfer.statusline import StatusLine, human

HASH_BLOCK = 1 << 23
# Below this many bytes of Parquet a process pool costs more than it saves (starting a
# worker took about 1.5 s on 2 cores; one process tokenizes tens of MB in that time)
POOL_BYTES = 1 << 26

# (files done, files, tokens so far); a writer calls it first with 0 done once the source passed
# its checks, which is when the work is announced (a bad source is one error line, nothing else)
Progress = Callable[[int, int, int], None]


def file_digest(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while block := f.read(HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def fingerprint_of(keys: list[str], sizes: list[int], digests: list[str]) -> dict[str, Any]:
    """Files, bytes and one hash over (name, content hash) of every file, in order."""
    h = hashlib.blake2b(digest_size=16)
    for key, digest in zip(keys, digests):
        h.update(f"{key}\0{digest}\n".encode())
    return {"files": len(keys), "bytes": int(sum(sizes)), "hash": h.hexdigest()}


def prepare_cache(cfg: DataConfig, ref: CacheRef, workers: int | None = None,
                  out: TextIO | None = None, announce: bool = True) -> tuple[TokenCache, bool]:
    """The cache of `ref`, tokenized now unless it exists; (cache, whether this call wrote
    it). `workers`: processes for Parquet files (default: the CPUs, at most one per file);
    `out`: where a progress line goes (None: quiet); `announce`: end it with a line saying
    the cache is ready (False: the caller says so once its own checks of the cache passed:
    `mutransfer prepare` removes a cache too small for a batch, which it had announced as
    prepared)."""
    line = _ProgressLine(out, cfg.source, len(ref.files.files), announce)
    with preparing(ref) as folder:
        if folder is not None:
            write = _memory if cfg.source in MEMORY_SOURCES else _stream
            index = write(cfg, ref, folder, workers, line.update)
            index.update(format=FORMAT, identity=ref.identity, source=cfg.source,
                         tokenizer=cfg.tokenizer, root=str(ref.files.root))
            write_index(folder, index)
    cache = open_cache(ref)
    assert cache is not None  # written above, or by the preparer this one waited for
    line.close(cache, written=folder is not None)
    return cache, folder is not None


def _memory(cfg: DataConfig, ref: CacheRef, folder: Path, workers: int | None,
            progress: Progress) -> dict[str, Any]:
    """stdlib, text: the two buffers the in-memory source holds, train then eval."""
    # the readers (data.text, data.parquet, data.hf, data.memory) import torch: imported where
    # used, so that importing this module does not
    from mutransfer.data.text import corpus_from_files, read_text_file

    tok = make_tokenizer(cfg.tokenizer)
    files = ref.files
    sizes = [p.stat().st_size for p in files.files]
    if not any(sizes):  # what corpus_from_files refuses, before the work is announced
        raise UserError(f"{cfg.source}: the files are empty ({files.where})")
    # read (and checked: readable, not binary or UTF-16, UTF-8 for a tokenizer of text) before
    # the work is announced
    contents = {f: read_text_file(cfg.source, f, tok) for f in files.files}
    progress(0, len(files.files), 0)
    corpus = corpus_from_files(cfg.source, files, tok, cfg.eval_fraction, cfg.split_seed,
                               contents)
    train, eval_ = corpus.buffers["train"], corpus.buffers["eval"]
    checksum = Checksum()
    with open(folder / shard_name(0), "wb") as f:
        for ids in (train, eval_):
            f.write(ids.tobytes())
            checksum.update(ids)
    progress(len(files.files), len(files.files), len(train) + len(eval_))
    digests = [file_digest(p) for p in files.files]
    return {"kind": "memory", "dtype": train.dtype.str, "vocab_size": tok.vocab_size,
            "eot": tok.eot, "description": corpus.description,
            "fingerprint": fingerprint_of(files.keys(), sizes, digests),
            "shards": [checksum.entry(len(train) + len(eval_))],
            "splits": {"train": [0, 0, len(train)], "eval": [0, len(train), len(eval_)]}}


def _stream(cfg: DataConfig, ref: CacheRef, folder: Path, workers: int | None,
            progress: Progress) -> dict[str, Any]:
    """parquet, hf: one shard per file, each row group's train tokens then its eval tokens."""
    # imported here: the Parquet and hf readers import torch (see _memory)
    from mutransfer.data.parquet import ParquetSource, describe_units, shard_units

    tok = make_tokenizer(cfg.tokenizer)
    files = ref.files
    units = shard_units(files, cfg.source, cfg.text_column)  # checks every file's schema
    prefix = ""
    if cfg.source == "hf":
        from mutransfer.data.hf import hf_prefix

        prefix = hf_prefix(cfg)
    desc = f"{cfg.source}: {prefix}{describe_units(units, len(files.files), tok, cfg)}"
    ParquetSource(cfg.source, units, tok, cfg, desc)  # both splits get documents, or UserError
    progress(0, len(files.files), 0)
    jobs = [(i, path, [u for u in units if u.path == path], cfg.text_column, cfg.split_seed,
             cfg.eval_fraction, cfg.tokenizer, folder / shard_name(i), cfg.source)
            for i, path in enumerate(files.files)]
    if sum(p.stat().st_size for p in files.files) < POOL_BYTES:
        workers = 1
    results = _run_jobs(jobs, workers, progress)
    for k, split in enumerate(("train", "eval")):
        if not sum(result[3][k] for result in results):
            # rows fell in the split, but every text of them is null or empty: a cache of it
            # could never give a batch (or would give end-of-text tokens alone), so none is
            # written (statistics caught most such files before; a file without them here)
            raise UserError(f"{cfg.source}: the {split} split has no text (its "
                            f"{cfg.text_column!r} values are all null or empty) in "
                            f"{files.where}")
    rows, shards, digests = [], [], []
    for (i, _, file_units, *_), (counts, digest, shard, _) in zip(jobs, results):
        offset = 0
        for unit, (n_train, n_eval) in zip(file_units, counts):
            rows.append([unit.key, unit.row_group, unit.first_row, unit.n_rows, i,
                         offset, n_train, offset + n_train, n_eval])
            offset += n_train + n_eval
        shards.append({"tokens": offset, **shard})
        digests.append(digest)
    return {"kind": "stream", "dtype": token_dtype(tok.vocab_size).str,
            "vocab_size": tok.vocab_size, "eot": tok.eot, "description": desc,
            "fingerprint": fingerprint_of(files.keys(), [p.stat().st_size for p in files.files],
                                          digests),
            "shards": shards,
            "unit_fields": ["key", "row_group", "first_row", "rows", "shard", "train_offset",
                            "train_tokens", "eval_offset", "eval_tokens"],
            "units": rows}


def _run_jobs(jobs: list[tuple], workers: int | None, progress: Progress) -> list[tuple]:
    """tokenize_file over the jobs, in a process pool when more than one worker is useful."""
    n = min(len(jobs), workers or os.cpu_count() or 1)
    results: list[Any] = [None] * len(jobs)
    done, tokens = 0, 0

    def collect(i: int, result: tuple) -> None:
        nonlocal done, tokens
        results[i] = result
        done += 1
        tokens += sum(a + b for a, b in result[0])
        progress(done, len(jobs), tokens)

    if n <= 1:
        for i, job in enumerate(jobs):
            collect(i, tokenize_file(*job))
        return results
    ctx = multiprocessing.get_context("spawn")  # not fork: the parent may hold torch's threads
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_quiet_worker) as pool:
        futures = {pool.submit(tokenize_file, *job): i for i, job in enumerate(jobs)}
        for future in as_completed(futures):
            collect(futures[future], future.result())
    return results


def _quiet_worker() -> None:
    # one thread per worker process: the pool is the parallelism (tokenizers' Rust pool and
    # tiktoken's threads would otherwise each take every core)
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def tokenize_file(i: int, path: Path, units: list, text_column: str, split_seed: int,
                  eval_fraction: float, tokenizer: str, out: Path, source: str
                  ) -> tuple[list[tuple[int, int]], str, dict[str, Any], tuple[int, int]]:
    """Write one Parquet file's shard; ([(train, eval) tokens per row group], the file's
    content hash, the shard's largest id and checksum, the (train, eval) tokens that are not
    end-of-text: the text). `source`: what errors are named by."""
    # imported here: the Parquet reader imports torch (see _memory)
    from mutransfer.data.parquet import encode_texts, unit_texts

    tok = make_tokenizer(tokenizer)
    counts = []
    text = [0, 0]
    checksum = Checksum()
    with open(out, "wb") as f:
        for unit in units:
            sizes = []
            for k, split in enumerate(("train", "eval")):
                n = 0
                for texts in unit_texts(unit, split, text_column, split_seed, eval_fraction):
                    ids = encode_texts(tok, texts, unit, source, text_column)
                    f.write(ids.tobytes())
                    checksum.update(ids)
                    n += len(ids)
                    text[k] += len(ids) - len(texts)  # one end-of-text token per document
                sizes.append(n)
            counts.append((sizes[0], sizes[1]))
    return counts, file_digest(path), {"max_id": checksum.max_id,
                                       "checksum": checksum.hexdigest()}, (text[0], text[1])


class _ProgressLine:
    """`preparing tokens of parquet: 3/14 files, 12.3M tokens, 41 s` on one line."""

    def __init__(self, out: TextIO | None, source: str, n_files: int, announce: bool = True):
        self.status = StatusLine(out) if out is not None else None
        self.announce = announce
        self.source, self.n_files = source, n_files
        self.start = time.monotonic()
        self.last = 0.0
        self.announced = False

    def update(self, done: int, total: int, tokens: int) -> None:
        """The first call (0 done: the source passed its checks) announces the work."""
        now = time.monotonic()
        if self.status is not None and not self.announced:
            self.announced = True
            self.last = now
            self.status.draw(f"preparing the token cache of {self.source} ({self.n_files} "
                             "files) ...")
            return
        if self.status is None or (now - self.last < 1.0 and done < total):
            return
        self.last = now
        self.status.draw(f"preparing the token cache of {self.source}: {done}/{total} files, "
                         f"{human(tokens)} tokens, {now - self.start:.0f} s")

    def close(self, cache: TokenCache, written: bool) -> None:
        if self.status is None:
            return
        if not self.announce:
            self.status.close()
            return
        total = sum(int(s["tokens"]) for s in cache.index["shards"])
        what = (f"prepared in {time.monotonic() - self.start:.1f} s" if written else
                "already prepared")
        self.status.message(f"token cache of {self.source}: {human(total)} tokens, {what}: "
                            f"{cache.path}")
        self.status.close()
