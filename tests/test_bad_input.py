"""Bad input, end to end: every malformed sweep file or command line below gives one line
naming the problem, exit code 2, no traceback, and writes nothing.

The malformed-file cases of tests/test_sweep_spec.py are not repeated here; these are the
others: wrong types and ranges anywhere in the file, adaptive-search mistakes, command-line
options (addresses, storage, resources, --set) and whole-process runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from tests.sweeps import tiny_sweep

REPO = Path(__file__).resolve().parents[1]
BASE = tiny_sweep("bad")


def sweep(axes: dict | None = None, **top) -> dict:
    doc = {**BASE, **top}
    if axes is not None:
        doc["axes"] = axes
    return doc


def with_train(**train) -> dict:
    return {**BASE, "train": {**BASE["train"], **train}}


def with_model(**model) -> dict:
    return {**BASE, "model": {**BASE["model"], **model}}


# (case, sweep file content, text the one line must contain)
BAD_FILES = [
    ("unknown optimizer in train", with_train(optimizer="lion"), "train.optimizer"),
    ("unknown parameterization in param", sweep(param={"name": "mup_sm"}), "param.name"),
    ("width is text", sweep(width="wide"), "width"),
    ("width under the minimum", sweep(width=4), "width"),
    ("fixed width below base_width", sweep(width=8), "below model.base_width"),
    ("empty width axis", sweep({"width": []}), "axes.width"),
    ("negative width on the axis", sweep({"width": [-16]}), "axes.width"),
    ("fractional width", sweep({"width": [16.5]}), "axes.width[0]"),
    ("seed is text", sweep({"seed": ["a"]}), "axes.seed[0]"),
    ("zero LR", sweep({"lr": [0]}), "axes.lr[0]"),
    ("LR is a word", sweep({"lr": ["fast"]}), "axes.lr[0]"),
    ("LR is a boolean", sweep({"lr": [True]}), "axes.lr[0]"),
    ("empty LR list", sweep({"lr": []}), "axes.lr"),
    ("LR range with zero points per octave",
     sweep({"lr": {"log2": [-12, -4], "per_octave": 0}}), "per_octave"),
    ("LR range to infinity", sweep({"lr": {"log2": [-12, float("inf")]}}),
     "axes.lr: log2: item 1: inf is not a finite number"),
    ("LR range with one bound", sweep({"lr": {"log2": [-12]}}), "log2"),
    ("LR range upside down for one parameterization",
     sweep({"parameterization": ["sp"], "lr": {"sp": {"log2": [-4, -12]}}}), "axes.lr.sp.log2"),
    ("zero CPUs per trial", sweep(resources={"cpus_per_trial": 0}), "resources.cpus_per_trial"),
    ("zero trials at once", sweep(resources={"max_concurrent": 0}), "resources.max_concurrent"),
    ("negative retries", sweep(retries=-1), "retries"),
    ("unknown search kind", sweep(search={"kind": "random"}), "search.kind"),
    ("no trials per width", sweep({"lr": {"log2": [-10, -4]}},
                                  search={"kind": "optuna", "trials_per_width": 0}),
     "search.trials_per_width"),
    ("adaptive search over one LR", sweep({"lr": [0.01]}, search={"kind": "optuna"}),
     "axes.lr"),
    ("adaptive search without an LR axis", sweep({"width": [16]}, search={"kind": "optuna"}),
     "axes.lr"),
    ("no name", {k: v for k, v in BASE.items() if k != "name"}, "name"),
    ("name with a space", sweep(name="my sweep"), "name"),
    ("model section is a list", sweep(model=[1, 2]), "model"),
    ("axes is a list", sweep(axes=["lr"]), "axes"),
    ("parameterization axis is one word", sweep({"parameterization": "mup"}),
     "axes.parameterization"),
    # each ran as one cell before, with nothing said (seed: [0, 0, 1] gave two seeds)
    ("a seed twice", sweep({"seed": [0, 0, 1]}), "axes.seed[1]: 0 repeats axes.seed[0]"),
    ("a width twice", sweep({"width": [16, 32, 32]}), "axes.width[2]: 32 repeats"),
    ("an LR twice, once as text", sweep({"lr": [0.001, "1e-3"]}), "axes.lr[1]: 0.001 repeats"),
    ("a step count twice as int and float", sweep({"train.steps": [10, 10.0]}),
     "axes.train.steps[1]: 10.0 repeats axes.train.steps[0]"),
    # a traceback before (AttributeError: 'str' object has no attribute 'get')
    ("param sections given as names", sweep({"param": ["sp", "mup"]}),
     "axes.param[0]: 'sp' is not a param section"),
    ("negative steps", with_train(steps=-5), "train.steps"),
    ("no layers", with_model(n_layer=0), "model.n_layer"),
    ("base_width is text", with_model(base_width="x"), "model.base_width"),
    ("misspelled model field", with_model(nlayers=2), "model.nlayers"),
    ("empty storage", sweep(storage=""), "storage"),
    ("unknown Tune logger", sweep(loggers=["comet"]), "loggers.0"),
    ("unknown data source", sweep(data={"source": "nosuch"}), "data.source"),
    ("text data path that does not exist",
     sweep(data={"source": "text", "path": "/nonexistent/corpus.txt"}),
     "/nonexistent/corpus.txt"),
]


def write(path: Path, doc: dict | str) -> Path:
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def assert_one_line_error(capsys, rc: int, needle: str) -> str:
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("case,doc,needle", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_a_malformed_sweep_file_is_refused_in_one_line_and_writes_nothing(
        tmp_path, capsys, case, doc, needle):
    storage = tmp_path / "results"
    doc = {"storage": str(storage), **doc}
    path = write(tmp_path / "sweep.yaml", doc)
    for command in (["validate", str(path)], ["sweep", str(path)]):
        assert_one_line_error(capsys, main(command), needle)
    assert not storage.exists()


def test_an_empty_file_and_a_scalar_file_are_refused(tmp_path, capsys):
    storage = tmp_path / "results"
    empty = write(tmp_path / "empty.yaml", "")
    assert_one_line_error(capsys, main(["sweep", str(empty), "--storage", str(storage)]),
                          "name")  # an empty file is an empty mapping: the name is missing
    scalar = write(tmp_path / "scalar.yaml", "just some text\n")
    assert_one_line_error(capsys, main(["sweep", str(scalar), "--storage", str(storage)]),
                          "expected a mapping")
    assert not storage.exists()


# -- command lines -------------------------------------------------------------------------------

def _ok_sweep(tmp_path: Path) -> Path:
    return write(tmp_path / "ok.yaml", {**BASE, "storage": str(tmp_path / "results")})


def _trial_config(tmp_path: Path) -> Path:
    return write(tmp_path / "trial.yaml", {"model": BASE["model"], "train": BASE["train"]})


def sweep_with(*options: str):
    """argv of `mutransfer sweep` on a good sweep file, with `options` after it."""
    return lambda t: ["sweep", str(_ok_sweep(t)), *options]


def train_set(assignment: str):
    """argv of `mutransfer train` on a good trial config with one `--set`."""
    return lambda t: ["train", str(_trial_config(t)), "--set", assignment, "--out",
                      str(t / "results")]


def _symlink_loop(tmp_path: Path) -> str:
    """a -> b -> a: a path that names nothing (issue 31)."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return str(tmp_path / "a")


