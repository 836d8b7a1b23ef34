"""The divergence rule: a non-finite loss at once; otherwise the trial is judged at its end
(rule final) or also stopped once the smoothed train loss stays above initial + threshold for
the patience window (rule patience). An eval loss alone never stops a trial; spikes that
recover are complete trials with their excursion recorded."""

from __future__ import annotations

import math

import pytest

from mutransfer.config import TrainConfig
from mutransfer.divergence import DivergenceMonitor

INITIAL = 5.0


def monitor(smoothing: float = 0.9, patience: int = 10, threshold: float = 1.0,
            rule: str = "final"):
    return DivergenceMonitor(INITIAL, threshold, smoothing, patience, rule)


def feed(m: DivergenceMonitor, losses: list[float], first_step: int = 1) -> int | None:
    """Feed train losses from `first_step` on; the step at which `m` called divergence."""
    for step, loss in enumerate(losses, start=first_step):
        if m.train_loss(step, loss):
            return step
    return None


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_train_loss_is_divergence_at_once(bad):
    m = monitor()
    assert feed(m, [4.9, 4.8, bad]) == 3
    assert m.diverged_at == 3 and "non-finite" in m.reason
    assert m.last_finite == 4.8


def test_a_non_finite_eval_loss_is_divergence_at_once():
    m = monitor()
    assert feed(m, [4.9] * 5) is None
    assert m.eval_loss(5, math.nan) and m.diverged_at == 5


def test_warm_up_spikes_like_the_quickstart_ones_are_not_divergence():
    # the largest quickstart spikes: +4.35 nats for one step, three steps of +2.5 within five
    m = monitor()
    losses = [5.0, 5.1, 5.0, 9.35, 5.2, 4.8] + [7.5, 4.9, 7.5, 4.7, 7.5] + [4.0] * 40
    assert feed(m, losses) is None and not m.diverged


def test_a_loss_that_stays_above_the_bound_diverges_after_the_patience_window():
    m = monitor(smoothing=0.0, patience=10, rule="patience")
    assert feed(m, [4.9] * 3 + [8.0] * 20) == 3 + 10
    assert "smoothed train loss" in m.reason


def test_the_smoothed_loss_must_stay_above_the_bound_for_the_whole_window():
    m = monitor(smoothing=0.0, patience=3, rule="patience")
    assert feed(m, [8.0, 8.0, 4.0, 8.0, 8.0, 4.0, 8.0, 8.0]) is None  # two above, then reset
    assert feed(m, [8.0], first_step=9) == 9  # the third in a row


def test_last_finite_loss_is_the_last_one_before_the_step_that_diverged():
    m = monitor(smoothing=0.0, patience=2, rule="patience")
    assert feed(m, [4.5, 6.5, 7.0]) == 3
    assert m.last_finite == 6.5


def test_an_eval_loss_above_the_bound_alone_is_not_divergence():
    m = monitor()
    assert feed(m, [4.0] * 5) is None
    assert not m.eval_loss(5, 9.0)


@pytest.mark.parametrize("rule", ["final", "patience"])
def test_an_eval_loss_above_the_bound_with_the_smoothed_loss_above_it_does_not_stop(rule):
    """The old eval-point rule had no patience: two steps up and an eval there stopped it."""
    m = monitor(smoothing=0.0, patience=10, rule=rule)
    assert feed(m, [9.0, 9.0]) is None
    assert not m.eval_loss(2, 8.0) and not m.diverged


def test_a_monitor_restored_from_its_state_judges_like_the_original():
    losses = [4.9, 7.0, 7.2, 7.5, 7.9, 8.0, 8.4, 9.0, 9.9, 11.0, 12.0, 14.0] * 2
    straight = monitor(patience=4, rule="patience")
    expected = feed(straight, losses)
    assert expected is not None and expected > 6
    first = monitor(patience=4, rule="patience")
    assert feed(first, losses[:6]) is None
    resumed = DivergenceMonitor(0.0, 9.9, 0.1, 1)  # whatever it was built with
    resumed.load_state_dict(first.state_dict())
    assert feed(resumed, losses[6:], first_step=7) == expected
    assert resumed.state_dict() == straight.state_dict()


def test_the_state_holds_plain_numbers_only():
    m = monitor()
    feed(m, [4.0, 5.0])
    assert all(v is None or isinstance(v, (int, float, str)) for v in m.state_dict().values())


