"""A token budget (`train.tokens`) trains whole steps of batch_size x seq_len tokens; a budget
the steps cannot honour is refused, not run as another budget.

Before, `train.tokens: [10, 20, 64, 100, 120]` at batch 2 x seq_len 16 (32 tokens a step)
was accepted: 10 and 20 both trained one step (32 tokens, the budget rounded *up*), 100 and
120 both three steps; each pair was one run stored under two trial ids with identical losses,
and the analysis's `tokens` scale axis read 32/64/96 where the file said five budgets.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mutransfer.cli import main
from mutransfer.config import TrainConfig
from tests.sweeps import write_sweep


def _validate(tmp_path, capsys, tokens: list[int]) -> tuple[int, str, str]:
    axes = {"width": [16], "train.tokens": tokens, "lr": [0.01]}
    path = write_sweep(tmp_path, "budgets", axes, tmp_path / "results",
                       data={"source": "synthetic"})
    rc = main(["validate", "--no-data", str(path)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_budget_below_one_step_is_refused_naming_the_step_size():
    """tokens 10 at 32 tokens a step would train 32 tokens."""
    with pytest.raises(ValidationError, match=r"train.tokens 10 is less than one step's 32 "):
        TrainConfig(tokens=10, batch_size=2, seq_len=16)
    assert TrainConfig(tokens=32, batch_size=2, seq_len=16).total_steps == 1


def test_two_budgets_that_train_the_same_steps_are_refused_by_validate(tmp_path, capsys):
    """100 and 120 tokens are both 3 steps of 32: one run, two ids."""
    rc, _, err = _validate(tmp_path, capsys, [32, 64, 100, 120])
    assert rc == 2 and err.count("\n") == 1, err
    assert "axes.train.tokens: 100 and 120 tokens both train 3 steps of 32 tokens" in err
    assert not (tmp_path / "results").exists()


def test_budgets_a_step_apart_are_swept(tmp_path, capsys):
    """Rounding down inside a step stays allowed: 100 tokens train 3 steps (96 tokens)."""
    rc, out, err = _validate(tmp_path, capsys, [32, 64, 100, 130])
    assert rc == 0, err
    assert "ok, 4 cells" in out
