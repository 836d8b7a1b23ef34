"""The Parquet source recomputed from its files, and its bad data refused by `validate`.

Required (docs/guide.md "Data: tokenized once", mutransfer/data/parquet.py): the stream of a
split is its documents (rows whose split hash says so) in file order per row group, each
followed by the end-of-text token, the row groups of each epoch in the order drawn from
(seed, split, epoch); the two splits share no document; batches are (B, L) inputs with the
targets shifted by one; the token cache gives the streamed batches; trial seeds change the
train order, and a refused data spec is one line, exit 2, nothing written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from mutransfer.cli import main
from mutransfer.data import DataConfig, load_data, packing
from mutransfer.data.parquet import epoch_order
from mutransfer.data.splits import rows_in_eval
from mutransfer.errors import UserError
from tests.conftest import same, take

ROWS, GROUP = 150, 40  # row groups of 40, 40, 40, 30 rows per shard


def shards(folder: Path, n: int = 2) -> dict[str, list[str]]:
    folder.mkdir(parents=True, exist_ok=True)
    docs = {}
    for k in range(n):
        texts = [f"shard {k} row {r}: " + "été ✓ word " * (r % 7) for r in range(ROWS)]
        pq.write_table(pa.table({"id": list(range(ROWS)), "text": texts}),
                       folder / f"s{k}.parquet", row_group_size=GROUP)
        docs[f"s{k}.parquet"] = texts
    return docs


def expected_stream(docs: dict[str, list[str]], split: str, seed: int, epochs: int) -> bytes:
    """The byte stream recomputed from the files with the split hash and the epoch order."""
    units = [(key, first, min(GROUP, ROWS - first)) for key in sorted(docs)
             for first in range(0, ROWS, GROUP)]
    per_unit = []
    for key, first, n in units:
        is_eval = rows_in_eval(key, 0, first, n, 0.05)
        per_unit.append([docs[key][first + i] for i in range(n) if is_eval[i] == (split == "eval")])
    return b"".join(d.encode() + b"\0" for epoch in range(epochs)
                    for u in epoch_order(len(units), split, seed, epoch) for d in per_unit[u])


def test_the_batches_are_the_documents_of_the_split_in_the_documented_order(
        tmp_path, small_chunks):
    docs = shards(tmp_path / "shards")
    cfg = DataConfig(source="parquet", path=str(tmp_path / "shards"),
                     cache_dir=str(tmp_path / "cache"))
    streamed, cached = load_data(cfg, cache="off"), load_data(cfg, cache="use")
    B, L = 4, 16
    per_chunk = packing.chunk_sequences(B, L) // B
    texts = {}
    for split in ("train", "eval"):
        want = expected_stream(docs, split, seed=3, epochs=6)
        batches = take(streamed.batches(split, B, L, seed=3), 2 * per_chunk)
        assert same(batches, take(cached.batches(split, B, L, seed=3), 2 * per_chunk))
        for x, y in batches:
            assert x.shape == y.shape == (B, L) and torch.equal(x[:, 1:], y[:, :-1])
        # the sequences of the first two chunks are those of the recomputed stream, each once
        rows = sorted(bytes(x[r].tolist() + y[r, -1:].tolist()) for x, y in batches
                      for r in range(B))
        cut = sorted(want[j * L:j * L + L + 1] for j in range(2 * per_chunk * B))
        assert rows == cut
        texts[split] = {d for d in want.split(b"\0") if d}
    assert texts["train"] and texts["eval"] and not texts["train"] & texts["eval"]
    assert len(texts["train"]) + len(texts["eval"]) == 2 * ROWS  # none dropped


def test_trial_seeds_reorder_train_batches_and_repeat_exactly(tmp_path, small_chunks):
    shards(tmp_path / "shards")
    src = load_data(DataConfig(source="parquet", path=str(tmp_path / "shards")), cache="off")
    first = take(src.batches("train", 4, 16, seed=0), 8)
    assert same(first, take(src.batches("train", 4, 16, seed=0), 8))
    assert not same(first, take(src.batches("train", 4, 16, seed=1), 8))
    # resuming at batch 5 gives the uninterrupted run's batches from there on
    assert same(first[5:], take(src.batches("train", 4, 16, seed=0, start=5), 3))


def no_statistics(path: Path, values: list[str | None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"text": pa.array(values, pa.string())}), path,
                   write_statistics=False)


@pytest.mark.parametrize("value", ["", None], ids=["empty", "null"])
def test_texts_all_empty_without_statistics_are_refused_by_validate(tmp_path, capsys, value):
    """Without statistics, shard_units cannot see that every text is empty: before, validate
    said ok (the train split's 3800 end-of-text tokens pass the length check) and the sweep's
    prepare refused "the train split has no text"; now validate refuses it, in one line, and
    writes nothing."""
    no_statistics(tmp_path / "data" / "a.parquet", [value] * 4000)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "probe", "storage": str(tmp_path / "results"),
        "model": {"arch": "mamba", "n_layer": 1, "d_state": 4, "base_width": 16},
        "train": {"optimizer": "adamw", "steps": 4, "batch_size": 2, "seq_len": 16,
                  "warmup": 0, "schedule": "constant", "eval_every": 2, "eval_batches": 1},
        "data": {"source": "parquet", "path": str(tmp_path / "data"),
                 "cache_dir": str(tmp_path / "cache")},
        "axes": {"width": [16], "parameterization": ["sp"], "lr": [0.001], "seed": [0]},
        "resources": {"cpus_per_trial": 1, "gpus_per_trial": 0}}))
    before = sorted(tmp_path.iterdir())
    assert main(["validate", str(sweep)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the train split has no text" in err[0], err
    assert sorted(tmp_path.iterdir()) == before


def test_a_stream_is_never_end_of_text_tokens_alone(tmp_path, small_chunks):
    """The streaming path (cache off) refuses such a split too, instead of training on a run
    of NUL bytes; a file with some text among empty rows is read."""
    no_statistics(tmp_path / "empty" / "a.parquet", [""] * 4000)
    src = load_data(DataConfig(source="parquet", path=str(tmp_path / "empty")), cache="off")
    with pytest.raises(UserError, match="the eval split has no text"):
        next(src.batches("eval", 2, 16, seed=0))
    no_statistics(tmp_path / "some" / "a.parquet", [""] * 3990 + ["a text"] * 10)
    src = load_data(DataConfig(source="parquet", path=str(tmp_path / "some")), cache="off")
    epoch = take(src.batches("train", 2, 16, seed=0), 130)  # 4160 tokens: a whole epoch
    assert sum(np.count_nonzero(x.numpy()) for x, _ in epoch) > 0
