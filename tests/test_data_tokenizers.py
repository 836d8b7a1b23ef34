"""Tokenizers: bytes by default; tiktoken when installed, a one-line error when not."""

from __future__ import annotations

import importlib.util

import numpy as np
import pyarrow as pa
import pytest

from mutransfer.data import DataConfig, load_data
from mutransfer.data.tokenizers import ByteTokenizer, TiktokenTokenizer, make_tokenizer, token_dtype
from mutransfer.errors import UserError

DOCS = ["plain", "", "été ünïcode ✓", "tab\tand\nnewline"]


def test_bytes_are_utf8_with_a_zero_after_each_document():
    ids = ByteTokenizer().encode_docs(DOCS)
    assert bytes(ids) == b"\0".join(d.encode() for d in DOCS) + b"\0"
    assert ids.dtype == np.uint8
    assert ByteTokenizer().encode_docs([b"raw \xff bytes"]).tolist()[-2:] == [ord("s"), 0]


def test_byte_counts_from_arrow_match_the_encoding():
    want = len(ByteTokenizer().encode_docs(DOCS))
    assert ByteTokenizer().count_docs(pa.chunked_array([DOCS[:2], DOCS[2:]])) == want
    assert ByteTokenizer().count_docs(pa.array(DOCS, pa.large_string())) == want


def test_token_dtype_is_the_smallest_that_fits():
    assert token_dtype(256) == np.uint8
    assert token_dtype(257) == token_dtype(50257) == np.uint16
    assert token_dtype(100277) == np.uint32


def test_a_tiktoken_name_without_tiktoken_says_what_to_install(no_tiktoken, tmp_path):
    with pytest.raises(UserError) as err:
        load_data(DataConfig(tokenizer="gpt2"))
    msg = str(err.value)
    assert "\n" not in msg and "pip install tiktoken" in msg and "'gpt2'" in msg


@pytest.mark.skipif(importlib.util.find_spec("tiktoken") is None, reason="tiktoken not installed")
def test_tiktoken_adapter_on_a_local_encoding():
    import tiktoken

    # a byte-level BPE with no merges, built locally: no encoding file to download
    enc = tiktoken.Encoding("bytes_test", pat_str=r"\S+|\s+",
                            mergeable_ranks={bytes([i]): i for i in range(256)},
                            special_tokens={"<|endoftext|>": 256})
    tok = TiktokenTokenizer(enc)
    assert (tok.vocab_size, tok.eot) == (257, 256)
    ids = tok.encode_docs(DOCS)
    assert ids.dtype == np.uint16
    assert ids.tolist() == [i for d in DOCS for i in [*d.encode(), 256]]
    assert tok.count_docs(pa.array(DOCS)) == len(ids)
    assert tok.encode_docs(["<|endoftext|>"]).tolist()[:-1] == list(b"<|endoftext|>")


@pytest.mark.skipif(importlib.util.find_spec("tiktoken") is None, reason="tiktoken not installed")
def test_an_unknown_tiktoken_name_lists_the_known_ones():
    make_tokenizer.cache_clear()
    with pytest.raises(UserError, match="not a tiktoken encoding .*cl100k_base"):
        make_tokenizer("no_such_encoding")


def test_a_special_tokens_text_inside_a_document_is_text_for_a_tokenizers_json(tmp_path):
    """As tiktoken's adapter reads it (above): only the end-of-text token added after each
    document ends it, not the same characters inside it."""
    pytest.importorskip("tokenizers")
    from tests.bpe import train_bpe

    make_tokenizer.cache_clear()
    tok = make_tokenizer(str(train_bpe(tmp_path / "tok.json", n_files=5)))
    ids = tok.encode_docs(["a<|endoftext|>b", "<|endoftext|>"]).tolist()
    assert ids.count(tok.eot) == 2 and ids[-1] == tok.eot
    assert len(ids) > 4  # the characters, not one token each
