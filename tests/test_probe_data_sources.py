"""Data sources fed valid but unusual input (helper's probe): a tokenizer that cannot encode
the text, Parquet text that is all empty strings."""

from __future__ import annotations

import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mutransfer.data.cache import locate
from mutransfer.data.config import DataConfig
from mutransfer.data.loader import load_data
from mutransfer.data.prepare import prepare_cache
from mutransfer.data.tokenizers import make_tokenizer
from mutransfer.errors import UserError


@pytest.fixture
def unigram_without_unk(tmp_path):
    """A Unigram tokenizers file trained on lowercase text, without an unknown token: a
    character it has no piece for cannot be encoded."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.Unigram())
    trainer = tokenizers.trainers.UnigramTrainer(vocab_size=40, special_tokens=["</s>"],
                                                 show_progress=False)
    tok.train_from_iterator(["abc abc cab bca " * 30], trainer)
    path = tmp_path / "unigram.json"
    tok.save(str(path))
    return path


def test_text_a_tokenizer_cannot_encode_is_one_line_naming_the_tokenizer(tmp_path,
                                                                          unigram_without_unk):
    # before: `Exception: Encountered an unknown token but unk_id is missing`, a traceback
    (tmp_path / "a.txt").write_text("abc XYZ 123\n" * 50)
    cfg = DataConfig(source="text", path=str(tmp_path / "a.txt"),
                     tokenizer=str(unigram_without_unk), cache_dir=str(tmp_path / "c"))
    with pytest.raises(UserError) as err:
        load_data(cfg, cache="off")
    msg = str(err.value)
    assert "\n" not in msg and str(unigram_without_unk) in msg and "cannot encode" in msg
    with pytest.raises(UserError, match="cannot encode"):
        prepare_cache(cfg, locate(cfg))
    assert not any((tmp_path / "c").rglob("index.json"))  # no cache written


def empty_texts(folder, statistics: bool):
    folder.mkdir()
    pq.write_table(pa.table({"text": pa.array([""] * 200 + [None] * 5, pa.string())}),
                   folder / "a.parquet", row_group_size=50, write_statistics=statistics)
    return DataConfig(source="parquet", path=str(folder), cache_dir=str(folder.parent / "c"))


def test_parquet_whose_texts_are_all_empty_strings_is_refused_before_tokenizing(tmp_path):
    # before: accepted; its cache held end-of-text tokens alone, and trials trained on them
    cfg = empty_texts(tmp_path / "d", statistics=True)
    with pytest.raises(UserError, match="every 'text' value is empty or null"):
        load_data(cfg, cache="off")


def test_a_token_cache_of_empty_texts_is_not_written(tmp_path):
    # without statistics the files cannot say it: the tokenizing pass does
    cfg = empty_texts(tmp_path / "d", statistics=False)
    with pytest.raises(UserError, match="has no text .*null or empty"):
        prepare_cache(cfg, locate(cfg))
    assert not any((tmp_path / "c").rglob("index.json"))


def test_parquet_with_some_empty_texts_still_prepares(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    texts = [""] * 100 + ["some text here " * 4] * 100
    pq.write_table(pa.table({"text": texts}), folder / "a.parquet", row_group_size=100)
    cfg = DataConfig(source="parquet", path=str(folder), cache_dir=str(tmp_path / "c"))
    cache, wrote = prepare_cache(cfg, locate(cfg))
    assert wrote and sum(s["tokens"] for s in cache.index["shards"]) == 200 + 100 * 60


def test_hf_with_fewer_local_files_than_max_files_says_how_many_are_there(tmp_path,
                                                                          monkeypatch):
    # before: "hf: HuggingFaceFW/fineweb is not in <folder> ...; place the Parquet files as
    # <folder>/sample/10BT/*.parquet", with one of the two files placed just there
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    folder = tmp_path / "HuggingFaceFW" / "fineweb" / "sample" / "10BT"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"text": ["a document"] * 50}), folder / "000_00000.parquet")
    with pytest.raises(UserError) as err:
        load_data(DataConfig(source="hf", cache_dir=str(tmp_path), max_files=2), cache="off")
    msg = str(err.value)
    assert "\n" not in msg and "1 of the max_files 2" in msg and "lower max_files" in msg


def small_corpus(tmp_path) -> DataConfig:
    """60 short documents: about 350 train and 60 eval byte tokens."""
    folder = tmp_path / "d"
    folder.mkdir()
    pq.write_table(pa.table({"text": [f"doc {i}" for i in range(60)]}), folder / "a.parquet")
    return DataConfig(source="parquet", path=str(folder), eval_fraction=0.2,
                      cache_dir=str(tmp_path / "c"))


@pytest.mark.parametrize("cache", ["off", "use"])
def test_a_parquet_split_shorter_than_one_sequence_is_refused(tmp_path, cache):
    # before: accepted; each sequence held the split's few tokens over and over, which a
    # model learns to copy (the in-memory sources refuse it: data/memory.py)
    source = load_data(small_corpus(tmp_path), cache=cache)
    with pytest.raises(UserError, match=r"eval split has \d+ tokens, fewer than seq_len \+ 1 "
                                        r"= 1025.*eval_fraction"):
        source.batches("eval", 2, 1024, seed=0)
    with pytest.raises(UserError, match="train split has .* fewer than seq_len"):
        source.batches("train", 2, 1024, seed=0)
    inputs, _ = next(source.batches("eval", 2, 16, seed=0))  # a sequence it holds: served
    assert tuple(inputs.shape) == (2, 16)


def test_a_tokenizer_name_that_is_no_tokenizer_is_called_one_not_a_missing_package(no_tiktoken):
    # before: "tokenizer 'Byte' needs the tiktoken package: pip install tiktoken"
    with pytest.raises(UserError) as err:
        make_tokenizer("Byte")
    msg = str(err.value)
    assert msg.startswith("tokenizer 'Byte': not byte, a tokenizers JSON file") and "gpt2" in msg
    with pytest.raises(UserError, match="'gpt2' needs the tiktoken package"):
        make_tokenizer("gpt2")
