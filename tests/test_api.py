"""The Python API: `import mutransfer` is cheap and names the public entry points; the
README's example runs as written; Ray Tune sees every eval point, keeps its folder under the
sweep's storage, and the `loggers:` of a sweep file write there (TensorBoard read back)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import mutransfer
from mutransfer.results.store import read_tables

REPO = Path(__file__).resolve().parents[1]


def test_import_mutransfer_loads_neither_torch_nor_ray():
    code = ("import sys, mutransfer\n"
            "heavy = [m for m in ('torch', 'ray', 'pandas', 'optuna') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "print(sorted(mutransfer.__all__))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    assert "run" in out and "SweepResult" in out


def test_the_public_names_are_the_modules_own():
    from mutransfer.analysis import analyze

    # the driver's run after the CLI's factory probe; the trainer's run_trial with the
    # caller's subnormals kept
    from mutransfer.commands.api import run, run_trial
    from mutransfer.config import TrialConfig
    from mutransfer.sweep.run.driver import SweepResult, dry_run

    assert (mutransfer.run, mutransfer.SweepResult, mutransfer.run_trial) == \
        (run, SweepResult, run_trial)
    assert (mutransfer.TrialConfig, mutransfer.read_tables, mutransfer.analyze) == \
        (TrialConfig, read_tables, analyze)
    from mutransfer import sweep

    assert sweep.dry_run is dry_run and sweep.SweepResult is SweepResult
    with pytest.raises(AttributeError):
        mutransfer.no_such_name  # noqa: B018


def test_a_bad_sweep_dict_raises_a_user_error_and_writes_nothing(tmp_path):
    from mutransfer.errors import UserError

    with pytest.raises(UserError, match="axes.lr"):
        mutransfer.run({"name": "bad", "axes": {"lr": [0]}}, storage=str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()


SMALL = {"name": "crash", "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
         "train": {"steps": 2, "batch_size": 2, "seq_len": 16, "eval_every": 1},
         "data": {"source": "synthetic"}, "axes": {"width": [16], "lr": [0.001]}}


@pytest.mark.parametrize("crash", [RuntimeError("Ray failed to start"), KeyboardInterrupt()])
def test_a_run_that_crashes_before_any_result_leaves_no_results_folder(tmp_path, monkeypatch,
                                                                        crash):
    """A crash or Ctrl-C after the store was set up (sweep.yaml, empty tables) but before
    a trial wrote anything: the folder this run created goes, as after a refusal. Before, an
    empty store stayed behind."""
    from mutransfer.sweep.run import driver

    def start_trials(plan, store, *args):
        assert Path(store.root, "sweep.yaml").is_file()  # the store was set up
        raise crash

    monkeypatch.setattr(driver, "run_phases", start_trials)
    with pytest.raises(type(crash)):
        mutransfer.run(SMALL, storage=str(tmp_path / "results" / "crash"), out=io.StringIO())
    assert not (tmp_path / "results").exists()


def test_a_run_that_crashes_keeps_a_folder_holding_a_checkpoint(tmp_path, monkeypatch):
    """A trial's checkpoint is a result: a later run resumes from it, so the folder stays."""
    from mutransfer.sweep.run import driver

    def train_then_crash(plan, store, *args):
        Path(store.root, "checkpoints").mkdir()
        Path(store.root, "checkpoints", "t1.pt").write_bytes(b"state")
        raise RuntimeError("node lost")

    monkeypatch.setattr(driver, "run_phases", train_then_crash)
    with pytest.raises(RuntimeError):
        mutransfer.run(SMALL, storage=str(tmp_path / "r"), out=io.StringIO())
    assert (tmp_path / "r" / "checkpoints" / "t1.pt").read_bytes() == b"state"


# -- the README's commands: what CI runs, and the CPU build of torch before the first install ----

def readme_bash_lines() -> list[str]:
    text = (REPO / "README.md").read_text()
    return [ln for block in re.findall(r"```bash\n(.*?)```", text, re.S)
            for ln in block.splitlines()]


def test_the_readme_test_command_is_the_one_ci_runs():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    [install_and_test] = [ln for ln in ci if ln.startswith("python3 -m venv")]
    assert install_and_test in readme_bash_lines()


def test_the_readme_installs_the_cpu_build_of_torch_before_any_other_install():
    installs = [ln for ln in readme_bash_lines() if "pip install" in ln]
    assert "--index-url https://download.pytorch.org/whl/cpu" in installs[0]
    assert installs[1].endswith("mutransfer sweep sweeps/quickstart.yaml")


# -- the README's example, run as written (slow: it starts Ray and trains 6 tiny trials) ----------

