"""Trials resume where they stopped: a trial killed after an eval point and run again resumes
from its checkpoint in the store with exactly the losses of an uninterrupted run (bit for bit
on CPU), the store keeps each step row once, the checkpoint goes once the trial is stored, and a
damaged checkpoint is ignored (the trial starts over) instead of crashing it."""

from __future__ import annotations

import io
import math
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.results.checkpoints import TrialCheckpoint
from mutransfer.results.store import Attempt, Store, read_tables
from mutransfer.sweep.run.trainable import TrialUnit, run_unit
from mutransfer.train import run_trial

REPO = Path(__file__).resolve().parents[1]
STEPS, EVERY = 12, 3
CONFIG = {"width": 16, "model": {"base_width": 16, "n_layer": 1, "d_state": 4},
          "train": {"optimizer": "adamw", "lr": 0.01, "steps": STEPS, "batch_size": 2,
                    "seq_len": 16, "eval_every": EVERY, "eval_batches": 1, "warmup": 2,
                    "schedule": "cosine"}}
LOSSES = ["train_loss", "eval_loss", "grad_norm", "lr", "tokens"]
RESULT = ["status", "final_eval_loss", "best_eval_loss", "last_finite_loss", "initial_loss",
          "steps_done", "tokens", "evals"]


def payload(config: dict = CONFIG) -> TrialUnit:
    return TrialUnit.of(config, {"width": config["width"], "lr": config["train"]["lr"]})


class Killed(Exception):
    """Stands for the process dying: nothing after it runs."""


def crash_after_reporting(monkeypatch, step: int) -> None:
    """The attempt's worker dies right after it wrote the steps row of `step`."""
    original = Attempt.write_step

    def write_step(self, point):
        original(self, point)
        if point["step"] == step:
            raise Killed(f"killed after step {step}")

    monkeypatch.setattr(Attempt, "write_step", write_step)


def straight_run(root: Path) -> dict:
    metrics = run_unit(payload(), str(root), "s")
    assert metrics["resumed_from"] is None
    return metrics


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    """A store holding the trial of CONFIG run uninterrupted (read only by the tests)."""
    root = tmp_path_factory.mktemp("straight")
    straight_run(root)
    return root


def same_losses(a: Path, b: Path) -> None:
    """Both stores hold the same trial with bit-identical losses (NaN at step 0 included)."""
    ta, tb = read_tables(a), read_tables(b)
    pd.testing.assert_frame_equal(ta.steps[["step", *LOSSES]], tb.steps[["step", *LOSSES]],
                                  check_exact=True)
    pd.testing.assert_frame_equal(ta.trials[RESULT], tb.trials[RESULT], check_exact=True)


def checkpoint_files(root: Path) -> list[str]:
    folder = root / "checkpoints"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def test_a_trial_killed_after_an_eval_point_resumes_with_the_uninterrupted_losses(
        tmp_path, monkeypatch, straight):
    killed = tmp_path / "killed"
    with monkeypatch.context() as m:
        crash_after_reporting(m, 2 * EVERY + EVERY)  # after the eval at step 9
        with pytest.raises(Killed):
            run_unit(payload(), str(killed), "s", save_every_eval=True)
    assert checkpoint_files(killed) == [f"{payload().trial_id}.pt"]

    metrics = run_unit(payload(), str(killed), "s")
    # the checkpoint of step 9 was written after its report, so the last one is step 6
    assert metrics["resumed_from"] == 2 * EVERY
    same_losses(straight, killed)
    steps = read_tables(killed).steps
    assert steps["step"].tolist() == list(range(0, STEPS + 1, EVERY))
    assert steps["attempt"].nunique() == 1  # every row rewritten by the resuming attempt
    # on disk: one steps part and one trial part, nothing of the killed attempt left
    assert len(list((killed / "steps").glob("*.parquet"))) == 1
    assert checkpoint_files(killed) == []


