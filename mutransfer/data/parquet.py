"""Local Parquet shards with a text column (the FineWeb layout), streamed, never loaded whole.

Split by document: row r of shard k is eval when a stable hash of (k's path relative to the
glob root, r) falls below eval_fraction (mutransfer/data/splits.py), so the split is disjoint,
the same on every machine, and independent of how the shards are grouped into row groups.

Stream of a split: each epoch visits every row group in an order drawn from (seed, split,
epoch) and emits the split's documents of that row group in file order, each followed by the
end-of-text token; epochs repeat forever. It is read 4096 rows at a time, so memory holds one
slice of one row group plus one shuffle chunk (mutransfer/data/packing.py).

Resuming at batch `start` needs the token count of the row groups before it: with the byte
tokenizer that is a sum of UTF-8 lengths computed by Arrow (no tokenizing); with tiktoken the
skipped row groups are tokenized but not packed. Counts are cached per process, and once a
whole epoch has been counted, skipped epochs cost nothing. Encoded row groups are kept in memory
up to TOKEN_CACHE_BYTES (64 MiB) per process, so a small corpus is read from disk once.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mutransfer.data.base import Batch, DataSpec, Split, check_batch_args, rng_for
from mutransfer.data.config import DataConfig
from mutransfer.data.files import FileSet, resolve_files
from mutransfer.data.packing import packed_batches
from mutransfer.data.splits import rows_in_eval
from mutransfer.data.tokenizers import ByteTokenizer, Tokenizer, make_tokenizer, token_dtype
from mutransfer.errors import UserError, first_line
from mutransfer.statusline import human

READ_ROWS = 4096
_EPOCH_TAG = 1  # keeps the epoch-order generators apart from the chunk-shuffle ones
_COUNTS: dict[tuple, int] = {}  # token counts of (row group, split, tokenizer, ...) per process
# Tokens of row groups already encoded, up to a budget, shared by the trials of a process: a
# small corpus is read from disk once, and trials that start alike share their first reads.
_TOKENS: dict[tuple, np.ndarray] = {}
TOKEN_CACHE_BYTES = 1 << 26


@dataclass(frozen=True)
class Unit:
    """One row group of one shard: the unit of reading, ordering and counting."""

    path: Path
    key: str  # the shard's path relative to the root: names its rows in the split hash
    row_group: int
    first_row: int  # index in the shard of the row group's first row
    n_rows: int
    stamp: tuple[int, int]  # file size and mtime: a rewritten shard is counted again


def _open(path: Path, name: str, text_column: str) -> pq.ParquetFile:
    if path.stat().st_size == 0:
        raise UserError(f"{name}: {path}: empty file (0 bytes), not a Parquet file")
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for bad files
        raise UserError(f"{name}: {path}: not a readable Parquet file ({first_line(exc)})"
                        ) from None
    schema = pf.schema_arrow
    if text_column not in schema.names:
        raise UserError(f"{name}: {path}: no {text_column!r} column (columns: "
                        f"{', '.join(schema.names) or 'none'}); set data.text_column")
    typ = schema.field(text_column).type
    if not _is_text(typ.value_type if pa.types.is_dictionary(typ) else typ):
        raise UserError(f"{name}: {path}: column {text_column!r} holds {typ}, not strings")
    return pf


def _is_text(typ: pa.DataType) -> bool:
    return pa.types.is_string(typ) or pa.types.is_large_string(typ) or \
        pa.types.is_string_view(typ)


def shard_units(fileset: FileSet, name: str, text_column: str) -> list[Unit]:
    """Row groups of every shard, checking each file's schema; UserError when none has rows."""
    units = []
    nulls = 0  # rows whose text the files' statistics say is null
    textless = 0  # rows whose text they say is null or empty
    for path, key in zip(fileset.files, fileset.keys()):
        meta = _open(path, name, text_column).metadata
        stat = path.stat()
        first = 0
        for rg in range(meta.num_row_groups):
            n = meta.row_group(rg).num_rows
            if n:
                units.append(Unit(path, key, rg, first, n, (stat.st_size, stat.st_mtime_ns)))
                rg_nulls = _null_count(meta.row_group(rg), text_column)
                nulls += rg_nulls
                textless += n if rg_nulls == n or _all_empty(meta.row_group(rg),
                                                             text_column) else rg_nulls
            first += n
    where = fileset.root if len(fileset.files) > 1 else fileset.files[0]
    if not units:
        what = "file has" if len(fileset.files) == 1 else f"{len(fileset.files)} files have"
        raise UserError(f"{name}: {where}: the {what} no rows (empty Parquet)")
    rows = sum(u.n_rows for u in units)
    if nulls == rows:  # a stream of no text: refused here, not after a whole tokenizing pass
        raise UserError(f"{name}: {where}: every {text_column!r} value is null ({rows} rows): "
                        f"no text")
    if textless == rows:  # "" everywhere: a stream of end-of-text tokens alone, as empty
        raise UserError(f"{name}: {where}: every {text_column!r} value is empty or null "
                        f"({rows} rows): no text")
    return units


