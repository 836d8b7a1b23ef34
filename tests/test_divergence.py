"""The divergence rule: a non-finite loss at once; otherwise a smoothed train loss that stays
above initial + threshold for the patience window, or an eval loss above it while the smoothed
loss is too. Transient spikes are not divergence."""

from __future__ import annotations

import math

import pytest

from mutransfer.config import TrainConfig
from mutransfer.divergence import DivergenceMonitor

INITIAL = 5.0


def monitor(smoothing: float = 0.9, patience: int = 10, threshold: float = 1.0):
    return DivergenceMonitor(INITIAL, threshold, smoothing, patience)


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
    m = monitor(smoothing=0.0, patience=10)
    assert feed(m, [4.9] * 3 + [8.0] * 20) == 3 + 10
    assert "smoothed train loss" in m.reason


def test_the_smoothed_loss_must_stay_above_the_bound_for_the_whole_window():
    m = monitor(smoothing=0.0, patience=3)
    assert feed(m, [8.0, 8.0, 4.0, 8.0, 8.0, 4.0, 8.0, 8.0]) is None  # two above, then reset
    assert feed(m, [8.0], first_step=9) == 9  # the third in a row


def test_last_finite_loss_is_the_last_one_before_the_step_that_diverged():
    m = monitor(smoothing=0.0, patience=2)
    assert feed(m, [4.5, 6.5, 7.0]) == 3
    assert m.last_finite == 6.5


def test_an_eval_loss_above_the_bound_alone_is_not_divergence():
    m = monitor()
    assert feed(m, [4.0] * 5) is None
    assert not m.eval_loss(5, 9.0)


def test_an_eval_loss_above_the_bound_with_the_smoothed_loss_above_it_is_divergence():
    m = monitor(smoothing=0.0, patience=10)
    assert feed(m, [9.0, 9.0]) is None
    assert m.eval_loss(2, 8.0) and m.diverged_at == 2


def test_a_monitor_restored_from_its_state_judges_like_the_original():
    losses = [4.9, 7.0, 7.2, 7.5, 7.9, 8.0, 8.4, 9.0, 9.9, 11.0, 12.0, 14.0] * 2
    straight = monitor(patience=4)
    expected = feed(straight, losses)
    assert expected is not None and expected > 6
    first = monitor(patience=4)
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
    for name in ("diverge_delta", "diverge_smoothing", "diverge_patience"):
        assert fields[name].description, name
    t = TrainConfig(diverge_delta=2.0)
    assert (t.diverge_delta, t.diverge_smoothing, t.diverge_patience) == (2.0, 0.9, 10)
