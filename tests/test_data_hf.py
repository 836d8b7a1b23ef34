"""The hf source: files already in the cache are read as parquet with no hub; else a clear error."""

from __future__ import annotations

import importlib.util
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mutransfer.data import DataConfig, load_data
from mutransfer.errors import UserError
from tests.conftest import same, take

FINEWEB = "HuggingFaceFW/fineweb"


@pytest.fixture
def no_hub(monkeypatch):
    """`import huggingface_hub` fails, so a code path that reached for the hub would raise."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)


def write_shard(path, tag: str, rows: int = 120):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"text": [f"{tag} document {i}" for i in range(rows)]}), path)


def hf(cache, **kw):
    return load_data(DataConfig(source="hf", cache_dir=str(cache), **kw))


def test_placed_fineweb_shards_are_read_without_the_hub(tmp_path, no_hub):
    folder = tmp_path / FINEWEB / "sample" / "10BT"
    write_shard(folder / "000_00000.parquet", "first")
    write_shard(folder / "001_00000.parquet", "second")
    write_shard(tmp_path / FINEWEB / "sample" / "100BT" / "000_00000.parquet", "other config")
    src = hf(tmp_path)
    assert "2 Parquet files" in src.description and src.spec.vocab_size == 256
    text = b"".join(bytes(x.flatten().tolist()) for x, _ in take(
        src.batches("train", 4, 64, seed=0), 20))
    assert b"first document" in text and b"second document" in text
    assert b"other config" not in text
    # the same batches as source: parquet on the glob the error message names
    plain = load_data(DataConfig(source="parquet", path=str(folder / "*.parquet")))
    assert same(take(src.batches("eval", 2, 32, seed=1), 5),
                take(plain.batches("eval", 2, 32, seed=1), 5))


def test_max_files_and_an_explicit_files_glob(tmp_path, no_hub):
    folder = tmp_path / FINEWEB / "sample" / "10BT"
    for i in range(3):
        write_shard(folder / f"00{i}_00000.parquet", f"shard{i}")
    assert "1 Parquet files" in hf(tmp_path, max_files=1).description
    src = hf(tmp_path, files="sample/10BT/002_*.parquet")
    text = bytes(next(src.batches("train", 1, 200, seed=0))[0].flatten().tolist())
    assert b"shard2" in text and b"shard0" not in text


def test_the_dataset_card_names_the_files_of_a_config(tmp_path, no_hub):
    local = tmp_path / "someone" / "tiny"
    local.mkdir(parents=True)
    (local / "README.md").write_text(
        "---\nconfigs:\n- config_name: small\n  data_files:\n  - split: train\n"
        "    path: small/*.parquet\n  - split: test\n    path: small_test/*.parquet\n"
        "- config_name: big\n  data_files: big/*.parquet\n---\n# tiny\n")
    write_shard(local / "small" / "a.parquet", "small-train")
    write_shard(local / "small_test" / "a.parquet", "small-test")
    src = hf(tmp_path, dataset="someone/tiny", config="small")
    assert "1 Parquet files" in src.description
    with pytest.raises(UserError, match="no config 'huge'.*small, big"):
        hf(tmp_path, dataset="someone/tiny", config="huge")


def test_without_the_hub_the_error_says_what_to_install_and_where_files_go(tmp_path, no_hub):
    with pytest.raises(UserError) as err:
        hf(tmp_path)
    msg = str(err.value)
    assert "\n" not in msg
    assert "pip install" in msg and "huggingface_hub" in msg
    assert str(tmp_path / FINEWEB / "sample" / "10BT" / "*.parquet") in msg


def test_offline_with_the_hub_installed_gives_one_line(tmp_path, monkeypatch):
    if importlib.util.find_spec("huggingface_hub") is None:
        pytest.skip("huggingface_hub is not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # read when the hub is first imported
    with pytest.raises(UserError) as err:
        hf(tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and "could not fetch" in msg
    assert str(tmp_path / FINEWEB) in msg
