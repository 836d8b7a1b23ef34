"""The text source: local files in memory, split by file (or the tail of a single file)."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
import torch

from mutransfer.data import DataConfig, load_data
from mutransfer.data.splits import split_keys
from mutransfer.errors import UserError
from tests.conftest import same, take


def write_corpus(folder, n_files=12):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n_files):
        sub = folder / ("part_a" if i % 2 else "part_b")
        sub.mkdir(exist_ok=True)
        (sub / f"article_{i}.txt").write_text(f"[file {i}] " + f"line {i} of text.\n" * 40)
    return folder


def text(path, **kw):
    return load_data(DataConfig(source="text", path=str(path), **kw))


def as_bytes(buf) -> bytes:
    return bytes(np.asarray(buf, dtype=np.uint8))


def test_several_files_split_by_file_disjoint_and_by_relative_name(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    src = text(corpus, eval_fraction=0.25)
    files = sorted(p for p in corpus.rglob("*.txt"))
    keys = [p.relative_to(corpus).as_posix() for p in files]
    flags = split_keys(keys, 0, 0.25)
    assert any(flags) and not all(flags)
    # each buffer is exactly its files, each followed by the end-of-text byte 0
    for split, want in (("train", False), ("eval", True)):
        expected = b"".join(p.read_bytes() + b"\0" for p, f in zip(files, flags) if f == want)
        assert as_bytes(src.buffers[split]) == expected
    # the same names elsewhere split the same way (stable across machines and folders)
    moved = shutil.copytree(corpus, tmp_path / "other" / "place")
    assert as_bytes(text(moved, eval_fraction=0.25).buffers["eval"]) == as_bytes(
        src.buffers["eval"])


def test_a_single_file_holds_out_its_tail(tmp_path):
    body = "".join(f"sentence number {i}.\n" for i in range(500)).encode()
    (tmp_path / "wiki.train.raw").write_bytes(body)
    src = text(tmp_path / "wiki.train.raw", eval_fraction=0.1)
    train, held = as_bytes(src.buffers["train"]), as_bytes(src.buffers["eval"])
    assert train + held == body + b"\0"
    assert len(held) == math.ceil((len(body) + 1) * 0.1)
    assert "its last 10% held out" in src.description


def test_a_glob_selects_files(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    src = text(corpus / "part_a" / "*.txt")
    both = as_bytes(src.buffers["train"]) + as_bytes(src.buffers["eval"])
    assert b"[file 1]" in both and b"[file 2]" not in both


def test_batches_are_windows_of_the_split_with_shifted_targets(tmp_path):
    src = text(write_corpus(tmp_path / "corpus"), eval_fraction=0.25)
    held = as_bytes(src.buffers["eval"])
    assert src.spec.kind == "tokens" and src.spec.vocab_size == src.spec.output_dim == 256
    x, y = next(src.batches("eval", 8, 48, seed=0))
    assert x.shape == y.shape == (8, 48) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        assert bytes(row_x + row_y[-1:]) in held


def test_resumed_iterator_equals_the_tail_and_seeds_differ(tmp_path):
    src = text(write_corpus(tmp_path / "corpus"))
    full = take(src.batches("train", 4, 32, seed=9), 20)
    tail = take(src.batches("train", 4, 32, seed=9, start=13), 7)
    assert same(full[13:], tail)
    other = next(src.batches("train", 4, 32, seed=10))
    assert not torch.equal(full[0][0], other[0])


def one_line_error(fn) -> str:
    with pytest.raises(UserError) as err:
        fn()
    assert "\n" not in str(err.value)
    return str(err.value)


def test_errors_are_one_line(tmp_path):
    assert "no such file or directory" in one_line_error(lambda: text(tmp_path / "missing.txt"))
    assert "no files match" in one_line_error(lambda: text(tmp_path / "*.raw"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "a.txt").write_text("")
    (tmp_path / "empty" / "b.txt").write_text("")
    assert "empty" in one_line_error(lambda: text(tmp_path / "empty"))
    (tmp_path / "short.txt").write_text("a short file, a shorter tail")
    src = text(tmp_path / "short.txt")
    assert "fewer than seq_len + 1" in one_line_error(lambda: src.batches("eval", 2, 64, seed=0))
