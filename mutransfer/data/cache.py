"""The token cache: each text source tokenized once, into memory-mapped shards plus an index.

Where: `<data.cache_dir>/tokens/<key>/` (default `$MUTRANSFER_DATA_DIR/tokens`, else
`~/.cache/mutransfer/tokens`). The key hashes what the tokens are a function of: the source's
files (names relative to the source's root, sizes, modification times), the tokenizer (its
name, or a JSON file's content hash), the split (eval_fraction, split_seed) and, for Parquet,
the text column. A changed file, tokenizer or split is another key: a cache is never stale.

Layout of one cache folder:
    index.json        format, identity, dtype, vocab, end-of-text id, description, the
                      corpus fingerprint (files, bytes, content hash), each shard's token
                      count, largest token id and checksum, and where each split's tokens lie
                      in the shards (its shape: `CacheIndex`)
    shard-NNNNN.bin   token ids (uint8/uint16/uint32, the smallest that holds the vocab),
                      native byte order, no header: np.memmap reads them as they are

Writing is atomic: a preparer writes into a hidden folder beside the target and renames it
into place once the index is written, so a reader sees a whole cache or none (a killed
prepare leaves only the hidden folder, removed by the next prepare on that host). A reader
checks the index's shape and each shard's size when it opens a cache, and a shard's checksum
when it first maps it (once per process): a changed byte is refused, never trained on. Two
preparers of one key (two nodes, two trials) are safe: a lock file makes the second wait on
filesystems with locks, and wherever it does not, each writes its own folder and the rename
that comes second finds the first one's cache in place and drops its own.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mutransfer.data.config import DataConfig
from mutransfer.data.files import FileSet, data_dir, resolve_files
from mutransfer.data.tokenizers import tokenizer_identity
from mutransfer.errors import UserError, format_validation_error
from mutransfer.paths import missing_folders

# 2: each shard's checksum and largest token id in the index. The format is part of the key,
# so a cache of format 1 (no checksums) is not found and is prepared again: its shards could
# not be verified, and a re-prepare costs one tokenization, once.
FORMAT = 2
INDEX = "index.json"
MEMORY_SOURCES = ("stdlib", "text")  # held whole per split, sampled as random windows
STREAM_SOURCES = ("parquet", "hf")  # streamed by row group, packed in order


def tokens_root(cfg: DataConfig) -> Path:
    """The folder that holds the token caches of `cfg`'s cache_dir."""
    base = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else data_dir()
    return base / "tokens"


def shard_name(i: int) -> str:
    return f"shard-{i:05d}.bin"


def source_files(cfg: DataConfig) -> FileSet:
    """The files of a text source (an hf dataset is fetched first when it is not cached)."""
    # a source's module is imported only for that source: stdlib and hf import torch (through
    # the in-memory and Parquet readers), which the cache itself does not need
    if cfg.source == "stdlib":
        from mutransfer.data.stdlib import stdlib_files

        return stdlib_files()
    if cfg.source == "hf":
        from mutransfer.data.hf import hf_files

        return hf_files(cfg)
    suffix = ".parquet" if cfg.source == "parquet" else None
    return resolve_files(cfg.path or "", cfg.source, suffix)


def identity(cfg: DataConfig, files: FileSet) -> dict[str, Any]:
    """What the cached tokens are a function of (hashed into the key; kept in the index)."""
    stamps = []
    for path, key in zip(files.files, files.keys()):
        stat = path.stat()
        stamps.append([key, stat.st_size, stat.st_mtime_ns])
    ident: dict[str, Any] = {
        "format": FORMAT, "source": cfg.source, "files": stamps,
        "tokenizer": tokenizer_identity(cfg.tokenizer),
        "eval_fraction": cfg.eval_fraction, "split_seed": cfg.split_seed}
    if cfg.source in STREAM_SOURCES:
        ident["text_column"] = cfg.text_column
    return ident


