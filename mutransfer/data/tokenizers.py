"""Tokenizers: bytes (the default, vocab 256) or a tiktoken encoding when it is available.

Every document is followed by an end-of-text token so that packed sequences show where one
document stops: tiktoken's `eot_token`, or byte 0 (NUL, which text does not contain) for bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mutransfer.errors import UserError


class Tokenizer(Protocol):
    name: str
    vocab_size: int
    eot: int

    def encode_docs(self, docs: Sequence[str | bytes]) -> np.ndarray:
        """Token ids of the documents, each followed by `eot`, as one array of dtype
        token_dtype(vocab_size) (also when `docs` is empty), ready to be held as a corpus."""
        ...

    def count_docs(self, docs: pa.Array | pa.ChunkedArray) -> int:
        """len(encode_docs(docs)) for a non-null string array, as cheaply as possible."""
        ...


def token_dtype(vocab_size: int) -> np.dtype:
    """Smallest unsigned dtype holding every id: corpora stay 1-4 bytes per token in memory."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if vocab_size <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    raise ValueError(f"vocab of {vocab_size} ids does not fit in uint32")


class ByteTokenizer:
    """UTF-8 bytes; text files are read as bytes and never decoded."""

    name = "byte"
    vocab_size = 256
    eot = 0

    def encode_docs(self, docs: Sequence[str | bytes]) -> np.ndarray:
        if not docs:
            return np.zeros(0, dtype=np.uint8)
        raw = b"\0".join(d if isinstance(d, bytes) else d.encode("utf-8") for d in docs)
        return np.frombuffer(raw + b"\0", dtype=np.uint8)

    def count_docs(self, docs: pa.Array | pa.ChunkedArray) -> int:
        # Arrow strings are UTF-8 already: their byte lengths are the token counts.
        total = pc.sum(pc.binary_length(docs)).as_py() or 0
        return int(total) + len(docs)


class TiktokenTokenizer:
    """A tiktoken Encoding (special tokens in the text are encoded as ordinary text)."""

    def __init__(self, encoding: Any):
        self.encoding = encoding
        self.name = encoding.name
        self.vocab_size = int(encoding.n_vocab)
        self.eot = int(encoding.eot_token)

    def encode_docs(self, docs: Sequence[str | bytes]) -> np.ndarray:
        texts = [d.decode("utf-8", errors="replace") if isinstance(d, bytes) else d
                 for d in docs]
        dtype = token_dtype(self.vocab_size)
        parts = []
        for ids in self.encoding.encode_ordinary_batch(texts):
            parts.append(np.asarray(ids, dtype=dtype))
            parts.append(np.array([self.eot], dtype=dtype))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    def count_docs(self, docs: pa.Array | pa.ChunkedArray) -> int:
        return len(self.encode_docs(docs.to_pylist()))


@functools.lru_cache(maxsize=8)
def make_tokenizer(name: str) -> Tokenizer:
    """`byte`, or a tiktoken encoding name; UserError when tiktoken or its files are missing."""
    if name == "byte":
        return ByteTokenizer()
    try:
        import tiktoken
    except ImportError:
        raise UserError(f"tokenizer {name!r} needs the tiktoken package: pip install tiktoken "
                        "(or use tokenizer: byte)") from None
    known = tiktoken.list_encoding_names()
    if name not in known:
        raise UserError(f"tokenizer {name!r} is not a tiktoken encoding "
                        f"(known: byte, {', '.join(known)})")
    try:
        encoding = tiktoken.get_encoding(name)
    except Exception as exc:  # tiktoken fetches the encoding file on first use
        first = str(exc).splitlines()[0][:160] if str(exc) else ""
        raise UserError(f"tiktoken could not load encoding {name!r} ({type(exc).__name__}: "
                        f"{first}); offline, its file must already be in TIKTOKEN_CACHE_DIR"
                        ) from None
    return TiktokenTokenizer(encoding)