def _all_empty(row_group: pq.RowGroupMetaData, text_column: str) -> bool:
    """Whether the row group's statistics say that every non-null text of the column is ""
    (its largest value is the empty string; False when it has no statistics)."""
    stats = _text_stats(row_group, text_column)
    try:
        return bool(stats is not None and stats.has_min_max and stats.max in ("", b""))
    except Exception:  # statistics pyarrow cannot decode: no evidence either way
        return False


def _null_count(row_group: pq.RowGroupMetaData, text_column: str) -> int:
    """Nulls of the column in a row group by its statistics (0 when it has none)."""
    stats = _text_stats(row_group, text_column)
    return int(stats.null_count) if stats is not None and stats.has_null_count else 0


def _text_stats(row_group: pq.RowGroupMetaData, text_column: str):
    """The statistics of the text column in a row group (None without them or the column)."""
    for j in range(row_group.num_columns):
        col = row_group.column(j)
        if col.path_in_schema == text_column:
            return col.statistics
    return None


def epoch_order(n_units: int, split: Split, seed: int, epoch: int) -> np.ndarray:
    """The order in which an epoch of the split's stream visits the row groups."""
    return rng_for(seed, split, epoch, _EPOCH_TAG).permutation(n_units)


def split_mask(unit: Unit, split: Split, offset: int, n: int, split_seed: int,
               eval_fraction: float) -> np.ndarray:
    """Which of the unit's rows offset..offset+n-1 belong to `split`."""
    is_eval = rows_in_eval(unit.key, split_seed, unit.first_row + offset, n, eval_fraction)
    return is_eval if split == "eval" else ~is_eval


def unit_texts(unit: Unit, split: Split, text_column: str, split_seed: int,
               eval_fraction: float) -> Iterator[pa.Array]:
    """The split's non-null texts of a row group, READ_ROWS rows at a time, in file order:
    what the stream emits of this unit (and what the token cache stores of it)."""
    pf = pq.ParquetFile(unit.path)
    offset = 0
    for rb in pf.iter_batches(batch_size=READ_ROWS, row_groups=[unit.row_group],
                              columns=[text_column]):
        col = rb.column(0)
        if pa.types.is_dictionary(col.type):  # strings stored as a dictionary (categorical)
            col = col.dictionary_decode()
        mask = split_mask(unit, split, offset, len(col), split_seed, eval_fraction)
        offset += len(col)
        texts = pc.drop_null(col.filter(pa.array(mask)))
        if len(texts):
            yield texts


def encode_texts(tok: Tokenizer, texts: pa.Array, unit: Unit, name: str,
                 text_column: str) -> np.ndarray:
    """The tokens of some of a unit's texts (what the stream emits of them, and the cache
    stores); UserError when a text holds a NUL byte, the byte tokenizer's end-of-text token,
    which would cut its document in two (text files are refused for it too, data/text.py).
    The check counts the zeros of the tokens just made: no second read of the data."""
    ids = tok.encode_docs(texts.to_pylist())
    if isinstance(tok, ByteTokenizer) and len(ids) - np.count_nonzero(ids) > len(texts):
        row = first_nul_row(unit, text_column)
        raise UserError(f"{name}: {unit.path}: row {row} (in row group {unit.row_group}): its "
                        f"{text_column!r} value holds a NUL byte, the byte tokenizer's "
                        f"end-of-text token; remove the NUL bytes from that column (or use a "
                        f"tiktoken or tokenizers tokenizer, to which NUL is a character)")
    return ids


