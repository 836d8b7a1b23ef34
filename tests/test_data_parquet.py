"""The parquet source: streamed shards with a text column, split by document, resumable."""

from __future__ import annotations

import re
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from mutransfer.data import DataConfig, load_data, parquet
from mutransfer.data.splits import rows_in_eval
from mutransfer.errors import UserError
from tests.conftest import same, take

N_SHARDS, N_ROWS = 3, 300
DOC = re.compile(rb"<(\d+)-(\d+)>")


def doc_text(shard: int, row: int) -> str:
    # unique tag, some multi-byte UTF-8, varying lengths
    return f"<{shard}-{row}> é{'ab' * (row % 23)}"


def write_shards(folder, row_group_size=64, rows=N_ROWS):
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(N_SHARDS):
        table = pa.table({"id": list(range(rows)),
                          "text": [doc_text(s, r) for r in range(rows)]})
        pq.write_table(table, folder / f"shard_{s:02d}.parquet", row_group_size=row_group_size)
    return folder


@pytest.fixture
def shards(tmp_path):
    return write_shards(tmp_path / "shards")


def forget():
    """As in a fresh process: no row group counted or encoded yet."""
    parquet._COUNTS.clear()
    parquet._TOKENS.clear()


def source(path, **kw):
    """The streaming source (the token cache's equality with it: tests/test_data_cache.py)."""
    return load_data(DataConfig(source="parquet", path=str(path), **kw), cache="off")


def docs_in(batches) -> set[tuple[int, int]]:
    """Documents whose tag appears whole in the inputs."""
    found = set()
    for x, _ in batches:
        for row in x.tolist():
            found |= {(int(a), int(b)) for a, b in DOC.findall(bytes(row))}
    return found


def test_spec_shapes_and_next_token_targets(shards):
    src = source(shards / "*.parquet")
    assert (src.spec.kind, src.spec.vocab_size, src.spec.output_dim, src.spec.loss) == (
        "tokens", 256, 256, "ce")
    x, y = next(src.batches("train", 4, 32, seed=0))
    assert x.shape == y.shape == (4, 32) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the inputs shifted by one token


def test_documents_follow_each_other_with_an_end_of_text_byte(shards):
    x, _ = next(load_data(DataConfig(source="parquet", path=str(shards))).batches(
        "train", 2, 256, seed=0))
    text = bytes(x[0].tolist())
    assert re.search(rb"\x00<\d+-\d+> \xc3\xa9(ab)*\x00", text)


def test_split_is_disjoint_complete_and_follows_the_row_hash(shards, small_chunks):
    src = source(shards / "*.parquet", eval_fraction=0.2)
    # 4 epochs of each split in long sequences: every tag is seen whole at least once
    train = docs_in(take(src.batches("train", 4, 256, seed=0), 100))
    held = docs_in(take(src.batches("eval", 4, 256, seed=0), 25))
    flags = [rows_in_eval(f"shard_{s:02d}.parquet", 0, 0, N_ROWS, 0.2) for s in range(N_SHARDS)]
    expected_eval = {(s, int(r)) for s in range(N_SHARDS) for r in flags[s].nonzero()[0]}
    assert train.isdisjoint(held)
    assert held == expected_eval
    assert train | held == {(s, r) for s in range(N_SHARDS) for r in range(N_ROWS)}
    assert 0.1 < len(held) / (N_SHARDS * N_ROWS) < 0.3


def test_split_ignores_row_groups_and_where_the_folder_is(shards, tmp_path, small_chunks):
    moved = write_shards(tmp_path / "elsewhere" / "copy", row_group_size=17)
    a = docs_in(take(source(shards / "*.parquet").batches("eval", 4, 32, seed=0), 60))
    b = docs_in(take(source(moved / "*.parquet").batches("eval", 4, 32, seed=1), 60))
    assert a == b and a
    other = docs_in(take(source(shards / "*.parquet", split_seed=1).batches(
        "eval", 4, 32, seed=0), 60))
    assert other != a  # split_seed holds out other documents


def test_same_seed_same_batches_other_seed_other_order(shards):
    src = source(shards / "*.parquet")
    assert same(take(src.batches("train", 4, 32, seed=3), 5),
                take(source(shards / "*.parquet").batches("train", 4, 32, seed=3), 5))
    assert not same(take(src.batches("train", 4, 32, seed=3), 5),
                    take(src.batches("train", 4, 32, seed=4), 5))


