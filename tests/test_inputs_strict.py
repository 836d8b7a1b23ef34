"""Inputs that used to crash or mislead (issue 24, item 3), each now one line, exit code 2 and
nothing written, or a correct run: duplicate YAML keys, numbers that are not numbers of their
type (a boolean, infinity, 1e18 steps), storage that is a device, a FIFO or holds a NUL byte, a
damaged store marker, a plot of a store where every trial diverged, an unwritable `--out` file,
and a sweep refused for a full disk."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from mutransfer.configbase import MAX_INT, load_yaml, number_problem, read_yaml
from mutransfer.errors import UserError
from mutransfer.results.store import MARKER, STORE_FORMAT, Store, read_tables
from tests.sweeps import tiny_sweep
from tests.test_bad_input import assert_one_line_error, write

REPO = Path(__file__).resolve().parents[1]
BASE = tiny_sweep("strict", {"width": [16], "lr": [0.001, 0.01]})


def sweep_text(storage: Path, train_lines: str = "", extra: str = "") -> str:
    """A tiny sweep file written by hand (duplicate keys cannot come from yaml.safe_dump)."""
    return (f"name: strict\nstorage: {storage}\nmodel: {{n_layer: 1, d_state: 4, base_width: 16}}\n"
            f"train:\n  steps: 4\n  batch_size: 2\n  seq_len: 16\n  eval_every: 2\n"
            f"  eval_batches: 1\n{train_lines}"
            f"axes:\n  width: [16]\n  lr: [0.001, 0.01]\n{extra}")


# -- duplicate keys ------------------------------------------------------------------------------

# (case, lines added under train:, lines added at the end, the key, the lines it is on)
DUPLICATES = [
    ("a train field twice", "  steps: 8\n", "", "steps", (5, 10)),
    ("an axis twice", "", "  lr: [0.1]\n", "lr", (12, 13)),
    ("a top-level key twice", "", "name: other\n", "name", (1, 13)),
]


@pytest.mark.parametrize("case,train_lines,extra,key,lines", DUPLICATES,
                         ids=[c[0] for c in DUPLICATES])
def test_a_key_given_twice_is_refused_naming_it_and_both_lines(tmp_path, capsys, case,
                                                                 train_lines, extra, key, lines):
    storage = tmp_path / "results"
    path = write(tmp_path / "dup.yaml", sweep_text(storage, train_lines, extra))
    for command in (["validate", str(path)], ["sweep", str(path)]):
        line = assert_one_line_error(capsys, main(command), f"key {key!r} is given twice")
        assert f"(lines {lines[0]} and {lines[1]})" in line
    assert not storage.exists()


def test_duplicates_in_a_flow_mapping_inside_a_list_are_refused_too(tmp_path):
    path = write(tmp_path / "x.yaml", "a: [{k: 1}, {k: 2, q: 1, k: 5}]\n")
    with pytest.raises(UserError, match=r"key 'k' is given twice \(lines 1 and 1\)"):
        read_yaml(path)


def test_the_strict_loader_keeps_safe_load_semantics_otherwise():
    """A merge key may be overridden (that is what it is for); every file of the repo loads
    as yaml.safe_load loads it."""
    text = "base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  x: 3\nwhen: 2024-01-02\nn: 1e3\n"
    assert load_yaml(text) == yaml.safe_load(text)
    assert load_yaml(text)["other"] == {"x": 3, "y": 2}
    files = sorted((REPO / "sweeps").glob("*.yaml")) + sorted((REPO / "configs").glob("*.yaml"))
    assert files
    for f in files:
        assert load_yaml(f.read_text()) == yaml.safe_load(f.read_text()), f


# -- numbers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("train_lines,needle", [
    ("  lr: .inf\n", "train.lr: inf is not a finite number"),
    ("  lr: .nan\n", "train.lr: nan is not a finite number"),
    ("  grad_clip: true\n", "train.grad_clip: true is a boolean, not a number"),
    ("  betas: [0.9, .inf]\n", "train.betas: item 1: inf is not a finite number"),
    ("  warmup: 1.0e+18\n", "train.warmup: 1e+18 is out of range for an integer"),
], ids=["infinite lr", "nan lr", "boolean clip", "infinite beta", "1e18 warmup"])
def test_a_number_that_is_not_a_finite_number_of_its_type_is_refused(tmp_path, capsys,
                                                                     train_lines, needle):
    """No LR axis here for the scalar lr: the infinite one reached trial-id hashing before."""
    storage = tmp_path / "results"
    text = sweep_text(storage, train_lines).replace("  lr: [0.001, 0.01]\n", "  seed: [0]\n")
    path = write(tmp_path / "n.yaml", text)
    for command in (["validate", str(path)], ["sweep", str(path)]):
        assert_one_line_error(capsys, main(command), needle)
    assert not storage.exists()


@pytest.mark.parametrize("assignment,needle", [
    ("train.steps=true", "train.steps: true is a boolean"),
    ("train.steps=1.0e+18", "train.steps: 1e+18 is out of range"),
    ("width=true", "width: true is a boolean"),
    ("train.lr=-.inf", "train.lr: -inf is not a finite number"),
])
def test_train_refuses_such_numbers_from_the_command_line(tmp_path, capsys, assignment, needle):
    config = write(tmp_path / "trial.yaml", {"model": BASE["model"], "train": BASE["train"]})
    out = tmp_path / "result.json"
    assert_one_line_error(capsys, main(["train", str(config), "--set", assignment,
                                        "--out", str(out)]), needle)
    assert not out.exists()


def test_sweep_level_numbers_are_checked_as_well(tmp_path, capsys):
    for resources, needle in (({"cpus_per_trial": {16: float("inf")}},
                               "cpus_per_trial: 16: inf is not a finite number"),
                              ({"max_concurrent": True}, "max_concurrent: true is a boolean")):
        path = write(tmp_path / "r.yaml", {**BASE, "resources": resources})
        assert_one_line_error(capsys, main(["validate", str(path)]), needle)


def test_number_problem_leaves_what_is_fine_alone():
    assert number_problem(3, int) is None and number_problem(3, float | None) is None
    assert number_problem(True, bool | int) is None  # a flag may take a boolean
    assert number_problem(float("inf"), str) is None  # not a number field: pydantic says
    assert number_problem(MAX_INT, int) is None and number_problem(MAX_INT + 1, int)
    assert number_problem(1e30, float) is None  # a float may be large, only finite
    assert number_problem([1, True], list[int]) == "item 1: true is a boolean, not a number"


# -- storage -------------------------------------------------------------------------------------

def _sweep_file(tmp_path: Path, storage: str) -> Path:
    return write(tmp_path / "s.yaml", {**BASE, "storage": storage})


@pytest.mark.parametrize("make,what", [
    (lambda t: "/dev/null", "is a character device, not a folder"),
    (lambda t: (os.mkfifo(t / "pipe"), str(t / "pipe"))[1], "is a FIFO (named pipe), not a folder"),
], ids=["device", "fifo"])
def test_storage_that_is_a_device_or_a_fifo_is_one_line(tmp_path, capsys, make, what):
    storage = make(tmp_path)
    for extra in ([], ["--dry-run"]):
        path = _sweep_file(tmp_path, str(tmp_path / "unused"))
        assert_one_line_error(capsys, main(["sweep", str(path), "--storage", storage, *extra]),
                              what)
    assert not (tmp_path / "unused").exists()


@pytest.mark.parametrize("make,what", [
    (lambda t: (t / "f").write_text("x") and str(t / "f"), "is a file, not a folder"),
    (lambda t: ((t / "d").mkdir(), (t / "d" / "notes.txt").write_text("x"), str(t / "d"))[2],
     "not a mutransfer results store"),
], ids=["file", "folder of other files"])
def test_validate_refuses_a_local_storage_that_sweep_refuses(tmp_path, capsys, make, what):
    """validate said "ok" of a storage that `sweep` then refused."""
    storage = make(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert_one_line_error(capsys, main(["validate", str(_sweep_file(tmp_path, storage))]), what)
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted([*before, "s.yaml"])


def test_storage_holding_a_nul_byte_is_one_line(tmp_path, capsys):
    path = write(tmp_path / "s.yaml", sweep_text(tmp_path / "results").replace(
        f"storage: {tmp_path / 'results'}", f'storage: "{tmp_path}/res\\0ults"'))
    for command in (["validate", str(path)], ["sweep", str(path)], ["sweep", str(path),
                                                                    "--dry-run"]):
        assert_one_line_error(capsys, main(command), "storage: holds a NUL byte")
    with pytest.raises(UserError, match="holds a NUL byte"):
        Store(f"{tmp_path}/a\0b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def _store_marked(tmp_path: Path, content: bytes) -> Path:
    """A new store under tmp_path whose marker then holds `content`."""
    store = tmp_path / "results"
    Store(store).ensure_writable()
    (store / MARKER).write_bytes(content)
    return store


@pytest.mark.parametrize("content,problem", [
    (b"\xff\xfe{}", "not UTF-8 text"),
    (b"{\"format\": 2,", "not JSON"),
    (b"[1, 2]", "holds a JSON list"),
    (b"{}", "its format is null, not a format number"),
    (b'{"format": "2"}', 'its format is "2", not a format number'),
    (b'{"format": 0}', "its format is 0, not a format number"),
], ids=["not utf-8", "truncated json", "not an object", "no format", "a string format",
        "format zero"])
def test_a_damaged_store_marker_is_one_line_naming_it(tmp_path, capsys, content, problem):
    store = _store_marked(tmp_path, content)
    path = _sweep_file(tmp_path, str(store))
    for extra in (["--dry-run"], []):
        line = assert_one_line_error(capsys, main(["sweep", str(path), *extra]),
                                     f"its marker {MARKER} is damaged ({problem}")
        assert "delete that file" in line
    assert (store / MARKER).read_bytes() == content  # nothing rewritten
    (store / MARKER).unlink()  # as the line says: the next sweep writes it again
    assert main(["sweep", str(path), "--dry-run"]) == 0, capsys.readouterr().err


def test_a_store_of_a_newer_format_is_neither_added_to_nor_read(tmp_path, capsys):
    """Before: the marker's format was written and never read; a store whose rows mean
    something this version does not know was read and appended to as its own."""
    store = _store_marked(tmp_path, json.dumps({"format": STORE_FORMAT + 1}).encode())
    path = _sweep_file(tmp_path, str(store))
    for command in (["sweep", str(path)], ["sweep", str(path), "--dry-run"],
                    ["validate", str(path)], ["analyze", str(store)]):
        assert_one_line_error(capsys, main(command),
                              f"a results store of format {STORE_FORMAT + 1}, written by a "
                              "newer mutransfer")
    with pytest.raises(UserError, match="written by a newer mutransfer"):
        read_tables(store)
    assert sorted(p.name for p in store.iterdir()) == [MARKER, "steps", "trials"]


def test_a_store_of_an_older_format_is_read_but_not_added_to(tmp_path, capsys):
    """Format 1 stored a diverged trial's last loss as its final loss: a sweep adding format-2
    rows to it would mix the two meanings."""
    store = _store_marked(tmp_path, b'{"format": 1}')
    path = _sweep_file(tmp_path, str(store))
    assert_one_line_error(capsys, main(["sweep", str(path)]),
                          "a results store of format 1, written by an older mutransfer")
    assert read_tables(store).trials.empty  # analysis still reads it
    assert sorted(p.name for p in store.iterdir()) == [MARKER, "steps", "trials"]


def test_a_sweep_refused_for_a_full_disk_leaves_no_folder(tmp_path, capsys, monkeypatch):
    """The disk takes folders but not the marker file: the folders ensure_writable made
    (trials/, steps/, the store and the missing folders above it) go again."""
    def no_space(self, name, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Store, "write_text", no_space)
    storage = tmp_path / "new" / "results"
    path = _sweep_file(tmp_path, str(storage))
    assert_one_line_error(capsys, main(["sweep", str(path)]), "No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]
    existing = tmp_path / "mine"  # a folder that was there stays, with what it held
    existing.mkdir()
    (existing / "trials").mkdir()
    (existing / "steps").mkdir()
    assert_one_line_error(capsys, main(["sweep", str(_sweep_file(tmp_path, str(existing)))]),
                          "No space left on device")
    assert sorted(p.name for p in existing.iterdir()) == ["steps", "trials"]


@pytest.fixture
def full_tmpfs(small_tmpfs):
    """The 64 KiB tmpfs of conftest.small_tmpfs, filled to the last byte."""
    fd = os.open(small_tmpfs / "fill", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:  # ENOSPC: full
        pass
    finally:
        os.close(fd)
    return small_tmpfs


def test_a_sweep_on_a_really_full_disk_leaves_no_folder(tmp_path, full_tmpfs, capsys):
    storage = full_tmpfs / "results"
    path = _sweep_file(tmp_path, str(storage))
    assert_one_line_error(capsys, main(["sweep", str(path)]), "No space left on device")
    assert sorted(p.name for p in full_tmpfs.iterdir()) == ["fill"]


# -- outputs -------------------------------------------------------------------------------------

@pytest.mark.parametrize("make,needle", [
    (lambda t: t / ("x" * 300 + ".json"), "File name too long"),
    (lambda t: (os.symlink(t / "gone" / "r.json", t / "link.json"), t / "link.json")[1],
     "No such file or directory"),
], ids=["name too long", "link into a missing folder"])
def test_train_checks_the_out_file_itself_before_training(tmp_path, capsys, make, needle):
    config = write(tmp_path / "trial.yaml", {"model": BASE["model"], "train": BASE["train"]})
    out = make(tmp_path)
    line = assert_one_line_error(capsys, main(["train", str(config), "--out", str(out)]),
                                 needle)
    assert "cannot write this file" in line
    assert "status" not in capsys.readouterr().out  # refused before training


def test_train_out_check_leaves_no_file_behind(tmp_path):
    from mutransfer.commands.outputs import check_output_file

    new, old = tmp_path / "new.json", tmp_path / "old.json"
    old.write_text("kept")
    check_output_file(new)
    check_output_file(old)
    assert not new.exists() and old.read_text() == "kept"


# -- a store where every trial diverged ------------------------------------------------------------

def test_plot_of_a_store_where_every_trial_diverged_says_nothing_trained(tmp_path, capsys):
    """A too-high LR range is a normal first sweep: the divergence plot, and a line saying
    that nothing trained (the lr* figure has no point to draw: it crashed on its log axis)."""
    from tests.sweeps import planted_results
    from tests.synthetic_sweeps import Planted

    all_diverge = Planted("sp", 2**-8, -1.0, stable_base=2**-20)
    root = planted_results(tmp_path / "res", [64, 128], families=(all_diverge,))
    out = tmp_path / "plots"
    assert main(["plot", str(root), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("note: nothing trained: all 36 trials diverged")
    assert (out / "stability_vs_width.png").is_file() and (out / "report.html").is_file()
    assert not (out / "lr_opt_vs_width.png").exists()
    assert "nothing trained" in (out / "report.html").read_text()
    assert main(["analyze", str(root), "--out", str(tmp_path / "an")]) == 0
    assert "nothing trained" in capsys.readouterr().out
