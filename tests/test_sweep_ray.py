"""Sweeps on a real local Ray with the real trainer at tiny sizes: tables, resume, extend,
divergence, failures and adaptive search. One Ray instance serves the whole module."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pandas as pd
import pytest
import yaml

from mutransfer.commands.sweep import SweepArgs, run_sweep
from mutransfer.results.store import read_tables
from mutransfer.sweep.plan.cells import load_plan
from tests.sweeps import write_sweep

pytestmark = pytest.mark.slow


def sweep(path: Path, **kw) -> tuple[int, str]:
    out = io.StringIO()
    rc = run_sweep(SweepArgs(str(path), analysis=False, out=out, **kw))
    return rc, out.getvalue()


def part_stamps(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob("*.parquet")}


def test_sweep_stores_both_tables_then_reruns_nothing_then_runs_only_new_cells(
        tmp_path, ray_local):
    path = write_sweep(tmp_path, "grid", {"width": [16, 32], "lr": [0.001, 0.01]})
    results = tmp_path / "grid"

    rc, out = sweep(path)
    assert rc == 0, out
    assert "4 cells, 0 stored, 4 to run" in out and "4 complete, 0 diverged, 0 failed" in out
    tables = read_tables(results)
    plan_ids = {c.trial_id for c in load_plan(path).cells}
    assert set(tables.trials["trial_id"]) == plan_ids and len(tables.trials) == 4
    assert (tables.trials["status"] == "complete").all()
    assert sorted(tables.trials["lr"].unique()) == [0.001, 0.01]
    for _, steps in tables.steps.groupby("trial_id"):
        assert steps["step"].tolist() == [0, 5, 10]
    assert (results / "sweep.yaml").read_text() == path.read_text()

    stamps = part_stamps(results / "trials")
    rc, out = sweep(path)
    assert rc == 0 and "0 trials to run" in out
    assert part_stamps(results / "trials") == stamps

    doc = yaml.safe_load(path.read_text())
    doc["axes"]["lr"].append(0.003)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    rc, out = sweep(path)
    assert rc == 0 and "6 cells, 4 stored, 2 to run" in out
    tables = read_tables(results)
    assert len(tables.trials) == 6 and tables.trials["trial_id"].is_unique
    assert sorted(tables.trials.loc[tables.trials["lr"] == 0.003, "width"]) == [16, 32]
    after = part_stamps(results / "trials")
    assert {k: after[k] for k in stamps} == stamps  # nothing stored was rewritten
    assert list((results / "history").glob("sweep-*.yaml"))  # the earlier file is kept


def test_a_sweep_asking_for_another_ray_than_the_one_this_process_runs_is_refused(
        tmp_path, ray_local, capsys):
    """In a process that already runs Ray (a notebook, this suite: 2 CPUs), a sweep is not
    sent to it silently when its options ask for another: one line, exit 2, nothing written."""
    from mutransfer.cli import main

    path = write_sweep(tmp_path, "other", {"lr": [0.001]})
    with socket.socket() as listener:  # a reachable address that is not this process's Ray
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        elsewhere = f"127.0.0.1:{listener.getsockname()[1]}"
        for extra, said in ((["--num-cpus", "1"], "already runs a Ray with 2 CPUs"),
                            (["--address", elsewhere], "this process already runs Ray (at")):
            assert main(["sweep", str(path), *extra]) == 2, extra
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and said in err, err
            assert not (tmp_path / "other").exists()


def test_a_refused_sweep_leaves_no_folder_it_made_above_its_store(tmp_path, ray_local,
                                                                  capsys):
    """The sweep file's default storage is results/NAME: a run refused after the store was
    set up removes results/ too when it made it (and it is still empty)."""
    from mutransfer.cli import main

    path = write_sweep(tmp_path, "nested", {"lr": [0.001]}, tmp_path / "results" / "nested")
    assert main(["sweep", str(path), "--num-cpus", "1"]) == 2
    assert "already runs a Ray with 2 CPUs" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_a_diverging_cell_is_stored_as_diverged_and_the_sweep_carries_on(diverging_sweep):
    path, rc, out = diverging_sweep
    assert rc == 0, out
    assert "1 complete, 1 diverged, 0 failed" in out
    trials = read_tables(path.parent / "div").trials.set_index("lr")
    assert trials.loc[1000.0, "status"] == "diverged" and trials.loc[1000.0, "diverged"]
    assert 1 <= trials.loc[1000.0, "diverge_step"] <= 10
    assert trials.loc[0.001, "status"] == "complete"
    rc, out = sweep(path)
    assert "0 trials to run" in out  # a diverged cell is done, not retried


def test_a_trial_failing_on_its_config_is_recorded_as_failed_without_retries(
        tmp_path, ray_local):
    """A UserError (here: CUDA asked for on a machine without it) fails the same way on every
    try: it is recorded at once, never retried. The folder, holding a failed and a complete
    trial, reads as one table in any Parquet reader."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("the failure is a CUDA trial on a machine without CUDA")
    path = write_sweep(tmp_path, "fail", {"width": [16], "train.device": ["cpu", "cuda"]},
                       retries=2)
    rc, out = sweep(path)
    assert rc == 1, out
    assert "retrying" not in out and "not retried" in out and "train.device" in out, out
    assert "1 complete, 0 diverged, 1 failed" in out
    trials = read_tables(tmp_path / "fail").trials.set_index("train.device")
    assert trials.loc["cpu", "status"] == "complete"
    assert trials.loc["cuda", "status"] == "failed" and "cuda" in trials.loc["cuda", "error"]
    assert pd.read_parquet(tmp_path / "fail" / "trials").shape[0] == 2
    assert pd.isna(pd.read_parquet(tmp_path / "fail" / "trials").set_index("train.device")
                   .loc["cuda", "final_eval_loss"])
    rc, out = sweep(path, dry_run=True)
    assert "2 cells, 1 stored, 1 to run" in out and "failed before, to run" in out


