"""The token cache: each text source tokenized once into memory-mapped shards; trials read
slices of them and draw the same batches as the streaming sources."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil

import pytest

from mutransfer.data import DataConfig, load_data, parquet
from mutransfer.data import cache as token_cache
from mutransfer.data.cached import corpus_fingerprint
from mutransfer.data.preflight import prepare_caches
from mutransfer.errors import UserError
from tests.conftest import same, take
from tests.test_data_parquet import write_shards


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data-dir"
    monkeypatch.setenv("MUTRANSFER_DATA_DIR", str(folder))
    return folder


def caches(data_dir) -> list[str]:
    root = data_dir / "tokens"
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) \
        if root.is_dir() else []


def hidden(data_dir) -> list[str]:
    """Hidden entries of the cache folder: preparers' folders and lock files."""
    root = data_dir / "tokens"  # a refused preparer removes the folders it made
    return sorted(p.name for p in root.iterdir() if p.name.startswith(".")) if root.is_dir() else []


def both(cfg: DataConfig):
    """(streaming source, cached source) of one config."""
    return load_data(cfg, cache="off"), load_data(cfg)


@pytest.mark.parametrize("split", ["train", "eval"])
def test_parquet_batches_are_the_streams_across_epochs_and_on_resume(tmp_path, data_dir,
                                                                     small_chunks, split):
    cfg = DataConfig(source="parquet", path=str(write_shards(tmp_path / "shards")))
    stream, cached = both(cfg)
    assert type(cached).__name__ == "CachedStream"
    n = 300 if split == "eval" else 120  # the eval split: several epochs
    full = take(stream.batches(split, 4, 32, seed=3), n)
    assert same(full, take(cached.batches(split, 4, 32, seed=3), n))
    assert same(full[n - 40:], take(cached.batches(split, 4, 32, seed=3, start=n - 40), 40))
    assert cached.spec == stream.spec and cached.description == stream.description


def test_stdlib_and_text_batches_are_the_in_memory_ones(tmp_path, data_dir):
    folder = tmp_path / "texts"
    folder.mkdir()
    for i in range(5):
        (folder / f"f{i}.txt").write_text(f"file {i} " * (50 + 30 * i))
    for cfg in (DataConfig(), DataConfig(source="text", path=str(folder)),
                DataConfig(source="text", path=str(folder / "f4.txt"))):
        stream, cached = both(cfg)
        assert cached.fingerprint["cache"] in str(token_cache.locate(cfg).path)
        for split in ("train", "eval"):
            assert same(take(stream.batches(split, 3, 16, seed=1, start=5), 4),
                        take(cached.batches(split, 3, 16, seed=1, start=5), 4))


def test_a_trial_reads_the_cache_and_tokenizes_nothing(tmp_path, data_dir, monkeypatch):
    from mutransfer.config import TrialConfig
    from mutransfer.data import tokenizers
    from mutransfer.train import run_trial

    cfg = DataConfig(source="parquet", path=str(write_shards(tmp_path / "shards")))
    prepare_caches([cfg.model_dump()])

    def refuse(self, docs):
        raise AssertionError("a trial tokenized text")

    monkeypatch.setattr(tokenizers.ByteTokenizer, "encode_docs", refuse)
    monkeypatch.setattr(tokenizers.ByteTokenizer, "count_docs", refuse)
    result = run_trial(TrialConfig(width=16, model={"base_width": 16, "n_layer": 1},
                                   train={"steps": 3, "batch_size": 2, "seq_len": 16,
                                          "eval_every": 3, "eval_batches": 1}, data=cfg))
    assert result.status == "complete"


def test_one_cache_per_source_and_tokenizer_and_a_changed_file_is_another(tmp_path, data_dir):
    shards = write_shards(tmp_path / "shards")
    cfg = DataConfig(source="parquet", path=str(shards))
    first = prepare_caches([cfg.model_dump()])
    assert prepare_caches([cfg.model_dump()]) == first and len(caches(data_dir)) == 1
    prepare_caches([cfg.model_copy(update={"split_seed": 1}).model_dump()])
    assert len(caches(data_dir)) == 2
    table = parquet.pq.read_table(shards / "shard_00.parquet")
    parquet.pq.write_table(table.slice(0, 200), shards / "shard_00.parquet")  # rewritten
    assert prepare_caches([cfg.model_dump()]) != first and len(caches(data_dir)) == 3


