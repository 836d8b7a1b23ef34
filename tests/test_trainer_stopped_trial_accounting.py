"""What a trial that the divergence rule stopped stores: the updates it took and their tokens,
as they happened (docs/results-format.md, "Divergence"); its throughput:
tests/test_trainer_window_throughput.py."""

from __future__ import annotations

import pytest
from torch.optim.optimizer import register_optimizer_step_pre_hook

from mutransfer.config import TrialConfig
from mutransfer.train import run_trial

TINY = {"width": 16, "model": {"base_width": 16, "n_layer": 1, "d_state": 4},
        "train": {"optimizer": "adam", "lr": 3e-3, "steps": 6, "batch_size": 2, "seq_len": 16,
                  "eval_every": 3, "eval_batches": 1}}
# a non-finite train loss at step 2, before the first eval point (step 10)
NAN_TRAIN = {"lr": 50.0, "steps": 30, "eval_every": 10, "grad_clip": None}
# the update of step 6 makes the weights NaN (its gradient is): the eval point of step 6 finds
# a non-finite eval loss after a finite train loss
NAN_EVAL = {"lr": 10.0, "steps": 40, "eval_every": 2, "grad_clip": None}
# the warm-up spike of tests/test_train.py: one minibatch above the bound at step 4 stops it
PATIENCE = {"lr": 0.25, "steps": 30, "batch_size": 4, "seq_len": 32, "warmup": 3,
            "eval_every": 10, "optimizer": "adamw", "diverge_rule": "patience",
            "diverge_smoothing": 0.0, "diverge_patience": 1}


def tiny(**train) -> TrialConfig:
    return TrialConfig.model_validate({**TINY, "train": {**TINY["train"], **train}})


def run_counting_updates(config: TrialConfig):
    """The trial's result and the number of optimizer steps it took."""
    updates = []
    hook = register_optimizer_step_pre_hook(lambda opt, args, kwargs: updates.append(1))
    try:
        result = run_trial(config)
    finally:
        hook.remove()
    return result, len(updates)


@pytest.mark.parametrize("train,reason", [
    (NAN_TRAIN, "non-finite train loss"), (NAN_EVAL, "non-finite eval loss"),
    (PATIENCE, "smoothed train loss above")])
def test_a_stopped_trial_stores_the_updates_it_took_and_their_tokens(train, reason):
    config = tiny(**train)
    result, updates = run_counting_updates(config)
    assert result.diverged and result.diverge_reason.startswith(reason)
    per_step = config.train.batch_size * config.train.seq_len
    assert result.steps_done == updates
    assert result.tokens == updates * per_step


def test_a_stop_on_a_train_loss_takes_diverge_step_minus_one_updates():
    """The docs' rule: the step whose train loss stops the trial is not taken, whatever the
    rule that stopped it (a non-finite loss, or the patience rule on a finite one)."""
    for train in (NAN_TRAIN, PATIENCE):
        result, updates = run_counting_updates(tiny(**train))
        assert updates == result.diverge_step - 1 == result.steps_done


def test_a_stop_on_a_non_finite_eval_loss_stores_what_its_last_steps_row_shows():
    result = run_trial(tiny(**NAN_EVAL))
    last = result.history[-1]
    assert result.diverge_reason == "non-finite eval loss"
    assert last["step"] == result.diverge_step == result.steps_done
    assert last["tokens"] == result.tokens

