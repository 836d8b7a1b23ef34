"""One trial: determinism, reporting, divergence as a result, schedules, the train command."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from mutransfer.cli import main
from mutransfer.config import TrialConfig
from mutransfer.optim import lr_factor
from mutransfer.train import run_trial

TINY = {"width": 16, "model": {"base_width": 16, "n_layer": 1, "d_state": 4},
        "train": {"optimizer": "adam", "lr": 3e-3, "steps": 6, "batch_size": 2, "seq_len": 16,
                  "eval_every": 3, "eval_batches": 1}}


def tiny(**train) -> TrialConfig:
    data = {**TINY, "train": {**TINY["train"], **train}}
    return TrialConfig.model_validate(data)


def test_same_seed_and_config_give_the_same_losses():
    a, b = run_trial(tiny()), run_trial(tiny())
    assert [h["eval_loss"] for h in a.history] == [h["eval_loss"] for h in b.history]
    assert [h["train_loss"] for h in a.history][1:] == [h["train_loss"] for h in b.history][1:]
    c = run_trial(tiny(seed=1))
    assert [h["train_loss"] for h in c.history][1:] != [h["train_loss"] for h in a.history][1:]


def test_every_eval_is_reported_with_its_figures():
    seen = []
    result = run_trial(tiny(), report=seen.append)
    assert [p["step"] for p in seen] == [0, 3, 6]
    keys = {"step", "tokens", "train_loss", "eval_loss", "lr", "grad_norm", "tokens_per_s"}
    assert all(keys <= set(p) for p in seen)
    assert seen[-1]["tokens"] == 6 * 2 * 16
    assert result.history == seen
    assert result.status == "complete" and not result.diverged
    assert result.final_eval_loss == seen[-1]["eval_loss"]
    assert result.best_eval_loss == min(p["eval_loss"] for p in seen)
    assert result.initial_loss == seen[0]["eval_loss"]
    assert result.steps_done == 6 and result.tokens == 192


def test_training_lowers_the_loss():
    result = run_trial(tiny(steps=40, eval_every=20, lr=1e-2))
    assert result.final_eval_loss < result.initial_loss - 0.5


def test_a_far_too_large_lr_ends_as_diverged_with_its_step():
    result = run_trial(tiny(lr=50.0, steps=30, eval_every=10, grad_clip=None))
    assert result.status == "diverged" and result.diverged
    assert 1 <= result.diverge_step <= 30
    assert result.steps_done == result.diverge_step - 1
    assert math.isfinite(result.last_finite_loss)


def test_a_diverged_trial_reports_no_final_or_best_loss_it_did_not_reach():
    result = run_trial(tiny(lr=50.0, steps=30, eval_every=10, grad_clip=None))
    assert result.diverged
    assert result.final_eval_loss is None and result.best_eval_loss is None
    # the loss it had before the step that diverged, not the initial loss
    assert math.isfinite(result.last_finite_loss)
    assert result.last_finite_loss != result.initial_loss


def test_a_complete_trial_reports_its_final_eval_loss_as_last_finite_loss():
    result = run_trial(tiny())
    assert result.last_finite_loss == result.final_eval_loss == result.history[-1]["eval_loss"]


# A tiny model whose warm-up has minibatch loss spikes several nats over the initial loss
# (+7.7 at step 4, above initial + 1 at steps 4, 5 and 7) and that then trains to ~3.7 from 5.5.
SPIKY = {"lr": 0.25, "steps": 30, "batch_size": 4, "seq_len": 32, "warmup": 3,
         "eval_every": 10, "optimizer": "adamw"}


def test_a_transient_warm_up_spike_is_not_divergence():
    result = run_trial(tiny(**SPIKY))
    assert result.status == "complete" and not result.diverged
    assert result.final_eval_loss < result.initial_loss - 1.0


def test_one_minibatch_above_the_bound_is_divergence_with_smoothing_0_and_patience_1():
    """The old rule, still expressible: the same spike then stops the trial."""
    result = run_trial(tiny(**SPIKY, diverge_smoothing=0.0, diverge_patience=1,
                            diverge_rule="patience"))
    assert result.diverged and result.diverge_step <= 10  # in warm-up, at the first spike
    assert result.steps_done == result.diverge_step - 1


def test_a_spike_that_recovers_is_complete_with_its_excursion_under_the_default_rule():
    """Unsmoothed, the warm-up spike is above the bound; the run trains on and records it."""
    result = run_trial(tiny(**SPIKY, diverge_smoothing=0.0, diverge_patience=1))
    assert result.status == "complete" and not result.diverged
    assert result.steps_above_bound >= 1 and result.max_excursion > 1.0
    assert result.final_eval_loss < result.initial_loss - 1.0


def test_an_exploding_lr_stops_within_a_few_dozen_steps():
    result = run_trial(tiny(lr=10.0, steps=200, eval_every=50))
    assert result.diverged and result.diverge_step <= 30


def test_token_budget_sets_the_number_of_steps():
    result = run_trial(tiny(steps=None, tokens=4 * 2 * 16, eval_every=2))
    assert result.steps_done == 4


@pytest.mark.parametrize("step,expected", [(0, 0.25), (3, 1.0), (4, 1.0), (14, 0.0)])
def test_cosine_schedule_warms_up_then_decays_to_the_floor(step, expected):
    assert lr_factor(step, total=14, warmup=4, schedule="cosine", min_ratio=0.0) == \
        pytest.approx(expected, abs=1e-9)


def test_linear_schedule_reaches_min_ratio():
    assert lr_factor(10, total=10, warmup=0, schedule="linear", min_ratio=0.1) == \
        pytest.approx(0.1)
    assert lr_factor(5, total=10, warmup=0, schedule="linear", min_ratio=0.0) == \
        pytest.approx(0.5)


def test_train_command_exits_zero_on_a_diverged_run(tmp_path, capsys):
    path = tmp_path / "t.yaml"
    path.write_text("width: 16\nmodel: {base_width: 16, n_layer: 1, d_state: 4}\n"
                    "train: {optimizer: sgd, lr: 100.0, steps: 20, batch_size: 2, seq_len: 16,"
                    " eval_every: 5, eval_batches: 1, grad_clip: null}\n")
    assert main(["train", str(path), "--set", "train.momentum=0.0"]) == 0
    out = capsys.readouterr().out
    assert "diverged at step" in out


@pytest.mark.parametrize("text,needle", [
    ("width: 16\nmodel: {base_width: 16}\ntrain: {lr: -1}\n", "train.lr"),
    ("width: 16\nmodel: {base_width: 16}\ntrain: {optimiser: adam}\n", "optimiser"),
    ("width: 8\nmodel: {base_width: 16}\n", "below model.base_width"),
    ("width: [16\n", "not valid YAML"),
])
def test_train_command_rejects_bad_configs_in_one_line(tmp_path, capsys, text, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert main(["train", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_trainer_runs_without_ray_installed():
    code = ("import sys; sys.modules['ray'] = None\n"
            "from mutransfer.config import TrialConfig\n"
            "from mutransfer.train import run_trial\n"
            f"r = run_trial(TrialConfig.model_validate({TINY!r}))\n"
            "assert r.status == 'complete'\n"
            "assert not any(m == 'ray' or m.startswith('ray.') for m in sys.modules"
            " if sys.modules[m] is not None)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_a_trial_flushes_subnormal_floats_in_every_thread_and_its_env_records_it():
    # a fresh process with 2 intra-op threads, as a trial's worker is (the probe itself would
    # start the threads before the trial: a thread keeps the setting it was created with)
    code = ("import torch; torch.set_num_threads(2)\n"
            "from mutransfer.config import TrialConfig\n"
            "from mutransfer.results.provenance import environment\n"
            "from mutransfer.train import run_trial\n"
            f"run_trial(TrialConfig.model_validate({TINY!r}))\n"
            "print(environment()['flush_denormal'])\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, timeout=300,
                         capture_output=True, text=True).stdout.split()
    assert out == ["True"]
