"""Local plain-text files (e.g. wikitext-103 raw), held in memory as one token buffer per split.

Split: with several files, by file (a stable hash of the path relative to the folder or glob
root against eval_fraction; each side gets at least one file). A single file is cut in two
contiguous blocks: its last eval_fraction of tokens is eval (as nanoGPT does for Shakespeare).
Loaded once per process and configuration.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np

from mutransfer.data.config import DataConfig
from mutransfer.data.files import FileSet, resolve_files
from mutransfer.data.memory import MemorySource
from mutransfer.data.splits import split_keys
from mutransfer.data.tokenizers import Tokenizer, make_tokenizer
from mutransfer.errors import UserError
from mutransfer.statusline import human


def _encode(tok: Tokenizer, files: list[Path]) -> np.ndarray:
    return tok.encode_docs([f.read_bytes() for f in files])


def corpus_from_files(name: str, fileset: FileSet, tok: Tokenizer, eval_fraction: float,
                      split_seed: int) -> MemorySource:
    files = list(fileset.files)
    if len(files) == 1:
        tokens = _encode(tok, files)
        cut = len(tokens) - math.ceil(len(tokens) * eval_fraction)
        train, eval_ = tokens[:cut], tokens[cut:]
        how = f"1 file, its last {eval_fraction:.0%} held out"
    else:
        flags = split_keys(fileset.keys(), split_seed, eval_fraction)
        train = _encode(tok, [f for f, e in zip(files, flags) if not e])
        eval_ = _encode(tok, [f for f, e in zip(files, flags) if e])
        how = f"{len(files)} files ({len(files) - sum(flags)} train / {sum(flags)} eval)"
    if len(train) + len(eval_) <= len(files):  # nothing but end-of-text tokens
        raise UserError(f"{name}: the files are empty ({fileset.where})")
    desc = (f"{name}: {how}, {human(len(train))} train + {human(len(eval_))} eval tokens, "
            f"tokenizer {tok.name} (vocab {tok.vocab_size})")
    return MemorySource(name, train, eval_, tok.vocab_size, desc)


@functools.lru_cache(maxsize=2)
def _cached(stamp: tuple, root: str, tokenizer: str, eval_fraction: float,
            split_seed: int) -> MemorySource:
    fileset = FileSet(Path(root), tuple(Path(p) for p, _, _ in stamp))
    return corpus_from_files("text", fileset, make_tokenizer(tokenizer), eval_fraction,
                             split_seed)


def load_text(cfg: DataConfig) -> MemorySource:
    fileset = resolve_files(cfg.path or "", "text")
    # keyed by size and mtime too, so an edited file is read again
    stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in fileset.files)
    return _cached(stamp, str(fileset.root), cfg.tokenizer, cfg.eval_fraction, cfg.split_seed)