def first_nul_row(unit: Unit, text_column: str) -> int:
    """The index in its file of the unit's first row whose text holds a NUL byte (a second
    read of the row group, made only to name the row in a refusal)."""
    col = pq.ParquetFile(unit.path).read_row_group(unit.row_group,
                                                   columns=[text_column]).column(0)
    if pa.types.is_dictionary(col.type):  # a chunked array has no dictionary_decode
        col = col.cast(col.type.value_type)
    return unit.first_row + pc.index(pc.match_substring(col, "\0"), True).as_py()


class ParquetSource:
    def __init__(self, name: str, units: list[Unit], tok: Tokenizer, cfg: DataConfig,
                 description: str):
        self.name = name
        self.units = units
        self.tok = tok
        self.text_column = cfg.text_column
        self.eval_fraction = cfg.eval_fraction
        self.split_seed = cfg.split_seed
        self.spec = DataSpec(kind="tokens", vocab_size=tok.vocab_size, input_dim=None,
                             output_dim=tok.vocab_size, loss="ce")
        self.description = description
        self._epoch_tokens: dict[str, int] = {}
        self._check_both_splits()

    def batches(self, split: Split, batch_size: int, seq_len: int, seed: int,
                start: int = 0) -> Iterator[Batch]:
        check_batch_args(split, batch_size, seq_len, start)
        self._check_tokens(split, seq_len)
        read_from = functools.partial(self._stream, split, seed)
        return packed_batches(read_from, split, batch_size, seq_len, seed, start)

    # -- the split -----------------------------------------------------------------------
    def _mask(self, unit: Unit, split: Split, offset: int, n: int) -> np.ndarray:
        return split_mask(unit, split, offset, n, self.split_seed, self.eval_fraction)

    def _check_both_splits(self) -> None:
        """Fail at load, not mid-training, when a split would get no document."""
        total = sum(u.n_rows for u in self.units)
        for split in ("train", "eval"):
            if not any(self._mask(u, split, 0, u.n_rows).any() for u in self.units):
                raise UserError(f"{self.name}: no document falls in the {split} split ({total} "
                                f"rows, eval_fraction {self.eval_fraction}); use more rows")

    def _check_tokens(self, split: Split, seq_len: int) -> None:
        """UserError when the split's whole stream is shorter than one sequence, or is
        end-of-text tokens alone (every text of it empty: Parquet files without statistics
        pass shard_units' check, and the stream was a run of end-of-text tokens, which the
        token cache refuses: validate said ok, the sweep refused). Counts row groups only
        until there are enough tokens and some text: one of a real corpus (its count is
        cached and the first batch reads it anyway)."""
        total = text = 0
        for unit in self.units:
            tokens, docs = self._sizes(unit, split)
            total, text = total + tokens, text + tokens - docs
            if total > seq_len and text:
                return
        if not text:
            raise UserError(f"{self.name}: the {split} split has no text (its "
                            f"{self.text_column!r} values are all null or empty)")
        check_split_tokens(self.name, split, total, seq_len)

    # -- reading -------------------------------------------------------------------------
    def _texts(self, unit: Unit, split: Split) -> Iterator[pa.Array]:
        return unit_texts(unit, split, self.text_column, self.split_seed, self.eval_fraction)

    def _count_key(self, unit: Unit, split: Split) -> tuple:
        return (str(unit.path), unit.stamp, unit.row_group, self.text_column, self.tok.name,
                self.split_seed, self.eval_fraction, split)

    def _count(self, unit: Unit, split: Split) -> int:
        return self._sizes(unit, split)[0]

    def _sizes(self, unit: Unit, split: Split) -> tuple[int, int]:
        """(tokens, documents) of the unit's split, counted once per process (the documents
        under the key plus "docs", so that clearing _COUNTS forgets both)."""
        key = self._count_key(unit, split)
        docs_key = (*key, "docs")
        if key not in _COUNTS or docs_key not in _COUNTS:
            tokens = docs = 0
            for texts in self._texts(unit, split):
                tokens, docs = tokens + self.tok.count_docs(texts), docs + len(texts)
            _COUNTS[key], _COUNTS[docs_key] = tokens, docs
        return _COUNTS[key], _COUNTS[docs_key]

    def _encode(self, unit: Unit, split: Split) -> Iterator[np.ndarray]:
        key = self._count_key(unit, split)
        if key in _TOKENS:
            yield _TOKENS[key]
            return
        parts, docs = [], 0
        for texts in self._texts(unit, split):
            parts.append(encode_texts(self.tok, texts, unit, self.name, self.text_column))
            docs += len(texts)
            yield parts[-1]
        _COUNTS[key], _COUNTS[(*key, "docs")] = sum(len(p) for p in parts), docs
        size = sum(p.nbytes for p in parts)
        if sum(t.nbytes for t in _TOKENS.values()) + size <= TOKEN_CACHE_BYTES:
            empty = np.zeros(0, token_dtype(self.tok.vocab_size))
            _TOKENS[key] = np.concatenate(parts) if parts else empty

    def _order(self, split: Split, seed: int, epoch: int) -> list[Unit]:
        return [self.units[i] for i in epoch_order(len(self.units), split, seed, epoch)]

    def _stream(self, split: Split, seed: int, pos: int) -> Iterator[np.ndarray]:
        """The split's tokens from token `pos` of the infinite stream on."""
        epoch = 0
        if self._epoch_tokens.get(split):
            epoch, pos = divmod(pos, self._epoch_tokens[split])
        while True:
            seen = 0  # tokens of this epoch, skipped or yielded
            for unit in self._order(split, seed, epoch):
                if pos > 0:
                    n = self._count(unit, split)
                    if pos >= n:
                        pos, seen = pos - n, seen + n
                        continue
                for tokens in self._encode(unit, split):
                    seen += len(tokens)
                    if pos >= len(tokens):
                        pos -= len(tokens)
                        continue
                    yield tokens[pos:]
                    pos = 0
            epoch += 1
            if seen == 0:
                raise UserError(f"{self.name}: the {split} split has no text")
            if pos > 0:  # the whole epoch was skipped, so `seen` is its size: jump epochs
                self._epoch_tokens[split] = seen
                epoch, pos = epoch + pos // seen, pos % seen


