"""`mutransfer prepare` refuses what the sweep would refuse, in one line with exit code 2, and
leaves nothing behind: no cache, no folder made for one. The hint to put the data at its path
(and validate's that it may be on the cluster only) is given only when the data is not there."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from mutransfer.data.config import DataConfig
from mutransfer.data.preflight import prepare_caches

TEXT = "some ordinary text, line after line.\n" * 40
HINT = "put the data at"
CLUSTER_HINT = "data only on the cluster?"


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """A folder holding sweep.yaml, whose text data is data.txt and its cache under cache/."""
    monkeypatch.chdir(tmp_path)
    sweep = {"name": "p1", "model": {"arch": "mamba", "n_layer": 1, "d_state": 16,
                                     "base_width": 32},
             "train": {"steps": 4, "batch_size": 2, "seq_len": 16},
             "data": {"source": "text", "path": "data.txt", "cache_dir": "cache"},
             "axes": {"width": [32], "lr": [0.01]}}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    return tmp_path


def refusal(capsys, argv: list[str]) -> str:
    """The one error line of a command that must exit with code 2."""
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err


def test_a_refused_prepare_leaves_no_cache_folder(folder, capsys):
    (folder / "data.txt").write_bytes(b"\xff\xfeh\x00i\x00")  # UTF-16
    assert "UTF-16 text" in refusal(capsys, ["prepare", "sweep.yaml"])
    assert not (folder / "cache").exists()


def test_a_refused_sweep_leaves_no_cache_folder(folder, capsys):
    (folder / "data.txt").write_bytes(b"\xff\xfeh\x00i\x00")
    assert "UTF-16 text" in refusal(capsys, ["sweep", "sweep.yaml", "--storage", "store"])
    assert sorted(p.name for p in folder.iterdir()) == ["data.txt", "sweep.yaml"]


def test_prepare_refuses_text_too_small_for_a_batch_and_keeps_no_cache(folder, capsys):
    (folder / "data.txt").write_text("hello world!")  # 12 bytes: 12 train tokens
    err = refusal(capsys, ["prepare", "sweep.yaml"])
    assert err.endswith("sweep.yaml: data: text: the train split has 12 tokens, fewer than "
                        "seq_len + 1 = 17")
    assert not (folder / "cache").exists()


def test_prepare_refusing_small_data_keeps_a_cache_made_before_it(folder, capsys):
    (folder / "data.txt").write_text("hello world!")
    cfg = DataConfig(source="text", path="data.txt", cache_dir="cache")
    [made] = prepare_caches([cfg.model_dump()])  # the API writes it without the batch check
    assert "the train split has 12 tokens" in refusal(capsys, ["prepare", "sweep.yaml"])
    assert (Path(made) / "index.json").is_file()


def test_prepare_of_enough_text_writes_its_cache(folder, capsys):
    (folder / "data.txt").write_text(TEXT)
    assert main(["prepare", "sweep.yaml"]) == 0
    assert "train +" in capsys.readouterr().out
    assert len(list((folder / "cache" / "tokens").iterdir())) == 1


def test_the_hint_to_put_the_data_at_its_path_is_given_when_it_is_missing(folder, capsys):
    err = refusal(capsys, ["validate", "sweep.yaml"])
    assert "data.txt: no such file or directory; put the data at data.txt" in err
    assert CLUSTER_HINT in err  # validate's: the data may be the cluster's, not this machine's


@pytest.mark.parametrize("content,words", [(b"\xff\xfeh\x00i\x00", "UTF-16 text"),
                                           (b"abc\0def\n", "a NUL byte at offset 3")])
def test_no_hint_to_put_the_data_at_its_path_when_it_is_there_but_malformed(
        folder, capsys, content, words):
    (folder / "data.txt").write_bytes(content)
    err = refusal(capsys, ["validate", "sweep.yaml"])
    assert words in err and HINT not in err and CLUSTER_HINT not in err


def test_a_bad_later_file_is_refused_before_the_first_files_data_is_tokenized(folder, capsys):
    """`prepare A B` reads and checks every file before it tokenizes any: a typo in the last
    file is refused at once, not after the first corpus (hours, for a real one) with its
    cache left behind."""
    (folder / "data.txt").write_text(TEXT)
    good = yaml.safe_load((folder / "sweep.yaml").read_text())
    (folder / "typo.yaml").write_text(yaml.safe_dump({**good, "name": "typo",
                                                       "axes": {"width": [32], "lr": [-1]}}))
    assert refusal(capsys, ["prepare", "sweep.yaml", "typo.yaml"]) == \
        "error: typo.yaml: axes.lr[0]: -1 is not a positive learning rate"
    assert not (folder / "cache").exists()  # the good file's corpus was not tokenized
    assert main(["prepare", "sweep.yaml"]) == 0  # on its own it prepares
    assert (folder / "cache" / "tokens").is_dir()


# -- `prepare` says a cache is prepared only once it holds a batch of each shape the trials
# draw (before: "token cache of text: 13 tokens, prepared in 0.0 s: PATH", then the refusal
# of that cache, which was removed) -------------------------------------------------------

def test_a_corpus_too_small_for_a_batch_is_refused_without_a_word_of_success(folder, capsys):
    (folder / "data.txt").write_text("hello world!")  # 12 train tokens, a batch needs 17
    assert main(["prepare", "sweep.yaml"]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "the train split has 12 tokens" in err
    assert "prepared" not in out and "cache/tokens" not in out, out
    assert not (folder / "cache").exists()


def test_a_cache_that_passed_is_named_with_the_time_it_took_once(folder, capsys):
    (folder / "data.txt").write_text(TEXT)
    assert main(["prepare", "sweep.yaml"]) == 0
    [cache] = (folder / "cache" / "tokens").iterdir()
    [named] = [line for line in capsys.readouterr().out.splitlines()
               if str(cache.relative_to(folder)) in line]
    assert named.startswith("sweep.yaml: text, tokenizer byte: 1 files") and \
        "(prepared in " in named
    assert main(["prepare", "sweep.yaml"]) == 0  # the second time: nothing to do
    [again] = [line for line in capsys.readouterr().out.splitlines()
               if str(cache.relative_to(folder)) in line]
    assert again.endswith("(already prepared)")