def test_cache_dir_decides_where_the_tokens_go(tmp_path, data_dir):
    cfg = DataConfig(cache_dir=str(tmp_path / "shared"))
    [folder] = prepare_caches([cfg.model_dump()])
    assert folder.startswith(str(tmp_path / "shared" / "tokens"))
    assert not (data_dir / "tokens").exists()


def test_a_killed_prepare_leaves_no_cache_and_the_next_one_cleans_up(tmp_path, data_dir,
                                                                    monkeypatch):
    from mutransfer.data import prepare

    cfg = DataConfig(source="parquet", path=str(write_shards(tmp_path / "shards")))
    real = prepare.tokenize_file
    calls = []

    def dies_on_the_second_file(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as a Ctrl-C mid-prepare
        return real(*args)

    monkeypatch.setattr(prepare, "tokenize_file", dies_on_the_second_file)
    with pytest.raises(KeyboardInterrupt):
        prepare_caches([cfg.model_dump()], workers=1)
    assert caches(data_dir) == [] and hidden(data_dir) == []
    # a preparer killed hard leaves its hidden folder: the next prepare on the host removes it
    ref = token_cache.locate(cfg)
    dead = ref.root / f"{token_cache._tmp_prefix(ref.key)}999999999-abcd"
    (dead / "shard-00000.bin").parent.mkdir(parents=True)
    (dead / "shard-00000.bin").write_bytes(b"half")
    monkeypatch.setattr(prepare, "tokenize_file", real)
    prepare_caches([cfg.model_dump()], workers=1)
    assert len(caches(data_dir)) == 1 and hidden(data_dir) == []


def test_a_file_refused_by_prepare_leaves_nothing_in_the_cache_folder(tmp_path, data_dir):
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(UserError, match="not a readable Parquet file"):
        prepare_caches([DataConfig(source="parquet", path=str(bad)).model_dump()], workers=1)
    assert caches(data_dir) == [] and hidden(data_dir) == []


def test_a_waiter_whose_lock_file_was_removed_takes_the_lock_on_the_new_one(tmp_path):
    path = tmp_path / ".key.lock"
    order = []
    with token_cache._locked(path):
        stale = open(path)  # a waiter that opened the file before the holder removes it
    assert not path.exists()  # released: the lock file is gone
    assert not token_cache._same_file(stale, path)
    stale.close()
    with token_cache._locked(path):
        order.append(path.exists())
    assert order == [True] and not path.exists()


def _prepare_in_process(cfg_json: str, data_dir: str, queue) -> None:
    os.environ["MUTRANSFER_DATA_DIR"] = data_dir
    queue.put(prepare_caches([json.loads(cfg_json)], workers=1))


@pytest.mark.slow
def test_two_preparers_at_once_make_one_cache(tmp_path, data_dir):
    cfg = DataConfig(source="parquet", path=str(write_shards(tmp_path / "shards")))
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_prepare_in_process,
                         args=(cfg.model_dump_json(), str(data_dir), queue)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert queue.get() == queue.get() and len(caches(data_dir)) == 1 and hidden(data_dir) == []


def test_without_a_working_lock_the_second_rename_keeps_the_first_cache(tmp_path, data_dir):
    cfg = DataConfig(source="parquet", path=str(write_shards(tmp_path / "shards")))
    [folder] = prepare_caches([cfg.model_dump()])
    late = tmp_path / "late"
    shutil.copytree(folder, late)
    (late / "shard-00000.bin").write_bytes(b"")  # what a second writer has: must not win
    token_cache.publish(late, token_cache.locate(cfg).path)
    assert load_data(cfg).description  # the first cache, intact (its shard sizes check out)


def test_a_damaged_cache_is_one_line_naming_the_folder(tmp_path, data_dir):
    cfg = DataConfig(source="parquet", path=str(write_shards(tmp_path / "shards")))
    [folder] = prepare_caches([cfg.model_dump()])
    with open(os.path.join(folder, "shard-00001.bin"), "r+b") as f:
        f.truncate(10)
    with pytest.raises(UserError, match=r"shard-00001.bin has 10 bytes.*prepare SWEEP_FILE "
                                        r"--force.*or delete") as e:
        load_data(cfg)
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_parallel_prepare_writes_what_one_process_writes(tmp_path, data_dir, monkeypatch):
    from mutransfer.data import prepare

    monkeypatch.setattr(prepare, "POOL_BYTES", 0)  # a pool even for these few kB
    cfg = DataConfig(source="parquet", path=str(write_shards(tmp_path / "shards")))
    [one] = prepare_caches([cfg.model_dump()], workers=1)
    monkeypatch.setenv("MUTRANSFER_DATA_DIR", str(tmp_path / "other"))
    [three] = prepare_caches([cfg.model_dump()], workers=3)
    for name in sorted(os.listdir(one)):
        assert open(os.path.join(one, name), "rb").read() == \
            open(os.path.join(three, name), "rb").read(), name


def test_the_corpus_fingerprint_counts_files_bytes_and_hashes_content(tmp_path, data_dir):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha " * 100)
    (folder / "b.txt").write_text("beta " * 100)
    cfg = DataConfig(source="text", path=str(folder))
    assert corpus_fingerprint(cfg) is None  # not prepared yet
    prepare_caches([cfg.model_dump()])
    fp = corpus_fingerprint(cfg)
    assert (fp["source"], fp["files"], fp["bytes"]) == ("text", 2, 1100)
    assert fp["train_tokens"] + fp["eval_tokens"] == 1102 and fp["tokenizer"] == "byte"
    (folder / "b.txt").write_text("gamma" * 100)  # same size, other content
    prepare_caches([cfg.model_dump()])
    assert corpus_fingerprint(cfg)["hash"] != fp["hash"]


@pytest.fixture(scope="module")
def bpe_json(tmp_path_factory):
    pytest.importorskip("tokenizers")
    from tests.bpe import train_bpe

    return train_bpe(tmp_path_factory.mktemp("bpe") / "tokenizer.json")


def test_a_tokenizers_json_file_is_a_tokenizer(bpe_json, tmp_path, data_dir):
    from tokenizers import Tokenizer

    cfg = DataConfig(source="parquet", path=str(write_shards(tmp_path / "shards")),
                     tokenizer=str(bpe_json))
    stream, cached = both(cfg)
    assert cached.spec.vocab_size == 320 and "tokenizer.json" in cached.description
    x, _ = next(cached.batches("train", 2, 64, seed=0))
    eot = Tokenizer.from_file(str(bpe_json)).token_to_id("<|endoftext|>")
    assert int(x.max()) < 320 and eot in x.tolist()[0] + x.tolist()[1]
    assert same(take(stream.batches("eval", 2, 16, seed=0), 20),
                take(cached.batches("eval", 2, 16, seed=0), 20))


def test_a_tokenizers_file_without_an_end_of_text_token_is_refused(tmp_path):
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models

    path = tmp_path / "no_eot.json"
    Tokenizer(models.BPE(vocab={"a": 0, "b": 1}, merges=[])).save(str(path))
    with pytest.raises(UserError, match="no end-of-text token"):
        load_data(DataConfig(tokenizer=str(path)), cache="off")
    with pytest.raises(UserError, match="missing.json: no such file"):
        load_data(DataConfig(tokenizer=str(tmp_path / "missing.json")))


@pytest.mark.slow
@pytest.mark.ray
def test_a_sweep_on_a_bpe_corpus_prepares_once_and_records_the_fingerprints(
        bpe_json, tmp_path, data_dir, capsys):
    import mutransfer
    from tests.sweeps import tiny_sweep

    data = {"source": "parquet", "path": str(write_shards(tmp_path / "shards")),
            "tokenizer": str(bpe_json)}
    doc = tiny_sweep("bpe", {"width": [16, 32], "lr": [0.003, 0.01]}, data=data)
    result = mutransfer.run(doc, storage=str(tmp_path / "results"), num_cpus=2)
    assert result.ok and result.complete == 4
    assert "token cache of parquet" in capsys.readouterr().out  # the driver's pre-flight
    assert len(caches(data_dir)) == 1
    trials = result.tables().trials
    corpus = [json.loads(c) for c in trials["corpus"]]
    assert {c["tokenizer"] for c in corpus} == {str(bpe_json)}
    assert {(c["files"], c["hash"]) for c in corpus} == {(3, corpus[0]["hash"])}
    env = json.loads(trials["env"].iloc[0])
    assert env["torch_threads"] >= 1 and env["python"] and "cpu_capability" in env


# -- an index or a shard that is not what prepare wrote (issue 31) ----------------------------

def _parquet_files(tmp_path):
    """A parquet source, its cache prepared, and a sweep file and a trial config that read it."""
    import yaml

    from tests.sweeps import tiny_sweep

    cfg = DataConfig(source="parquet", path=str(write_shards(tmp_path / "shards")))
    [folder] = prepare_caches([cfg.model_dump()])
    data = {"source": "parquet", "path": cfg.path}
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(tiny_sweep("c", {"lr": [0.01]}, data=data,
                                               storage=str(tmp_path / "results"))))
    trial = tmp_path / "trial.yaml"
    doc = tiny_sweep("c", data=data)
    trial.write_text(yaml.safe_dump({k: doc[k] for k in ("model", "train", "data")}))
    return cfg, folder, sweep, trial