def _long_name(tmp_path: Path) -> str:
    """a folder name of 300 bytes, over every local filesystem's 255 (issue 31)"""
    (tmp_path / "stores").mkdir()
    return str(tmp_path / "stores" / ("x" * 300))


# (case, argv built from the test folder, text the one line must contain)
BAD_COMMANDS = [
    ("storage a symlink loop", lambda t: ["sweep", str(_ok_sweep(t)), "--storage",
                                          _symlink_loop(t)], "symlink loop"),
    ("storage a symlink loop, dry run",
     lambda t: ["sweep", str(_ok_sweep(t)), "--storage", _symlink_loop(t), "--dry-run"],
     "symlink loop"),
    ("analyze a symlink loop", lambda t: ["analyze", _symlink_loop(t)], "symlink loop"),
    ("plot a symlink loop", lambda t: ["plot", _symlink_loop(t)], "symlink loop"),
    ("storage name over 255 bytes",
     lambda t: ["sweep", str(_ok_sweep(t)), "--storage", _long_name(t)], "a name of 300 bytes"),
    ("analyze a name over 255 bytes", lambda t: ["analyze", _long_name(t)],
     "a name of 300 bytes"),
    ("missing sweep file", lambda t: ["sweep", str(t / "missing.yaml")], "no such file"),
    ("a folder for a sweep file", lambda t: ["validate", str(t)], ": not a file"),
    ("a device for a sweep file", lambda t: ["validate", "/dev/null"], "/dev/null: not a file"),
    ("analyze a file", lambda t: ["analyze", str(_ok_sweep(t))], "a file, not a results folder"),
    ("plot a file", lambda t: ["plot", str(_ok_sweep(t))], "a file, not a results folder"),
    ("dashboard address given to sweep", sweep_with("--address", "http://127.0.0.1:8265"),
     "mutransfer submit"),
    ("address without a port", sweep_with("--address", "headnode"), "HOST:PORT"),
    ("address with a word for a port", sweep_with("--address", "127.0.0.1:gcs"), "HOST:PORT"),
    ("address whose host does not resolve", sweep_with("--address", "no-such-host.invalid:6379"),
     "cannot reach a Ray cluster"),
    ("submit to an unreachable dashboard",
     lambda t: ["submit", str(_ok_sweep(t)), "--address", "http://127.0.0.1:1",
                "--working-dir", str(t)], "cannot reach the Ray dashboard"),
    ("submit to a port out of range",
     lambda t: ["submit", str(_ok_sweep(t)), "--address", "127.0.0.1:99999",
                "--working-dir", str(t)], "not a valid HOST:PORT"),
    ("logs from an unreachable dashboard",
     lambda t: ["logs", "raysubmit_1", "--address", "http://127.0.0.1:1"], "cannot reach"),
    ("status at a dashboard URL with an unclosed IPv6 bracket",
     lambda t: ["status", "raysubmit_1", "--dashboard", "http://[::1"], "not a valid HOST:PORT"),
    ("storage under a regular file",
     lambda t: ["sweep", str(_ok_sweep(t)), "--storage", str(t / "ok.yaml" / "results")],
     "not writable"),
    ("storage with an unknown URI scheme", sweep_with("--storage", "nosuchscheme://bucket/results"),
     "nosuchscheme"),
    ("negative --num-cpus", sweep_with("--num-cpus", "-1"), "--num-cpus"),
    ("negative --num-gpus", sweep_with("--num-gpus", "-1"), "--num-gpus"),
    ("--num-cpus with a cluster address", sweep_with("--num-cpus", "2", "--address", "auto"),
     "local Ray"),
    ("--set without a value", train_set("train.steps"), "expected key=value"),
    ("--set with an empty key", train_set("=3"), "--set '=3': an empty key"),
    ("--set with an empty part in its key", train_set("train..lr=3"),
     "--set 'train..lr=3': an empty key"),
    ("--set of an unknown field", train_set("train.stepz=3"), "train.stepz"),
    ("--set of the wrong type", train_set("train.steps=many"), "train.steps"),
    ("--set into a number", train_set("train.steps.x=1"), "not a mapping"),
]


