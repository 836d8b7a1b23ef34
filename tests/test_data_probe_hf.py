"""The hf source's fetch, with a stand-in for huggingface_hub (no network here).

Required: a fetched dataset is read exactly as `source: parquet` on the folder the files landed
in (same split, same batches), with max_files taking the first files in name order; a fetch
that fails (offline, unknown repo) is one line and leaves nothing in the cache folder, as
every refused data spec does.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mutransfer.data import DataConfig, load_data
from mutransfer.errors import UserError
from tests.conftest import same, take

CARD = "---\nconfigs:\n- config_name: tiny\n  data_files: data/tiny/*.parquet\n---\n# a card\n"
FILES = [f"data/tiny/{i:03d}.parquet" for i in range(3)] + ["data/other/000.parquet"]


def write_shard(path: Path, tag: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"text": [f"{tag} row {i} " * 3 for i in range(150)]}), path)


def fake_hub(online: bool, fetched: list[str]) -> types.ModuleType:
    """huggingface_hub as the hf source calls it: the card, the repo's file list, a download of
    allow_patterns into local_dir. Offline, it does what the real one did offline: it makes its
    bookkeeping folder under local_dir, then raises."""
    hub = types.ModuleType("huggingface_hub")

    def hf_hub_download(repo, filename, local_dir, **kw):
        lock = Path(local_dir) / ".cache" / "huggingface" / "download" / f"{filename}.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.touch()
        if not online:
            raise OSError("Name or service not known")
        (Path(local_dir) / filename).write_text(CARD)

    def snapshot_download(repo, allow_patterns, local_dir, **kw):
        fetched.extend(allow_patterns)
        for name in allow_patterns:
            write_shard(Path(local_dir) / name, name)

    class HfApi:
        def list_repo_files(self, repo, **kw):
            return ["README.md", *FILES]

    hub.hf_hub_download, hub.snapshot_download, hub.HfApi = (hf_hub_download,
                                                             snapshot_download, HfApi)
    return hub


def test_a_fetched_dataset_is_the_parquet_source_on_its_folder(tmp_path, monkeypatch):
    fetched: list[str] = []
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake_hub(True, fetched))
    cfg = DataConfig(source="hf", dataset="someone/tiny", config="tiny", max_files=2,
                     cache_dir=str(tmp_path))
    src = load_data(cfg, cache="off")
    assert fetched == FILES[:2]  # the card's glob, first max_files in name order
    assert "2 Parquet files" in src.description
    plain = load_data(DataConfig(source="parquet", path=str(tmp_path / "someone/tiny/data/tiny")),
                      cache="off")
    for split in ("train", "eval"):
        assert same(take(src.batches(split, 3, 40, seed=2), 6),
                    take(plain.batches(split, 3, 40, seed=2), 6))
    # the token cache of the fetched files gives the same batches
    cached = load_data(cfg, cache="use")
    assert same(take(cached.batches("train", 3, 40, seed=2), 6),
                take(src.batches("train", 3, 40, seed=2), 6))


@pytest.mark.parametrize("nested", [False, True])
def test_a_failed_fetch_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, nested):
    """Before: <cache_dir>/<owner>/<name>/.cache/huggingface/download/README.md.lock stayed
    behind (and a cache_dir that did not exist was created) for a dataset never fetched."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake_hub(False, []))
    cache_dir = tmp_path / "a" / "b" if nested else tmp_path
    with pytest.raises(UserError) as err:
        load_data(DataConfig(source="hf", dataset="nobody/nothing", cache_dir=str(cache_dir)),
                  cache="off")
    assert "\n" not in str(err.value) and "could not fetch nobody/nothing" in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_fetch_keeps_what_was_there(tmp_path, monkeypatch):
    """Files placed before (one shard of the two max_files asks for) are not touched."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake_hub(False, []))
    placed = tmp_path / "HuggingFaceFW/fineweb/sample/10BT/000_00000.parquet"
    write_shard(placed, "placed")
    with pytest.raises(UserError, match="1 of the max_files 2"):
        load_data(DataConfig(source="hf", max_files=2, cache_dir=str(tmp_path)), cache="off")
    assert placed.is_file()