def test_optuna_search_proposes_lrs_in_range_and_resumes(tmp_path, ray_local):
    path = write_sweep(tmp_path, "opt", {"width": [16], "lr": {"log2": [-10, -4]}},
                       search={"kind": "optuna", "trials_per_width": 3})
    rc, out = sweep(path)
    assert rc == 0, out
    trials = read_tables(tmp_path / "opt").trials
    assert len(trials) == 3 and (trials["search"] == "optuna").all()
    assert trials["lr"].between(2 ** -10, 2 ** -4).all() and trials["lr"].is_unique
    rc, out = sweep(path)
    assert "0 to run" in out and "0 trials to run" in out


def test_a_swept_cell_re_run_with_mutransfer_train_gives_its_losses_bit_for_bit(
        tmp_path, ray_local):
    """A sweep trial runs at 1 torch thread (cpus_per_trial 1); `mutransfer train` of the
    stored config, in a fresh process, must too (issue 31: at torch's default of every core
    the losses differed in their last bits). The cell is large enough for torch to split
    its matrix products among threads."""
    import json
    import os
    import subprocess
    import sys

    path = write_sweep(tmp_path, "cell", {"width": [32], "lr": [0.004]}, steps=6,
                       eval_every=3)
    doc = yaml.safe_load(path.read_text())
    doc["train"].update(batch_size=4, seq_len=64)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    rc, out = sweep(path)
    assert rc == 0, out
    tables = read_tables(tmp_path / "cell")
    [trial] = tables.trials.to_dict("records")
    assert json.loads(trial["env"])["torch_threads"] == 1  # recorded with the trial
    config = tmp_path / "trial.yaml"
    config.write_text(yaml.safe_dump(json.loads(trial["config"])))
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-m", "mutransfer.cli", "train", str(config),
                           "--out", str(tmp_path / "rerun.json")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rerun = json.loads((tmp_path / "rerun.json").read_text())["history"]
    stored = tables.steps.sort_values("step")
    assert [p["step"] for p in rerun] == stored["step"].tolist() == [0, 3, 6]
    assert [p["eval_loss"] for p in rerun] == stored["eval_loss"].tolist()
    assert [p.get("train_loss") for p in rerun][1:] == stored["train_loss"].tolist()[1:]