@pytest.mark.parametrize("case,argv,needle", BAD_COMMANDS, ids=[c[0] for c in BAD_COMMANDS])
def test_a_bad_command_line_is_refused_in_one_line_and_writes_nothing(
        tmp_path, capsys, case, argv, needle):
    assert_one_line_error(capsys, main(argv(tmp_path)), needle)
    assert not (tmp_path / "results").exists()  # the storage (or --out) named in every case


@pytest.mark.parametrize("argv,needle", [
    (["sweep", "{t}/missing.yaml"], "no such file"),
    (["sweep", "{t}/ok.yaml", "--num-cpus", "-1"], "--num-cpus"),
    (["sweep", "{t}/ok.yaml", "--address", "127.0.0.1:1"], "cannot reach"),
], ids=["missing file", "negative cpus", "nothing listening"])
def test_the_process_exits_2_with_one_line_and_no_traceback(tmp_path, argv, needle):
    _ok_sweep(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "mutransfer.cli",
                           *[a.format(t=tmp_path) for a in argv]],
                          cwd=REPO, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
@pytest.mark.ray
def test_a_trial_no_node_can_host_is_refused_and_leaves_no_folder(tmp_path, capsys):
    """Found only once Ray reports its nodes: the folder the run had set up is removed."""
    storage = tmp_path / "results"
    path = write(tmp_path / "big.yaml", sweep(resources={"cpus_per_trial": 4096},
                                              storage=str(storage)))
    line = assert_one_line_error(capsys, main(["sweep", str(path), "--num-cpus", "1"]),
                                 "resources.cpus_per_trial")
    assert "4096" in line
    assert not storage.exists()