def _edit_index(folder, edit) -> None:
    path = os.path.join(folder, "index.json")
    with open(path) as f:
        index = json.load(f)
    with open(path, "w") as f:
        json.dump(edit(index), f)


def _one_line_refusal(capsys, argv: list[str], needle: str) -> None:
    from mutransfer.cli import main

    assert main(argv) == 2, argv
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and needle in lines[0], err


WRONG_SHAPES = {
    "empty": lambda index: {},
    "a list": lambda index: [index],
    "a shard without tokens": lambda index: {**index, "shards": [
        {k: v for k, v in s.items() if k != "tokens"} for s in index["shards"]]},
    "vocab_size below the token ids": lambda index: {**index, "vocab_size": 10},
}


@pytest.mark.parametrize("shape", WRONG_SHAPES)
def test_an_index_of_the_wrong_shape_is_one_line_for_validate_train_and_prepare(
        tmp_path, data_dir, capsys, shape):
    _, folder, sweep, trial = _parquet_files(tmp_path)
    _edit_index(folder, WRONG_SHAPES[shape])
    needle = "but vocab_size is 10" if "vocab" in shape else "index.json"
    for argv in (["validate", str(sweep)], ["train", str(trial)], ["prepare", str(sweep)]):
        _one_line_refusal(capsys, argv, needle)
    assert not (tmp_path / "results").exists()


