"""A model this machine's memory can never hold is refused before anything runs or is
written (mutransfer/cost/machine.py): found at its build, it failed after smaller models had
trained, and a deep one was built block by block without end."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from mutransfer.cost.machine import beyond_memory
from mutransfer.sweep.run.driver import check_runs_here, prepare

DEEP = 10**8  # blocks: terabytes of weights at any width


def _sweep(tmp_path: Path, n_layer: int, batch_size: int = 2) -> Path:
    doc = {"name": "deep", "storage": str(tmp_path / "results" / "deep"),
           "model": {"n_layer": n_layer, "d_state": 4, "base_width": 16},
           "train": {"steps": 2, "batch_size": batch_size, "seq_len": 16, "eval_every": 2},
           "axes": {"width": [16], "lr": [0.01]}}
    path = tmp_path / "deep.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "run"])
def test_a_sweep_of_a_model_larger_than_the_machine_is_one_line_and_writes_nothing(
        tmp_path, capsys, dry):
    (tmp_path / "results").mkdir()
    rc = main(["sweep", str(_sweep(tmp_path, DEEP)), *(["--dry-run"] if dry else [])])
    out, err = capsys.readouterr()
    assert rc == 2 and "Traceback" not in err, err
    assert err.count("\n") == 1, err
    assert f"width 16, n_layer {DEEP}: the model does not fit in memory" in err
    assert "this machine has" in err and out == ""
    assert not any((tmp_path / "results").iterdir())


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "run"])
def test_a_sweep_whose_batch_outgrows_the_machine_is_one_line_and_writes_nothing(
        tmp_path, capsys, dry):
    """The batch's token ids alone (int64, batch x (seq_len + 1)): before, the sweep started
    and its trial failed at the first batch."""
    (tmp_path / "results").mkdir()
    path = _sweep(tmp_path, 1, batch_size=10**12)
    rc = main(["sweep", str(path), *(["--dry-run"] if dry else [])])
    out, err = capsys.readouterr()
    assert rc == 2 and err.count("\n") == 1 and out == "", err
    assert "train.batch_size 1000000000000 x train.seq_len 16: one batch's token ids" in err
    assert not any((tmp_path / "results").iterdir())


def test_a_file_meant_for_a_cluster_is_not_held_to_this_machine(tmp_path):
    """validate and submit read a file a cluster's nodes run: only a run here is checked."""
    plan = prepare(str(_sweep(tmp_path, DEEP)), check_data=False)
    check_runs_here(plan, "ray://head:10001")
    assert main(["validate", str(_sweep(tmp_path, DEEP)), "--no-data"]) == 0


def test_the_bound_is_weights_gradients_and_optimizer_state_and_user_models_are_not_counted():
    config = {"width": 64, "model": {"n_layer": 2, "d_state": 4},
              "train": {"optimizer": "adamw"}}
    assert beyond_memory(config, 10**12) is None
    assert "take 0 GB, this machine has 0 GB" in beyond_memory(config, 1000)
    assert beyond_memory(config, None) is None
    user = {**config, "model": {"arch": "examples.tiny_gpt:tiny_gpt"}}
    assert beyond_memory(user, 1000) is None