# -- pre-flight: what would fail every trial fails before any ------------------------------------

def test_data_too_small_for_one_batch_is_refused_before_any_trial(tmp_path, capsys):
    """30 bytes of text: the train split holds a sequence, the eval split (its last 5%) does
    not. Each trial would fail in Ray (and be retried); the driver draws a batch of each split
    first and refuses the sweep."""
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("hello world, hello again, bye\n")
    storage = tmp_path / "results"
    path = write(tmp_path / "tiny.yaml", sweep(data={"source": "text", "path": str(corpus)},
                                               storage=str(storage)))
    for command in (["validate", str(path)], ["sweep", str(path)]):
        line = assert_one_line_error(capsys, main(command), "eval split has 2 tokens")
        assert "seq_len + 1 = 17" in line
    assert not storage.exists()


def test_a_sweep_file_that_is_not_utf8_is_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(yaml.safe_dump(BASE).encode() + b"# caf\xe9\n")
    for command in (["validate", str(path)], ["sweep", str(path)]):
        line = assert_one_line_error(capsys, main(command), "not UTF-8")
        assert "0xe9" in line


def test_a_grid_above_the_cell_limit_is_refused_before_any_cell_is_built(tmp_path, capsys):
    """20,000 cells (the default limit is 10,000): refused from the axes alone; --max-cells
    raises the limit explicitly."""
    storage = tmp_path / "results"
    big = write(tmp_path / "big.yaml", sweep({"width": list(range(16, 116)),
                                              "lr": {"log2": [-12, -2], "per_octave": 10},
                                              "seed": [0, 1]}, storage=str(storage)))
    for command in (["validate", str(big)], ["sweep", str(big)]):
        line = assert_one_line_error(capsys, main(command), "20,200 cells")
        assert "--max-cells 20200" in line
    small = write(tmp_path / "small.yaml", sweep({"parameterization": ["sp", "mup"],
                                                  "lr": {"sp": [0.001, 0.01], "mup": [0.1]}},
                                                 storage=str(storage)))
    assert_one_line_error(capsys, main(["validate", str(small), "--max-cells", "2"]),
                          "3 cells, more than the limit of 2")
    assert main(["validate", str(small), "--max-cells", "3"]) == 0
    assert "ok, 3 cells" in capsys.readouterr().out
    assert not storage.exists()


# -- outputs checked before the work -------------------------------------------------------------

def test_train_refuses_an_out_file_in_a_missing_folder_before_training(tmp_path, capsys):
    config = _trial_config(tmp_path)
    line = assert_one_line_error(
        capsys, main(["train", str(config), "--out", str(tmp_path / "missing/dir/x.json")]),
        "does not exist")
    assert "missing/dir" in line