def readme_example() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## From Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory, ray_local):
    """The README's example in a fresh folder, on the shared local Ray: its namespace and what
    it printed."""
    folder = tmp_path_factory.mktemp("readme")
    code = readme_example()
    # the one change: the run's header and progress line go to a buffer, not the test's stdout
    code = code.replace("mutransfer.run(spec)", "mutransfer.run(spec, num_cpus=2, out=log)")
    namespace: dict = {"log": io.StringIO()}
    printed = io.StringIO()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "README.md", "exec"), namespace)
    finally:
        os.chdir(cwd)
    return namespace, printed.getvalue()


@pytest.mark.slow
def test_the_readme_example_runs_the_sweep_and_analyzes_it(readme_run):
    ns, printed = readme_run
    result = ns["result"]
    assert isinstance(result, mutransfer.SweepResult)
    assert result.ok and result.to_run == result.planned == 6 and result.remaining == 0
    assert result.complete + result.diverged == 6 and result.failed == 0
    assert Path(result.storage).is_absolute() and result.storage.endswith("results/notebook")
    assert sorted(ns["trials"]["width"].unique()) == [16, 32] and len(ns["trials"]) == 6
    assert set(ns["a"].lr_opt["width"]) == {16, 32}
    assert "edge_side" in printed  # an lr* on the grid's edge says so
    assert printed.splitlines()[0] == f"6 0 0 {result.storage}"
    assert "sweep notebook: 6 cells, 0 stored, 6 to run" in ns["log"].getvalue()


def tensorboard_scalars(path: Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of a TensorBoard event file (TFRecord framing: length, CRC,
    the Event protobuf, CRC)."""
    from tensorboardX.proto import event_pb2

    data, i, out = path.read_bytes(), 0, {}
    while i < len(data):
        (n,) = struct.unpack("<Q", data[i:i + 8])
        event = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
        i += 12 + n + 4
        for v in event.summary.value:
            out.setdefault(v.tag, []).append((event.step, v.simple_value))
    return out


@pytest.mark.slow
def test_tensorboard_holds_every_eval_loss_under_the_storage(readme_run):
    result = readme_run[0]["result"]
    tune = Path(result.storage) / "tune"
    runs = list(tune.glob("run-*"))
    assert len(runs) == 1  # one Tune experiment folder per run of the sweep
    tables = read_tables(result.storage)
    assert set(tables.trials["trial_id"]) == {p.name for p in runs[0].iterdir() if p.is_dir()}
    for tid, steps in tables.steps.groupby("trial_id"):
        (events,) = (runs[0] / tid).glob("events.out.tfevents.*")
        scalars = tensorboard_scalars(events)
        logged = [v for _, v in scalars["ray/tune/eval_loss"]]
        assert logged == pytest.approx(steps["eval_loss"].tolist(), rel=1e-6)  # step 0, 10, 20
        assert [s for s, _ in scalars["ray/tune/eval_loss"]][1:] == steps["step"].tolist()[1:]
        # the last report is the trial's result: what the searchers and callbacks read
        final = tables.trials.set_index("trial_id").loc[tid, "final_eval_loss"]
        assert scalars["ray/tune/final_eval_loss"][-1][1] == pytest.approx(final, rel=1e-6)
        assert scalars["ray/tune/objective"][-1][1] == pytest.approx(final, rel=1e-6)
    # Tune's folder is not part of the store: a re-run finds every cell complete
    assert result.tables().trials.equals(tables.trials)
    state = json.loads(next(runs[0].glob("experiment_state-*.json")).read_text())
    assert state  # Tune's own bookkeeping stays for its users (ResultGrid, restore)


@pytest.mark.skipif(__import__("importlib").util.find_spec("wandb") is not None,
                    reason="wandb is installed here")
def test_a_logger_whose_package_is_missing_is_refused_before_anything_runs(tmp_path, capsys):
    import yaml

    from mutransfer.cli import main
    from tests.sweeps import tiny_sweep

    path = tmp_path / "s.yaml"
    storage = tmp_path / "results"
    path.write_text(yaml.safe_dump(tiny_sweep("s", storage=str(storage), loggers=["wandb"])))
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "loggers: wandb needs the wandb package" in err[0], err
    assert not storage.exists()
    # validate names packages, not data, as what --no-data leaves out (it said "data only on
    # the cluster?")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "installed on the cluster only?" in err[0], err
    assert "data only" not in err[0]
    assert main(["validate", str(path), "--no-data"]) == 0


def test_tunes_folder_is_in_the_stores_filesystem_for_a_uri_storage_too(tmp_path):
    from ray.train._internal.storage import StorageContext

    from mutransfer.results.fs import join
    from mutransfer.results.store import Store
    from mutransfer.sweep.run.runner import TUNE_FOLDER

    store = Store(f"file://{tmp_path}/results")  # a URI, as s3:// or gs:// would be
    ctx = StorageContext(storage_path=join(store.location, TUNE_FOLDER),
                         experiment_dir_name="run-x")
    assert ctx.experiment_fs_path == f"{tmp_path}/results/tune/run-x"
    store.ensure_writable()
    store.check_is_store()  # the tune/ folder beside the tables is the store's own
