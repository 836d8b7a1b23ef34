"""Uncommon but valid choices of target and scale axes (analysis/choice.py, core.py) on a small
planted horizon-like store: width x train.steps x lr x seed, as `sweeps/horizon.yaml` writes.

- `--scale train.steps width` puts the model width among the scale axes but not first; the
  analysis's tables must then be written with each axis named once.
- `--target train.steps` asks for the optimum of a field the default scale axis `tokens` is
  computed from; the default scale must then leave tokens out (not crash looking for the
  column it replaced), and `--scale tokens` with that target is refused in one line.
"""

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis import analyze, write_analysis
from mutransfer.cli import main
from mutransfer.errors import UserError
from tests.synthetic_axes import axes_tables
from tests.synthetic_sweeps import write_results

LR_GRID = [2.0**e for e in np.arange(-12, -3.9, 1.0)]


def _planted(p: dict) -> float:
    return 2**-8 * (p["width"] / 64) ** -1.0 * (p["train.steps"] / 100) ** -0.3


@pytest.fixture(scope="module")
def horizon_store(tmp_path_factory):
    t = axes_tables({"width": [64, 128], "train.steps": [100, 200, 400]}, "lr", LR_GRID,
                    _planted, [0, 1])
    return write_results(tmp_path_factory.mktemp("horizon"), t)


def test_width_as_a_later_scale_axis_writes_every_table_with_each_axis_named_once(
        horizon_store, tmp_path):
    """With the steps first and the model width second, the law's points table named its
    scale columns for display before the stored tables renamed the width role: `width` became
    `train.steps` a second time and writing the Parquet tables raised a traceback."""
    a = analyze(horizon_store, scale=["train.steps", "width"])
    paths = write_analysis(a, tmp_path / "out")
    points = pd.read_parquet(tmp_path / "out" / "law_points.parquet")
    assert {"train.steps", "width"} <= set(points.columns)
    assert not points.columns.duplicated().any()
    # each point's scale values are its own: the steps column holds steps, the width widths
    assert set(points["train.steps"]) <= {100, 200, 400}
    assert set(points["width"]) <= {64, 128}
    for p in paths:
        if p.suffix == ".parquet":
            cols = pd.read_parquet(p).columns
            assert not cols.duplicated().any(), p.name


def test_steps_as_the_target_leaves_tokens_out_of_the_default_scale(horizon_store):
    """train.steps is a swept numeric axis, so a valid target; the default scale axes added
    `tokens` (computed from the steps), whose column replaces train.steps, and the analysis
    then failed with a KeyError on the target's column."""
    a = analyze(horizon_store, target="train.steps")
    assert a.choice.target == "train.steps"
    assert a.choice.scale == ("width",)
    assert len(a.lr_opt) and set(a.lr_opt["width"]) == {64, 128}


def test_steps_as_the_target_with_tokens_as_a_scale_axis_is_one_line(horizon_store, tmp_path,
                                                                      capsys):
    """Asking for the optimal steps at each number of tokens (steps x batch x seq_len) is
    refused in one line naming the target, with exit 2 and nothing written."""
    with pytest.raises(UserError, match="--target train.steps: the scale axis tokens"):
        analyze(horizon_store, target="train.steps", scale=["width", "tokens"])
    out = tmp_path / "refused"
    rc = main(["analyze", str(horizon_store), "--target", "train.steps", "--scale", "width",
               "tokens", "--out", str(out)])
    assert rc == 2 and not out.exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "tokens" in err


def test_summary_names_the_drift_after_the_chosen_target_and_scale_axis(horizon_store):
    """The summary a sweep prints at its end headed the drift table "slope of log2 lr* against
    log2 width" whatever the choice: with the steps in the width role its rows are slopes
    against log2 train.steps, and with another target they are that target's optima."""
    from mutransfer.analysis import summary_table

    text = summary_table(analyze(horizon_store, scale=["train.steps", "width"]))
    assert "drift: slope of log2 lr* against log2 train.steps (transfer ~ 0)" in text
    assert "against log2 width" not in text
    text = summary_table(analyze(horizon_store, target="train.steps"))
    assert "drift: slope of log2 train.steps* against log2 width" in text
    assert "lr*" not in text.split("drift:")[1].splitlines()[0]
