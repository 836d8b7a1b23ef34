"""The end of a `mutransfer sweep`: the optimal LR it prints is the analysis's (`analyze`), the
one definition of "best LR", with or without --no-analysis."""

from __future__ import annotations

import numpy as np
import pytest

from mutransfer.analysis import analyze
from mutransfer.cli import main
from mutransfer.sweep.plan.cells import load_plan
from tests.sweeps import write_sweep
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results

LRS = [2.0**e for e in range(-10, -4)]
# lr* planted between two grid points: the quadratic vertex (~2^-7.5) is not a grid LR, so an
# argmin over the grid names another LR than the analysis
PLANTED = Planted("sp", 2**-7.5, 0.0)


def complete_store(tmp_path):
    """A sweep file whose every cell the store already holds (planted losses)."""
    path = write_sweep(tmp_path, "planted", {"width": [16, 32], "lr": LRS})
    plan = load_plan(path)
    tables = synthetic_tables([PLANTED], [16, 32], LRS, [plan.cells[0].columns["seed"]])
    ids = {(c.columns["width"], c.columns["lr"]): c.trial_id for c in plan.cells}
    new_id = {old: ids[(int(w), float(lr))] for old, w, lr in
              tables.trials[["trial_id", "width", "lr"]].itertuples(index=False)}
    tables.trials["trial_id"] = tables.trials["trial_id"].map(new_id)
    tables.steps["trial_id"] = tables.steps["trial_id"].map(new_id)
    write_results(tmp_path / "planted", tables, per_trial=True)
    return path, tmp_path / "planted"


def printed_lr_opt(text: str) -> dict[int, float]:
    """width -> the lr* of the printed optimal-LR table."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("optimal LR per width"))
    rows = {}
    for line in lines[start + 2:]:
        parts = line.split()
        if len(parts) < 3 or parts[0] != "sp":
            break
        rows[int(parts[1])] = float(parts[2])
    return rows


@pytest.mark.parametrize("flags", [["--no-analysis"], []])
def test_the_summary_prints_the_analysis_optimum_not_the_grid_argmin(tmp_path, capsys, flags):
    path, store = complete_store(tmp_path)
    assert main(["sweep", str(path), *flags]) == 0
    out = capsys.readouterr().out
    assert "0 trials to run: every cell is complete" in out
    printed = printed_lr_opt(out)
    lr_opt = analyze(store).lr_opt.set_index("width")
    assert sorted(printed) == [16, 32]
    for width, lr in printed.items():
        assert np.isclose(lr, lr_opt.loc[width, "lr_opt"], rtol=1e-2)
        assert lr not in LRS  # the vertex, between grid LRs: not an argmin over them
        assert abs(np.log2(lr) + 7.5) < 0.3
    assert ("tables, plots and report:" in out) == (not flags)
    # what `analyze` and `plot` write: the tables too, not only the figures
    written = {p.name for p in (store / "analysis").glob("*")}
    assert ({"lr_opt.csv", "drift.parquet", "analysis.md", "report.html"} <= written) == (
        not flags)
