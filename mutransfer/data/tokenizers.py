"""Tokenizers: bytes (the default, vocab 256), a tiktoken encoding, or a Hugging Face
`tokenizers` JSON file (`tokenizer: path/to/tokenizer.json`); the last two need the `data`
extra (`pip install 'mutransfer[data]'`).

Every document is followed by an end-of-text token so that packed sequences show where one
document stops: tiktoken's `eot_token`, the JSON file's end-of-text special token (one of
EOT_NAMES), or byte 0 (NUL, which text does not contain) for bytes.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mutransfer.errors import UserError

# tiktoken's published encodings: a name that is none of them, with tiktoken not installed,
# is more likely a typo than an encoding (cost/vocab.py has their vocabularies)
TIKTOKEN_NAMES = ("gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base")
# special tokens that end a document, in the order they are looked for in a tokenizer.json
EOT_NAMES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "[EOS]", "<|eot_id|>")


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


def as_texts(docs: Sequence[str | bytes]) -> list[str]:
    """The documents as text for a tokenizer of text: bytes decoded strictly (a file that is
    not UTF-8 is refused where it is read, mutransfer/data/text.py: replacement characters
    would change the corpus without a word)."""
    return [d.decode("utf-8") if isinstance(d, bytes) else d for d in docs]


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
        texts = as_texts(docs)
        dtype = token_dtype(self.vocab_size)
        parts = []
        for ids in self.encoding.encode_ordinary_batch(texts):
            parts.append(np.asarray(ids, dtype=dtype))
            parts.append(np.array([self.eot], dtype=dtype))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    def count_docs(self, docs: pa.Array | pa.ChunkedArray) -> int:
        return len(self.encode_docs(docs.to_pylist()))


class JsonTokenizer:
    """A Hugging Face `tokenizers` file (what `Tokenizer.save` writes), special tokens in the
    text encoded as ordinary text, no tokens added around a document but the end-of-text one."""

    def __init__(self, path: str, tokenizer: Any):
        # a special token's text inside a document ("<|endoftext|>" in a web page) is text,
        # as tiktoken's encode_ordinary reads it: matched as the token, it would end the
        # document there (add_special_tokens=False only leaves out the template's tokens)
        tokenizer.encode_special_tokens = True
        self.tokenizer = tokenizer
        self.name = path
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        # ids index the embedding, so the vocab is one more than the largest id, as the cost
        # model counts it (cost/vocab.py): get_vocab_size counts the tokens, fewer where the
        # ids skip some (a WordLevel file with ids 0, 7, 9, 20 counts 4, and emitted ids up
        # to 20: a cache refused as "edited by hand", an embedding indexed out of range)
        self.vocab_size = max(int(tokenizer.get_vocab_size(with_added_tokens=True)),
                              max(vocab.values(), default=-1) + 1)
        found = [vocab[t] for t in EOT_NAMES if t in vocab]
        if not found:
            raise UserError(f"tokenizer {path}: no end-of-text token (one of "
                            f"{', '.join(EOT_NAMES)}); add one as a special token")
        self.eot = int(found[0])

    def encode_docs(self, docs: Sequence[str | bytes]) -> np.ndarray:
        texts = as_texts(docs)
        dtype = token_dtype(self.vocab_size)
        encode = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        try:
            encoded = encode(texts, add_special_tokens=False)
        except Exception as exc:  # tokenizers raises a bare Exception (a Unigram model
            # without an unknown token meeting a character it has no piece for, ...): one line
            # naming the tokenizer, not a traceback from inside the package
            first = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            raise UserError(f"tokenizer {self.name} cannot encode the data ({first}); give "
                            f"it an unknown token or train it on this data (or use "
                            f"tokenizer: byte)") from None
        parts = []
        for enc in encoded:
            parts.append(np.asarray(enc.ids, dtype=dtype))
            parts.append(np.array([self.eot], dtype=dtype))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    def count_docs(self, docs: pa.Array | pa.ChunkedArray) -> int:
        return len(self.encode_docs(docs.to_pylist()))


def is_json_path(name: str) -> bool:
    return name.endswith(".json")


def tokenizer_identity(name: str) -> str:
    """What names a tokenizer's output, without loading it: `byte`, the tiktoken encoding
    (with tiktoken's version when installed), or the content hash of a JSON file (a file
    retrained at the same path is another tokenizer)."""
    if name == "byte":
        return "byte"
    if is_json_path(name):
        path = Path(name).expanduser()
        if not path.is_file():
            raise UserError(f"tokenizer {name}: no such file")
        # "text-specials": special tokens in the text read as text (caches made before that
        # read them as the tokens: another key, so they are made again, not reused)
        return f"json:{hashlib.sha256(path.read_bytes()).hexdigest()[:32]}:text-specials"
    try:
        from importlib.metadata import version

        return f"tiktoken:{name}:{version('tiktoken')}"
    except Exception:  # not installed: the name alone (the encodings are fixed files)
        return f"tiktoken:{name}"


def _json_tokenizer(name: str) -> JsonTokenizer:
    path = Path(name).expanduser()
    if not path.is_file():
        raise UserError(f"tokenizer {name}: no such file")
    try:
        from tokenizers import Tokenizer as HFTokenizer
    except ImportError:
        raise UserError(f"tokenizer {name} needs the tokenizers package: pip install "
                        "'mutransfer[data]' (or use tokenizer: byte)") from None
    try:
        loaded = HFTokenizer.from_file(str(path))
    except Exception as exc:  # a file that is not a tokenizers JSON
        first = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise UserError(f"tokenizer {name}: not a tokenizers JSON file ({first})") from None
    return JsonTokenizer(name, loaded)


@functools.lru_cache(maxsize=8)
def make_tokenizer(name: str) -> Tokenizer:
    """`byte`, a tiktoken encoding name, or a tokenizers JSON path; UserError when the
    package or the encoding's files are missing."""
    if name == "byte":
        return ByteTokenizer()
    if is_json_path(name):
        return _json_tokenizer(name)
    try:
        import tiktoken
    except ImportError:
        if name not in TIKTOKEN_NAMES:  # a typo ("bytes", "Byte") more likely than an encoding
            raise UserError(f"tokenizer {name!r}: not byte, a tokenizers JSON file (a path "
                            f"ending in .json) or a tiktoken encoding ({', '.join(TIKTOKEN_NAMES)}"
                            f"; another one needs the tiktoken package: pip install tiktoken)"
                            ) from None
        raise UserError(f"tokenizer {name!r} needs the tiktoken package: pip install tiktoken "
                        "or 'mutransfer[data]' (or use tokenizer: byte)") from None
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