def test_a_shard_changed_in_place_is_refused_and_prepare_force_makes_it_anew(
        tmp_path, data_dir, capsys):
    cfg, folder, sweep, trial = _parquet_files(tmp_path)
    shard = os.path.join(folder, "shard-00001.bin")
    with open(shard, "r+b") as f:  # same size, one other byte: only the checksum sees it
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 1]))
    _one_line_refusal(capsys, ["train", str(trial)],
                      "shard-00001.bin does not match its checksum")
    from mutransfer.cli import main

    assert main(["prepare", str(sweep), "--force"]) == 0
    assert "deleted the token cache" in capsys.readouterr().out
    batches = load_data(cfg).batches("train", 2, 16, seed=0)
    assert all(next(batches) is not None for _ in range(20))  # every shard mapped, verified


def test_an_index_edited_to_hide_large_ids_is_refused_when_the_shard_is_mapped(
        tmp_path, data_dir):
    cfg, folder, _, _ = _parquet_files(tmp_path)
    _edit_index(folder, lambda index: {**index, "vocab_size": 10, "shards": [
        {**s, "max_id": 9} for s in index["shards"]]})
    with pytest.raises(UserError, match=r"shard-0000\d.bin holds token id \d+, but vocab_size "
                                        r"is 10; prepare it again"):
        next(load_data(cfg).batches("train", 2, 16, seed=0))