def test_the_config_documents_the_rule_and_keeps_diverge_delta():
    fields = TrainConfig.model_fields
    for name in ("diverge_delta", "diverge_rule", "diverge_smoothing", "diverge_patience"):
        assert fields[name].description, name
    t = TrainConfig(diverge_delta=2.0)
    assert (t.diverge_delta, t.diverge_smoothing, t.diverge_patience) == (2.0, 0.9, 10)
    assert t.diverge_rule == "final"


def warm_up_curve(total: int, spike_end: int, height: float, length: int) -> list[float]:
    """A run that trains from the initial loss towards 3.0, with a spike of `height` nats over
    the initial loss for `length` steps ending at step `spike_end` (1-based)."""
    losses = [INITIAL - 2.0 * (1 - math.exp(-step / 30)) for step in range(1, total + 1)]
    for step in range(spike_end - length + 1, spike_end + 1):
        losses[step - 1] = INITIAL + height
    return losses


def run(m: DivergenceMonitor, losses: list[float], eval_every: int,
        eval_of=lambda loss: loss) -> bool:
    """The training loop's calls: a train loss per step, an eval loss at every eval point
    (here the train loss of that step: a spike ending there is seen by the eval too), then
    `finish` at the last step. True when the monitor stopped or judged the trial diverged."""
    total = len(losses)
    for step, loss in enumerate(losses, start=1):
        if m.train_loss(step, loss):
            return True
        if step % eval_every == 0 or step == total:
            if m.eval_loss(step, eval_of(loss)):
                return True
    return m.finish(total, eval_of(losses[-1]))


@pytest.mark.parametrize("eval_every", [10, 5])
@pytest.mark.parametrize("height,length", [(8.0, 2), (4.0, 4), (6.0, 3)])
def test_a_warm_up_spike_ending_at_an_eval_point_does_not_stop_the_trial(eval_every, height,
                                                                         length):
    """Issue 19.5: with eval_every 10 or 5 a spike of +8 x 2, +4 x 4 or +6 x 3 steps ending at
    the eval step stopped the trial there (the eval rule had no patience)."""
    for rule in ("final", "patience"):
        m = monitor(rule=rule)
        losses = warm_up_curve(60, spike_end=2 * eval_every, height=height, length=length)
        assert not run(m, losses, eval_every), (rule, m.reason)
        assert not m.diverged
        # the spike is on record: the smoothed loss crossed the bound and came back
        assert m.steps_above >= 1 and m.max_excursion > 1.0


def test_max_excursion_and_steps_above_bound_measure_the_smoothed_loss():
    m = monitor(smoothing=0.0)
    feed(m, [4.8, 6.5, 7.25, 4.0, 6.2, 3.9])
    assert m.max_excursion == pytest.approx(2.25)
    assert m.steps_above == 3  # 6.5, 7.25, 6.2: not consecutive
    calm = monitor()
    feed(calm, [4.9, 4.7, 4.5])
    assert calm.max_excursion == 0.0 and calm.steps_above == 0


def test_a_loss_that_stays_high_is_not_stopped_under_the_final_rule_but_judged_at_the_end():
    m = monitor(smoothing=0.0, patience=10)
    assert feed(m, [4.9] * 3 + [8.0] * 50) is None
    assert not m.diverged
    assert m.finish(53, 7.9) and m.diverged_at == 53 and not m.stopped
    assert "above" in m.reason


def test_a_run_that_blew_up_and_collapsed_to_uniform_predictions_has_diverged():
    """Back under the bound but not below where it started: it did not train."""
    m = monitor(smoothing=0.0)
    assert feed(m, [4.9, 30.0, 60.0, 20.0] + [5.3] * 40) is None
    assert m.finish(44, 5.3) and "did not recover" in m.reason


def test_a_run_that_spiked_and_recovered_below_the_initial_loss_is_complete():
    m = monitor(smoothing=0.0)
    assert feed(m, [4.9, 30.0, 60.0, 20.0] + [3.0] * 40) is None
    assert not m.finish(44, 2.9) and not m.diverged
    assert m.steps_above == 3 and m.max_excursion == pytest.approx(55.0)


def test_a_run_that_never_rose_above_the_bound_and_ends_high_but_under_it_is_complete():
    """A stalled run (no spike) is a trained run with a bad loss: the analysis sees it."""
    m = monitor(smoothing=0.0)
    assert feed(m, [5.2] * 20) is None
    assert not m.finish(20, 5.4)


def test_finish_keeps_a_trial_the_rule_already_stopped_as_diverged():
    m = monitor()
    feed(m, [4.9, math.nan])
    assert m.finish(2, 3.0) and m.diverged_at == 2 and m.stopped


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="rule"):
        monitor(rule="eager")