@pytest.mark.slow
def test_a_worker_sigkilled_mid_trial_resumes_with_the_uninterrupted_losses(tmp_path, straight):
    """A real kill: the process running the trial gets SIGKILL right after its second
    checkpoint (step 6) is on disk, while training on."""
    killed = tmp_path / "killed"
    code = (
        "import os, signal, sys\n"
        "from mutransfer.results.checkpoints import TrialCheckpoint\n"
        "from mutransfer.sweep.run.trainable import run_unit\n"
        "from tests.test_resume import payload\n"
        "save = TrialCheckpoint.save\n"
        "def save_then_die(self, state):\n"
        "    done = save(self, state)\n"
        "    if state['step'] == 6:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return done\n"
        "TrialCheckpoint.save = save_then_die\n"
        f"run_unit(payload(), {str(killed)!r}, 's', save_every_eval=True)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == -signal.SIGKILL
    assert not (killed / "trials").exists() or not list((killed / "trials").iterdir())

    metrics = run_unit(payload(), str(killed), "s")
    assert metrics["resumed_from"] == 6
    same_losses(straight, killed)
    assert checkpoint_files(killed) == []


def test_checkpoints_are_written_while_the_trial_runs_and_removed_once_it_is_stored(
        tmp_path, monkeypatch):
    seen: list[list[str]] = []
    original = Attempt.write_step

    def write_step(self, point):  # what the checkpoints folder holds at each eval point
        seen.append(checkpoint_files(tmp_path))
        original(self, point)

    monkeypatch.setattr(Attempt, "write_step", write_step)
    run_unit(payload(), str(tmp_path), "s", save_every_eval=True)
    name = f"{payload().trial_id}.pt"
    assert seen[0] == [] and all(files == [name] for files in seen[2:])
    assert checkpoint_files(tmp_path) == []
    assert len(read_tables(tmp_path).trials) == 1


def test_a_stored_trial_run_again_removes_a_leftover_checkpoint(tmp_path):
    straight_run(tmp_path)
    leftover = TrialCheckpoint(Store(tmp_path), payload().trial_id)
    leftover.save({"format": 1})
    metrics = run_unit(payload(), str(tmp_path), "s")
    assert metrics["skipped"] and checkpoint_files(tmp_path) == []


def damage_truncated(path: Path, other: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def damage_garbage(path: Path, other: Path) -> None:
    path.write_bytes(b"not a checkpoint at all" * 10)


def damage_empty(path: Path, other: Path) -> None:
    path.write_bytes(b"")


def damage_foreign_trial(path: Path, other: Path) -> None:
    """The checkpoint of another config (same shapes, another LR) under this trial's name."""
    path.write_bytes(other.read_bytes())


def damage_not_a_state(path: Path, other: Path) -> None:
    torch.save([1, 2, 3], path)


@pytest.mark.parametrize("damage", [damage_truncated, damage_garbage, damage_empty,
                                    damage_foreign_trial, damage_not_a_state])
def test_a_damaged_checkpoint_is_ignored_and_the_trial_starts_from_step_0(
        tmp_path, monkeypatch, damage, straight):
    other = {**CONFIG, "train": {**CONFIG["train"], "lr": 0.02}}
    root = tmp_path / "damaged"
    for config in (other, CONFIG):  # a checkpoint of each, left by killed attempts
        with monkeypatch.context() as m:
            crash_after_reporting(m, 2 * EVERY)
            with pytest.raises(Killed):
                run_unit(payload(config), str(root), "s", save_every_eval=True)
    mine, theirs = (root / "checkpoints" / f"{payload(c).trial_id}.pt"
                    for c in (CONFIG, other))
    damage(mine, theirs)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = run_unit(payload(), str(root), "s")
    assert metrics["resumed_from"] is None
    assert any("checkpoint" in str(w.message) for w in caught)
    same_losses(straight, root)
    assert not mine.exists()


class InMemory:
    """A checkpointer that keeps every state offered, serialized as a file would hold it (the
    state's tensors are the live ones); `load` returns the one of step `use`."""

    def __init__(self):
        self.states: dict[int, bytes] = {}
        self.use: int | None = None

    def load(self):
        if self.use not in self.states:
            return None
        return torch.load(io.BytesIO(self.states[self.use]), weights_only=True)

    def save(self, state):
        buffer = io.BytesIO()
        torch.save(state, buffer)
        self.states[state["step"]] = buffer.getvalue()
        return True


def test_a_resumed_trial_diverges_at_the_same_step_with_the_same_reason():
    """The divergence monitor's state (the smoothed loss) travels in the checkpoint."""
    config = TrialConfig.model_validate(
        {**CONFIG, "train": {**CONFIG["train"], "lr": 1.0, "steps": 10, "eval_every": 1,
                             "warmup": 0, "schedule": "constant", "grad_clip": None}})
    saved = InMemory()
    straight = run_trial(config, checkpoint=saved)
    assert straight.diverged and straight.diverge_step >= 3  # eval points 1, 2... before it
    for step in range(1, straight.diverge_step):
        saved.use = step
        resumed = run_trial(config, checkpoint=saved)
        assert resumed.resumed_from == step
        assert (resumed.diverge_step, resumed.diverge_reason, resumed.last_finite_loss,
                resumed.max_excursion, resumed.steps_above_bound) == \
            (straight.diverge_step, straight.diverge_reason, straight.last_finite_loss,
             straight.max_excursion, straight.steps_above_bound)
        assert [h["eval_loss"] for h in resumed.history] == \
            [h["eval_loss"] for h in straight.history]
        assert resumed.final_eval_loss is None and math.isfinite(resumed.last_finite_loss)


def test_a_checkpoint_written_before_a_later_field_existed_resumes_the_same_trial():
    """A release that did not know a later field (results/later_fields.py: param.depth_alpha,
    model.mamba2, ...) saved its config text without it. The trial id leaves such a field out
    at its earlier value, so it is the same trial; the checkpoint compared the whole text and
    every interrupted trial started again from step 0 after an upgrade."""
    import json

    from mutransfer.results.later_fields import LATER_FIELDS

    config = TrialConfig.model_validate(CONFIG)
    saved = InMemory()
    straight = run_trial(config, checkpoint=saved)
    state = torch.load(io.BytesIO(saved.states[2 * EVERY]), weights_only=True)
    earlier = json.loads(state["config"])
    for section, name in LATER_FIELDS:  # as the release before these fields wrote it
        earlier[section].pop(name)
    state["config"] = json.dumps(earlier)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    saved.states[2 * EVERY], saved.use = buffer.getvalue(), 2 * EVERY
    resumed = run_trial(config, checkpoint=saved)
    assert resumed.resumed_from == 2 * EVERY
    assert resumed.final_eval_loss == straight.final_eval_loss
    # another config is still refused: the trial starts from step 0
    other = json.loads(state["config"])
    other["train"]["lr"] = 0.02
    state["config"] = json.dumps(other)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    saved.states[2 * EVERY] = buffer.getvalue()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run_trial(config, checkpoint=saved).resumed_from is None