@pytest.mark.parametrize("command", ["plot", "analyze"])
def test_plot_and_analyze_refuse_an_out_folder_they_cannot_write(tmp_path, capsys, command):
    from tests.sweeps import planted_results

    results = planted_results(tmp_path / "res", [64, 128])
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    assert_one_line_error(capsys, main([command, str(results), "--out", str(blocker / "out")]),
                          "is a file")


def test_coord_check_refuses_an_out_folder_it_cannot_write_before_measuring(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    assert_one_line_error(capsys, main(["coord-check", "--widths", "16", "32", "--steps", "1",
                                        "--seeds", "0", "--param", "sp",
                                        "--out", str(blocker / "cc")]), "is a file")


# -- storage: only a results store, or an empty or new folder ------------------------------------

def test_a_non_empty_folder_that_is_not_a_store_is_refused(tmp_path, capsys):
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "report.html").write_text("<p>mine</p>")
    path = write(tmp_path / "s.yaml", sweep(storage=str(folder)))
    for argv in (["sweep", str(path)], ["sweep", str(path), "--dry-run"]):
        assert_one_line_error(capsys, main(argv), "not a mutransfer results store")
    assert sorted(p.name for p in folder.iterdir()) == ["report.html"]  # untouched


def test_stores_old_and_new_and_empty_folders_are_accepted(tmp_path, capsys):
    from mutransfer.results.store import MARKER, Store

    old = tmp_path / "old"  # written before the marker existed: trials/ and steps/
    (old / "trials").mkdir(parents=True)
    (old / "steps").mkdir()
    (old / "sweep.yaml").write_text("name: bad\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    new = tmp_path / "new"
    Store(new).ensure_writable()
    assert (new / MARKER).is_file()
    (new / "checkpoints").mkdir()  # what a run keeps while trials run: part of a store
    for folder in (old, empty, new, tmp_path / "not-yet"):
        path = write(tmp_path / "s.yaml", sweep(storage=str(folder)))
        assert main(["sweep", str(path), "--dry-run"]) == 0, capsys.readouterr().err


# -- a model no machine holds --------------------------------------------------------------------

HUGE = str(2**40)  # a width whose embedding alone is petabytes: never allocatable


@pytest.mark.parametrize("argv", [
    lambda t: ["train", str(_trial_config(t)), "--set", f"width={HUGE}", "--out",
               str(t / "results" / "x.json")],
    lambda t: ["roles", str(_trial_config(t)), "--width", HUGE],
    lambda t: ["coord-check", "--widths", "16", HUGE, "--param", "sp", "--seeds", "0",
               "--steps", "1", "--out", str(t / "results")],
], ids=["train", "roles", "coord-check"])
def test_a_width_too_large_for_memory_is_one_line_not_a_traceback(tmp_path, capsys, argv):
    """Found from the cost model's count before any data loads or any model is built (it was
    found at the build, after the progress of the token cache or a coordinate check's smaller
    widths): one error line and nothing else, exit 2, nothing written."""
    (tmp_path / "results").mkdir()
    rc = main(argv(tmp_path))
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err, err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert f"width {HUGE}: the model does not fit in memory" in err
    assert not any((tmp_path / "results").iterdir())


@pytest.mark.parametrize("mfu", ["0", "2", "nan"])
def test_a_bad_mfu_is_refused_before_validate_says_ok(tmp_path, capsys, mfu):
    """Refused with the command line, not after the file's `ok` line was printed."""
    rc = main(["validate", str(_ok_sweep(tmp_path)), "--mfu", mfu])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", out
    assert err.count("\n") == 1 and err.startswith("error: ") and "--mfu" in err, err


@pytest.mark.parametrize("n", ["0", "-1"])
def test_a_cell_limit_below_one_is_refused_with_the_command_line(tmp_path, capsys, n):
    """--max-cells 0 was taken, and every sweep then refused as 'more than the limit of 0'."""
    rc = main(["validate", str(_ok_sweep(tmp_path)), "--max-cells", n])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", out
    assert err.count("\n") == 1 and f"--max-cells: {n}: give a whole number" in err, err
