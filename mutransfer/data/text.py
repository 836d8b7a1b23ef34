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
from mutransfer.data.tokenizers import ByteTokenizer, Tokenizer, make_tokenizer
from mutransfer.errors import UserError
from mutransfer.statusline import human

# byte-order marks of UTF-16 and UTF-32 (UTF-32 first: its little-endian mark starts as UTF-16's)
_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
         (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def read_text_file(name: str, path: Path, tok: Tokenizer) -> bytes | str:
    """What `tok` encodes of one text file: its bytes for the byte tokenizer (any byte is a
    token), else its text, decoded as UTF-8. UserError (one line) when it cannot be read or is
    not UTF-8-like text: a NUL byte is the byte tokenizer's end-of-text token, and UTF-16 or
    -32 text (every other byte NUL) would be trained on as a stream of document ends."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"{name}: {path}: cannot read it ({exc.strerror or exc})") from None
    enc = next((e for bom, e in _BOMS if data.startswith(bom)), None)
    if enc:
        raise UserError(f"{name}: {path}: {enc} text (it starts with a {enc} byte-order mark); "
                        f"convert it to UTF-8")
    at = data.find(b"\0")
    if at >= 0:
        raise UserError(f"{name}: {path}: a NUL byte at offset {at}: not text (binary, or "
                        f"UTF-16/32 without a byte-order mark); text files are UTF-8")
    return data if isinstance(tok, ByteTokenizer) else _utf8(name, path, data, tok)


def _utf8(name: str, path: Path, data: bytes, tok: Tokenizer) -> str:
    # strict: decoding with replacement would train on U+FFFD where each latin-1 or cp1252
    # byte was, a corpus changed without a word
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{name}: {path}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
                        f"{exc.start}), which tokenizer {tok.name} reads; convert it to UTF-8 "
                        f"(or use tokenizer: byte, which takes any bytes)") from None


def corpus_from_files(name: str, fileset: FileSet, tok: Tokenizer, eval_fraction: float,
                      split_seed: int, contents: dict[Path, bytes | str] | None = None
                      ) -> MemorySource:
    """The two buffers of the files; `contents`: the files as read_text_file gave them."""
    files = list(fileset.files)

    def _encode(part: list[Path]) -> np.ndarray:
        return tok.encode_docs([contents[f] if contents is not None else
                                read_text_file(name, f, tok) for f in part])

    if len(files) == 1:
        tokens = _encode(files)
        cut = len(tokens) - math.ceil(len(tokens) * eval_fraction)
        train, eval_ = tokens[:cut], tokens[cut:]
        how = f"1 file, its last {eval_fraction:.0%} held out"
    else:
        flags = split_keys(fileset.keys(), split_seed, eval_fraction)
        train = _encode([f for f, e in zip(files, flags) if not e])
        eval_ = _encode([f for f, e in zip(files, flags) if e])
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