def check_split_tokens(name: str, split: Split, tokens: int, seq_len: int) -> None:
    """A split of fewer than seq_len + 1 tokens is refused, as the in-memory sources refuse
    it (data/memory.py): its stream would repeat the same few tokens within each sequence,
    which a model learns to copy (before: accepted, and an eval split of 63 tokens at
    seq_len 1024 scored the copy)."""
    if tokens < seq_len + 1:
        more = "more documents" + (" or a larger eval_fraction" if split == "eval" else "")
        raise UserError(f"{name}: the {split} split has {tokens} tokens, fewer than seq_len + "
                        f"1 = {seq_len + 1}; use {more}")


def describe_units(units: list[Unit], n_files: int, tok: Tokenizer, cfg: DataConfig) -> str:
    rows = sum(u.n_rows for u in units)
    size = sum({u.path: u.stamp[0] for u in units}.values())
    return (f"{n_files} Parquet files, {human(rows)} documents in {len(units)} row groups, "
            f"{human(size)}B on disk, {cfg.eval_fraction:.0%} of documents held out, "
            f"tokenizer {tok.name} (vocab {tok.vocab_size})")


def parquet_source(name: str, fileset: FileSet, cfg: DataConfig, prefix: str = "") -> ParquetSource:
    tok = make_tokenizer(cfg.tokenizer)
    units = shard_units(fileset, name, cfg.text_column)
    desc = f"{name}: {prefix}{describe_units(units, len(fileset.files), tok, cfg)}"
    return ParquetSource(name, units, tok, cfg, desc)


def load_parquet(cfg: DataConfig) -> ParquetSource:
    return parquet_source("parquet", resolve_files(cfg.path or "", "parquet", ".parquet"), cfg)
