"""Throughput as stored, on a clock that ticks one second per optimizer step: a steps row's
`tokens_per_s` counts the tokens of the steps trained since the row before, and a trial's
the tokens of the steps it took (docs/results-format.md, `steps` and `trials`)."""

from __future__ import annotations

import io

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from mutransfer.config import TrialConfig
from mutransfer.train import run_trial

TINY = {"width": 16, "model": {"base_width": 16, "n_layer": 1, "d_state": 4},
        "train": {"optimizer": "adam", "lr": 3e-3, "steps": 10, "batch_size": 2,
                  "seq_len": 16, "eval_every": 5, "eval_batches": 1}}
PER_STEP = 2 * 16  # tokens of one step of TINY


class StepClock:
    """time.perf_counter for the trainer: one second per optimizer step, nothing else."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def tick(self, *_) -> None:
        self.now += 1.0


class BranchAt:
    """A checkpointer with one branch point (mutransfer/train.py, "Branch points"): it keeps
    the state handed to it after `step` (a copy, as the protocol asks) and resumes nothing."""

    def __init__(self, step: int) -> None:
        self.branch_steps = {step}
        self.state: dict | None = None

    def load(self) -> None:
        return None

    def save(self, state) -> bool:
        return False

    def save_branch(self, step: int, state) -> None:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        buffer.seek(0)
        self.state = torch.load(buffer, weights_only=True)


class ResumeFrom:
    def __init__(self, state: dict) -> None:
        self.state = state

    def load(self) -> dict:
        return self.state

    def save(self, state) -> bool:
        return False


@pytest.fixture
def clock(monkeypatch):
    clock = StepClock()
    monkeypatch.setattr("mutransfer.train.time", clock)
    hook = register_optimizer_step_pre_hook(clock.tick)
    yield clock
    hook.remove()


def tiny(**train) -> TrialConfig:
    return TrialConfig.model_validate({**TINY, "train": {**TINY["train"], **train}})


def test_every_row_of_a_run_from_step_0_reports_one_step_per_second(clock):
    result = run_trial(tiny(steps=7))
    assert [p["step"] for p in result.history] == [0, 5, 7]
    assert [p["tokens_per_s"] for p in result.history[1:]] == [PER_STEP, PER_STEP]
    assert result.tokens_per_s == PER_STEP


def test_the_row_after_a_branch_point_counts_only_the_steps_trained_since_the_resume(clock):
    """Resumed after step 7, in the eval window 6-10: the row at step 10 took 3 steps (8, 9,
    10) in 3 seconds; steps 6 and 7, trained before the branch point, are not in its time."""
    trunk = BranchAt(7)
    run_trial(tiny(), checkpoint=trunk)
    assert trunk.state is not None and trunk.state["step"] == 7
    branch = run_trial(tiny(), checkpoint=ResumeFrom(trunk.state))
    assert branch.resumed_from == 7
    assert [p["step"] for p in branch.history] == [0, 5, 10]
    assert branch.history[-1]["tokens_per_s"] == PER_STEP


@pytest.mark.parametrize("train", [
    {"lr": 50.0, "steps": 30, "eval_every": 10, "grad_clip": None},  # NaN at step 2
    {"lr": 10.0, "steps": 40, "eval_every": 2, "grad_clip": None},  # NaN eval at step 6
])
def test_a_diverged_trial_reports_the_throughput_of_the_steps_it_took(clock, train):
    result = run_trial(tiny(**train))
    assert result.diverged and result.tokens > 0
    assert result.tokens_per_s == PER_STEP
