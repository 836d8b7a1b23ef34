"""`mutransfer prepare FILE` says a token cache is prepared only once it holds a batch of each
shape the file's trials draw: a corpus too small for one is refused in one line, and nothing
before it reads as a success (before: "token cache of text: 13 tokens, prepared in 0.0 s:
PATH", then the refusal of that cache, which was removed)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main

TEXT = "some ordinary text, line after line.\n" * 40


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