def key_of(ident: dict[str, Any]) -> str:
    text = json.dumps(ident, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


@dataclass(frozen=True)
class CacheRef:
    """Where the cache of one source would be, found without reading the source."""

    root: Path
    key: str
    identity: dict[str, Any]
    files: FileSet

    @property
    def path(self) -> Path:
        return self.root / self.key

    def exists(self) -> bool:
        return (self.path / INDEX).is_file()


def locate(cfg: DataConfig) -> CacheRef:
    """The cache of `cfg` (which may not exist yet); UserError when the source's files are
    missing. Costs a listing and a stat of each file."""
    if cfg.source not in MEMORY_SOURCES + STREAM_SOURCES:
        raise ValueError(f"source {cfg.source} has no token cache")
    files = source_files(cfg)
    ident = identity(cfg, files)
    return CacheRef(tokens_root(cfg), key_of(ident), ident, files)


# -- the index ------------------------------------------------------------------------------

CHECKSUM_BYTES = 16  # blake2b-128: a changed shard goes unnoticed with odds 2^-128
READ_BLOCK = 1 << 23  # bytes read at a time when checksumming a shard


class ShardEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: int = Field(ge=0)
    max_id: int = Field(ge=-1)  # the largest token id in the shard; -1 when it is empty
    checksum: str = Field(pattern=f"^[0-9a-f]{{{2 * CHECKSUM_BYTES}}}$")  # of its bytes


class CacheIndex(BaseModel):
    """The shape of index.json: what a reader relies on, checked before anything is mapped."""

    model_config = ConfigDict(extra="allow")

    format: Literal[2]  # FORMAT
    kind: Literal["memory", "stream"]
    dtype: str
    vocab_size: int = Field(gt=0)
    eot: int | None = None
    description: str
    fingerprint: dict[str, Any]
    source: str
    tokenizer: str
    shards: list[ShardEntry] = Field(min_length=1)
    splits: dict[Literal["train", "eval"], list[int]] | None = None  # memory: [shard, at, n]
    unit_fields: list[str] | None = None  # stream: the columns of `units`
    units: list[list[Any]] | None = None

    @field_validator("dtype")
    @classmethod
    def _unsigned(cls, value: str) -> str:
        try:
            dtype = np.dtype(value)
        except TypeError:
            raise ValueError(f"{value!r} is not a numpy dtype") from None
        if dtype.kind != "u":
            raise ValueError(f"{value!r} is not an unsigned integer type")
        return value

    def problem(self) -> str | None:
        """What the fields say against one another (None: nothing)."""
        if self.kind == "memory" and (self.splits is None or set(self.splits) != {"train",
                                                                                  "eval"}):
            return "a memory cache needs splits.train and splits.eval"
        if self.kind == "stream" and (self.unit_fields is None or self.units is None):
            return "a stream cache needs unit_fields and units"
        top = max(s.max_id for s in self.shards)
        if top >= self.vocab_size:
            return (f"token id {top} in the shards, but vocab_size is {self.vocab_size} "
                    f"(an index edited by hand, or of another tokenizer)")
        return None


def fix_hint(path: Path) -> str:
    return (f"prepare it again (`mutransfer prepare SWEEP_FILE --force`) or delete {path}")


def read_index(path: Path) -> dict[str, Any] | None:
    """The index of the cache folder `path`, its shape checked; None when there is none;
    UserError (one line, with the fix) when it is unreadable or of the wrong shape."""
    try:
        index = json.loads((path / INDEX).read_text())
    # no cache; NotADirectory: cache_dir is a file, which prepare names (it cannot create
    # the folder) instead of calling a cache there damaged
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as exc:
        raise UserError(f"token cache {path}: unreadable index ({exc}); "
                        f"{fix_hint(path)}") from None
    if isinstance(index, dict) and isinstance(index.get("format"), int) and \
            index["format"] != FORMAT:  # a cache folder copied from another version
        raise UserError(f"token cache {path}: {INDEX}: format {index['format']}, this version "
                        f"reads {FORMAT}; {fix_hint(path)}")
    try:
        problem = CacheIndex.model_validate(index).problem()
    except ValidationError as exc:
        problem = format_validation_error(exc)
    if problem:
        raise UserError(f"token cache {path}: {INDEX}: {problem}; {fix_hint(path)}")
    return index


class Checksum:
    """A shard's checksum, fed as its bytes are written (prepare) or read (verify)."""

    def __init__(self) -> None:
        self._h = hashlib.blake2b(digest_size=CHECKSUM_BYTES)
        self.max_id = -1

    def update(self, ids: np.ndarray) -> None:
        self._h.update(memoryview(np.ascontiguousarray(ids)).cast("B"))
        if len(ids):
            self.max_id = max(self.max_id, int(ids.max()))

    def hexdigest(self) -> str:
        return self._h.hexdigest()

    def entry(self, tokens: int) -> dict[str, Any]:
        return {"tokens": tokens, "max_id": self.max_id, "checksum": self.hexdigest()}


def file_checksum(file: Path, dtype: np.dtype) -> Checksum:
    """The checksum and largest id of a shard file, as `Checksum` gave them for what was
    written (one read of the file; READ_BLOCK is a multiple of every token size)."""
    checksum = Checksum()
    with open(file, "rb") as f:
        while block := f.read(READ_BLOCK):
            checksum.update(np.frombuffer(block, dtype=dtype))
    return checksum


class TokenCache:
    """An opened cache: its index and its shards, memory-mapped read-only on first use (each
    checked against its checksum then)."""

    def __init__(self, path: Path, index: dict[str, Any]):
        self.path = path
        self.index = index
        self.dtype = np.dtype(index["dtype"])
        self._maps: dict[int, np.ndarray] = {}

    def shard(self, i: int) -> np.ndarray:
        if i not in self._maps:
            entry = self.index["shards"][i]
            n = int(entry["tokens"])
            file = self.path / shard_name(i)
            found = file_checksum(file, self.dtype)
            if found.hexdigest() != entry["checksum"]:
                raise UserError(f"token cache {self.path}: {file.name} does not match its "
                                f"checksum (changed since it was prepared); "
                                f"{fix_hint(self.path)}")
            if found.max_id >= int(self.index["vocab_size"]):  # an index edited to match
                raise UserError(f"token cache {self.path}: {file.name} holds token id "
                                f"{found.max_id}, but vocab_size is "
                                f"{self.index['vocab_size']}; {fix_hint(self.path)}")
            # np.memmap cannot map an empty file: an empty shard is an empty array
            self._maps[i] = (np.zeros(0, self.dtype) if n == 0 else
                             np.memmap(file, dtype=self.dtype, mode="r", shape=(n,)))
        return self._maps[i]

    def tokens(self, where: list[int]) -> np.ndarray:
        """[shard, offset, count] -> that slice of the shard (a view of the map)."""
        shard, offset, count = where
        return self.shard(shard)[offset:offset + count]

    @property
    def fingerprint(self) -> dict[str, Any]:
        return dict(self.index["fingerprint"])


def open_cache(ref: CacheRef) -> TokenCache | None:
    """The cache at `ref`, or None when there is none; UserError when it is damaged (an index
    of the wrong shape, a shard of another size than its index says)."""
    index = read_index(ref.path)
    if index is None:
        return None
    itemsize = np.dtype(index["dtype"]).itemsize
    for i, shard in enumerate(index["shards"]):
        file = ref.path / shard_name(i)
        want = int(shard["tokens"]) * itemsize
        have = file.stat().st_size if file.is_file() else -1
        if have != want:
            raise UserError(f"token cache {ref.path}: {file.name} has {max(have, 0)} bytes, "
                            f"its index says {want}; {fix_hint(ref.path)}")
    return TokenCache(ref.path, index)


# -- writing --------------------------------------------------------------------------------

def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _tmp_prefix(key: str) -> str:
    return f".{key}.tmp-{socket.gethostname()}-"


def remove_stale(root: Path, key: str) -> None:
    """Hidden folders of preparers of `key` on this host whose process has ended (killed)."""
    prefix = _tmp_prefix(key)
    for entry in root.glob(f"{prefix}*") if root.is_dir() else []:
        pid = entry.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def make_folders(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; those this call created, deepest first (on
    an OSError, none: the ones made so far are removed again)."""
    created: list[Path] = []
    try:
        for each in reversed(missing_folders(folder)):
            try:
                each.mkdir()
            except FileExistsError:  # made meanwhile by another preparer: not ours to remove
                continue
            created.insert(0, each)
    except OSError:
        remove_empty(created)
        raise
    return created


def remove_empty(folders: list[Path]) -> None:
    """Remove those of `folders` that are empty, deepest first. One that is not empty stays:
    another preparer made its lock or its cache there meanwhile."""
    for folder in sorted(folders, key=lambda f: len(f.absolute().parts), reverse=True):
        with contextlib.suppress(OSError):
            os.rmdir(folder)


@contextlib.contextmanager
def preparing(ref: CacheRef) -> Iterator[Path | None]:
    """Hold the key's lock and give a fresh hidden folder to write the cache into, or None
    when the cache exists (another preparer finished while this one waited). On a clean
    exit the folder is renamed into place; on an error it is removed, and so are the
    folders above it that this call created (a refused source leaves no trace)."""
    try:
        created = make_folders(ref.root)
    except OSError as exc:
        raise UserError(f"token cache: cannot create {ref.root} ({exc.strerror or exc}); set "
                        f"data.cache_dir to a writable folder") from None
    try:
        with _locked(ref.root / f".{ref.key}.lock"):
            if ref.exists():
                yield None
                return
            remove_stale(ref.root, ref.key)
            tmp = ref.root / f"{_tmp_prefix(ref.key)}{os.getpid()}-{uuid.uuid4().hex[:8]}"
            tmp.mkdir()
            try:
                yield tmp
                publish(tmp, ref.path)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:  # a refusal or a Ctrl-C alike: the lock file and tmp are gone
        remove_empty(created)
        raise


def discard(ref: CacheRef) -> bool:
    """Remove the cache of `ref` (`prepare --force`), under its lock: a preparer waiting on it
    then writes it anew. A process that has its shards mapped keeps reading the old files.
    Whether there was one."""
    if not ref.root.is_dir():
        return False
    with _locked(ref.root / f".{ref.key}.lock"):
        if not ref.path.exists():
            return False
        gone = ref.root / f"{_tmp_prefix(ref.key)}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.rename(ref.path, gone)  # out of sight at once, then deleted
        shutil.rmtree(gone, ignore_errors=True)
        return True


def publish(tmp: Path, target: Path) -> None:
    """Rename the written folder into place; a cache already there (written by a preparer
    that did not see the lock) wins, and this one is dropped by the caller."""
    try:
        os.rename(tmp, target)
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not (target / INDEX).is_file():
            raise


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock on `path` (waits), and the lock file removed on release, so that a
    preparer leaves nothing behind but its cache (a bad file, refused, leaves nothing at all).
    A waiter whose file was removed while it waited holds a lock on a file no longer there: it
    takes the lock again on the file now at `path` (the usual unlink-on-release protocol).
    Where the filesystem has no locks, no wait: the rename in `publish` keeps two writers
    correct anyway."""
    while True:
        f = open(path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX)
        except OSError:
            pass
        if _same_file(f, path):
            break
        f.close()
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # before the lock is released: no one can take it on this file
        f.close()


def _same_file(f, path: Path) -> bool:
    """Whether the open file `f` is still the one at `path` (not removed, not replaced)."""
    try:
        return os.path.samestat(os.fstat(f.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


def write_index(folder: Path, index: dict[str, Any]) -> None:
    """The index last: with it, the folder is a complete cache (files flushed to disk first,
    so a machine crash after the rename cannot leave shards shorter than the index says)."""
    for shard in folder.glob("shard-*.bin"):
        with open(shard, "rb") as f:
            os.fsync(f.fileno())
    with open(folder / INDEX, "w") as f:
        json.dump(index, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
