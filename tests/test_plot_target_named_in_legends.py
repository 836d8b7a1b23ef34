"""`mutransfer plot --target AXIS`: the loss figure's star and the stability figure's triangle
are named after the target, as every other label of those figures is: a weight-decay or
lr_mult sweep's legend called its optimum "lr*" and its largest value run "largest LR"."""


import numpy as np
from matplotlib.figure import Figure

from mutransfer.analysis import analyze, make_plots
from tests.synthetic_axes import axes_tables
from tests.synthetic_sweeps import write_results

TARGET = "param.overrides.ssm_B.lr_mult"


def _legend(fig: Figure) -> list[str]:
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return [t.get_text() for lg in legends for t in lg.get_texts()]


def test_the_legends_name_the_target_not_the_lr(tmp_path, drawn):
    grid = [2.0**e for e in np.arange(-3, 5.1, 1.0)]
    t = axes_tables({"width": [64, 256]}, TARGET, grid, lambda p: 2.0, [0, 1],
                    fixed={"lr": 1e-3})
    root = write_results(tmp_path / "store", t)
    a = analyze(root, target=TARGET)
    assert a.choice.opt_label == "ssm_B.lr_mult*"
    assert np.isfinite(a.lr_opt["lr_opt"]).all() and not a.lr_opt["edge"].any()
    # no value diverged: the stability figure marks the largest value run
    assert not np.isfinite(a.stability["boundary"]).any()

    make_plots(root, analysis=a, out_dir=tmp_path / "plots")
    loss = _legend(drawn["loss_vs_lr.png"])
    assert "ssm_B.lr_mult* (fit)" in loss
    assert not any("lr*" in lab.replace("lr_mult*", "") for lab in loss), loss
    stability = _legend(drawn["stability_vs_width.png"])
    assert any(lab.startswith("largest ssm_B.lr_mult run, all trained") for lab in stability)
    assert not any("LR" in lab for lab in stability), stability
