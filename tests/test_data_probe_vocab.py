"""A tokenizers JSON file whose ids skip some: the data's vocab must hold its largest id.

The vocab of a token source is the number of embedding rows the model gets, so it must exceed
every id the tokenizer emits. `get_vocab_size` counts tokens, not ids: a WordLevel file with
ids 0, 7, 9, 20 counts 4. Taken as the vocab, the streamed batches held ids up to 20 for a
model of 4 rows (an index error mid-trial), and the token cache was written and then refused
as "edited by hand, prepare it again", which preparing again could not fix.
"""

from __future__ import annotations

import itertools

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from mutransfer.cost.vocab import tokenizer_vocab
from mutransfer.data import DataConfig, load_data
from mutransfer.data.tokenizers import make_tokenizer

IDS = {"[UNK]": 0, "doc": 7, "alpha": 9, "<|endoftext|>": 20}


def gapped_tokenizer(path) -> str:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(IDS, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(path))
    return str(path)


def shards(folder) -> str:
    folder.mkdir()
    texts = [f"doc alpha word{i} alpha doc" for i in range(400)]
    pq.write_table(pa.table({"text": texts}), folder / "a.parquet", row_group_size=100)
    return str(folder)


def test_the_vocab_is_one_more_than_the_largest_id(tmp_path):
    """21 rows for ids up to 20, as the cost model counts the same file."""
    name = gapped_tokenizer(tmp_path / "gapped.json")
    tok = make_tokenizer(name)
    assert tok.vocab_size == 21 == tokenizer_vocab(name)
    assert tok.eot == 20


@pytest.mark.parametrize("cache", ["off", "use"])
def test_every_batch_id_is_below_the_vocab_streamed_or_cached(tmp_path, cache):
    """Both the streaming path and the token cache give ids the model's embedding holds; the
    cache is prepared and read without a refusal."""
    cfg = DataConfig(source="parquet", path=shards(tmp_path / "shards"),
                     tokenizer=gapped_tokenizer(tmp_path / "gapped.json"),
                     cache_dir=str(tmp_path / "cache"))
    source = load_data(cfg, cache=cache)
    for split in ("train", "eval"):
        for inputs, targets in itertools.islice(source.batches(split, 4, 8, seed=0), 5):
            top = int(torch.maximum(inputs.max(), targets.max()))
            assert top < source.spec.vocab_size == 21
