"""The stdlib source (the real standard library of this interpreter): split by file, stable."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import torch

from mutransfer.data import DataConfig, describe, load_data
from mutransfer.data.splits import split_keys
from mutransfer.data.stdlib import stdlib_files
from tests.conftest import same, take


def eval_names_here() -> list[str]:
    fs = stdlib_files()
    return [k for k, e in zip(fs.keys(), split_keys(fs.keys(), 0, 0.05)) if e]


def test_the_corpus_is_the_stdlib_py_files_without_tests_or_installed_packages():
    keys = stdlib_files().keys()
    assert "os.py" in keys and "json/decoder.py" in keys
    assert all(k.endswith(".py") for k in keys)
    parts = {p for k in keys for p in k.split("/")[:-1]}
    assert not parts & {"site-packages", "dist-packages", "test", "tests", "idle_test"}


def fake_stdlib(root, sysconfig_path: str):
    """A stdlib folder as a build installs it, its build's paths in two generated files."""
    (root / "json").mkdir(parents=True)
    (root / "os.py").write_text("import sys\n" * 300)
    (root / "json" / "decoder.py").write_text("def decode(s): return s\n" * 200)
    (root / "_sysconfigdata__linux_x86_64-linux-gnu.py").write_text(
        f"build_time_vars = {{'abs_builddir': '{sysconfig_path}'}}\n")
    (root / "config-3.11-x86_64-linux-gnu").mkdir()
    (root / "config-3.11-x86_64-linux-gnu" / "python-config.py").write_text(
        f"prefix = '{sysconfig_path}'\n")
    return root


def test_two_builds_of_one_release_give_the_same_corpus(tmp_path, monkeypatch):
    import sysconfig

    from mutransfer.data.text import corpus_from_files
    from mutransfer.data.tokenizers import ByteTokenizer

    # pyenv builds in /tmp/python-build.<time>.<pid>: a path of another length elsewhere
    one = fake_stdlib(tmp_path / "a", "/tmp/python-build.20260509073455.222/Python-3.11.7")
    two = fake_stdlib(tmp_path / "b", "/tmp/python-build.20260601120000.91817/Python-3.11.7")
    corpora = []
    for root in (one, two):  # the stdlib folder of the running interpreter, as each build
        monkeypatch.setattr(sysconfig, "get_paths", lambda root=root: {"stdlib": str(root)})
        assert stdlib_files().keys() == ["json/decoder.py", "os.py"]
        corpora.append(corpus_from_files("stdlib", stdlib_files(), ByteTokenizer(), 0.05, 0))
    assert same(take(corpora[0].batches("train", 4, 32, seed=0), 5),
                take(corpora[1].batches("train", 4, 32, seed=0), 5))


def test_split_is_disjoint_by_file_and_the_buffers_hold_exactly_those_files():
    fs = stdlib_files()
    flags = split_keys(fs.keys(), 0, 0.05)
    assert 0.01 < sum(flags) / len(flags) < 0.15
    src = load_data(DataConfig())
    for split, want in (("train", False), ("eval", True)):
        chosen = [f for f, e in zip(fs.files, flags) if e == want]
        expected = b"".join(f.read_bytes() + b"\0" for f in chosen)
        assert bytes(src.buffers[split]) == expected
    assert src.buffers["train"].dtype == np.uint8  # one byte per token in memory


def test_split_is_the_same_in_a_fresh_process():
    # Python's own hash() is salted per process; the split must not be
    code = ("from mutransfer.data.splits import split_keys\n"
            "from mutransfer.data.stdlib import stdlib_files\n"
            "fs = stdlib_files()\n"
            "print('\\n'.join(k for k, e in zip(fs.keys(), split_keys(fs.keys(), 0, 0.05)) if e))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == eval_names_here()


def test_split_seed_holds_out_other_files():
    fs = stdlib_files()
    assert split_keys(fs.keys(), 1, 0.05) != split_keys(fs.keys(), 0, 0.05)


def test_loaded_once_per_process_and_batches_resume():
    src = load_data(DataConfig())
    assert load_data(DataConfig()) is src
    assert src.spec.vocab_size == 256 and src.spec.kind == "tokens"
    assert describe(DataConfig()).startswith("stdlib: ")
    full = take(src.batches("train", 8, 128, seed=0), 12)
    resumed = take(src.batches("train", 8, 128, seed=0, start=9), 3)
    assert same(full[9:], resumed)
    x, y = full[0]
    assert torch.equal(x[:, 1:], y[:, :-1])
