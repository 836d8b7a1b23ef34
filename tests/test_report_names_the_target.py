"""report.html of a sweep whose target is not the LR names its optimum figure after the
target, as the tables and legends do (it said "Optimal LR against width" and "lr* per width"
for an ssm_B.lr_mult sweep)."""

import numpy as np

from mutransfer.analysis import analyze
from mutransfer.analysis.write import write_report
from tests.synthetic_axes import axes_tables
from tests.synthetic_sweeps import write_results

TARGET = "param.overrides.ssm_B.lr_mult"


def test_the_optimum_figure_is_titled_and_captioned_with_the_target(tmp_path):
    grid = [2.0**e for e in np.arange(-3, 5.1, 1.0)]
    t = axes_tables({"width": [64, 256]}, TARGET, grid, lambda p: 2.0, [0, 1],
                    fixed={"lr": 1e-3})
    a = analyze(write_results(tmp_path / "store", t), target=TARGET)
    html = write_report(a, tmp_path / "out")[-1].read_text()
    assert "ssm_B.lr_mult* against width" in html
    assert "ssm_B.lr_mult* per width with its 95% interval" in html
    assert "Optimal LR against width" not in html and "lr* per width" not in html