@pytest.mark.parametrize("start", [1, 7, 8, 37, 400])
def test_resumed_iterator_equals_the_tail_of_an_uninterrupted_one(shards, small_chunks, start):
    full = take(source(shards / "*.parquet").batches("train", 4, 32, seed=5), start + 30)
    forget()
    resumed = take(source(shards / "*.parquet").batches("train", 4, 32, seed=5, start=start), 30)
    assert same(full[start:], resumed)


def test_resume_in_a_later_epoch_with_counts_known(shards, small_chunks):
    src = source(shards / "*.parquet")
    full = take(src.batches("eval", 2, 16, seed=0), 900)  # several epochs of the eval split
    assert same(full[850:], take(src.batches("eval", 2, 16, seed=0, start=850), 50))
    assert src._epoch_tokens["eval"] > 0  # the epoch size was learnt and reused
    assert same(full[880:], take(src.batches("eval", 2, 16, seed=0, start=880), 20))


def test_a_directory_path_reads_its_parquet_files(shards):
    (shards / "notes.txt").write_text("not a shard")
    src = load_data(DataConfig(source="parquet", path=str(shards)))
    assert "3 Parquet files" in src.description


def one_line_error(path, **kw) -> str:
    with pytest.raises(UserError) as err:
        source(path, **kw)
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_missing_path_and_unmatched_glob(tmp_path):
    assert "no such file or directory" in one_line_error(tmp_path / "nope.parquet")
    assert "no .parquet files match" in one_line_error(tmp_path / "*.parquet")


def test_empty_file_and_file_without_rows(tmp_path):
    (tmp_path / "zero.parquet").write_bytes(b"")
    assert "empty file (0 bytes)" in one_line_error(tmp_path / "zero.parquet")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), tmp_path / "norows.parquet")
    assert "no rows" in one_line_error(tmp_path / "norows.parquet")


def test_file_without_text_column_names_the_columns(tmp_path):
    rows = [f"<0-{i}>" for i in range(200)]
    pq.write_table(pa.table({"body": rows, "id": list(range(200))}), tmp_path / "x.parquet")
    msg = one_line_error(tmp_path / "x.parquet")
    assert "no 'text' column" in msg and "body, id" in msg and "x.parquet" in msg
    src = source(tmp_path / "x.parquet", text_column="body")  # the column can be named
    assert docs_in(take(src.batches("train", 2, 64, seed=0), 3))


def test_non_parquet_and_non_string_column(tmp_path):
    (tmp_path / "junk.parquet").write_bytes(b"this is not parquet at all")
    assert "not a readable Parquet file" in one_line_error(tmp_path / "junk.parquet")
    pq.write_table(pa.table({"text": [1, 2, 3]}), tmp_path / "ints.parquet")
    assert "not strings" in one_line_error(tmp_path / "ints.parquet")


def test_a_split_without_documents_fails_at_load(tmp_path):
    pq.write_table(pa.table({"text": ["only one document"]}), tmp_path / "one.parquet")
    assert "split" in one_line_error(tmp_path / "one.parquet")


def test_a_small_corpus_is_read_from_disk_once(shards, monkeypatch):
    forget()
    src = source(shards / "*.parquet")
    first = take(src.batches("train", 4, 32, seed=0), 3)
    monkeypatch.setattr(parquet.ParquetSource, "_texts", None)  # any further read would fail
    again = take(source(shards / "*.parquet").batches("train", 4, 32, seed=0), 3)
    assert same(first, again)


def test_shards_are_read_in_slices_not_whole(shards, monkeypatch):
    monkeypatch.setattr(parquet, "READ_ROWS", 10)
    src = source(shards / "*.parquet")
    slices = list(src._texts(src.units[0], "train"))
    assert len(slices) >= 6 and max(len(s) for s in slices) <= 10


def test_copies_of_the_same_shards_in_two_places_are_not_merged(shards, tmp_path):
    shutil.copytree(shards, tmp_path / "all" / "a")
    shutil.copytree(shards, tmp_path / "all" / "b")
    src = source(tmp_path / "all" / "*" / "*.parquet")
    assert len({u.key for u in src.units}) == 2 * N_SHARDS  # named a/shard_00..., b/shard_00...
