"""`mutransfer analyze` and `mutransfer plot` from the command line, and the sweep's summary."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis import analyze, summary_table, write_analysis
from mutransfer.cli import main
from mutransfer.results.store import TRIAL_COLUMNS
from tests.sweeps import LR_GRID, MUP, planted_results
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    return err


def test_missing_folder_is_one_line_and_exit_2(tmp_path, capsys):
    for command in ("analyze", "plot"):
        assert main([command, str(tmp_path / "nope")]) == 2
        assert "not found" in one_line_error(capsys)


def test_folder_without_trials_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "trials").mkdir()
    for command in ("analyze", "plot"):
        assert main([command, str(tmp_path)]) == 2
        assert "no trials" in one_line_error(capsys)
    assert not (tmp_path / "analysis").exists()  # nothing written


def test_only_failed_trials_is_one_line_and_exit_2(tmp_path, capsys):
    t = synthetic_tables([MUP], [64], LR_GRID, [0])
    t.trials["status"] = "failed"
    assert main(["analyze", str(write_results(tmp_path, t))]) == 2
    assert "failed" in one_line_error(capsys)


def test_trials_complete_but_without_a_loss_are_named_as_such_not_as_failed(tmp_path, capsys):
    t = synthetic_tables([MUP], [64], LR_GRID, [0])
    t.trials[["status", "diverged", "final_eval_loss"]] = ["complete", False, np.nan]
    assert main(["analyze", str(write_results(tmp_path, t))]) == 2
    err = one_line_error(capsys)
    assert f"{len(t.trials)} trials" in err and "no final loss" in err
    assert "all 0 trials" not in err and "failed" not in err


def test_one_width_prints_lr_star_and_one_line_about_drift(tmp_path, capsys):
    root = planted_results(tmp_path, [128])
    assert main(["analyze", str(root)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "Optimal learning rate" in out
    drift_lines = [line for line in out.splitlines() if "at least two widths" in line]
    assert drift_lines == ["drift needs at least two widths (found one: 128)"]
    # the lr* rows are there: one per parameterization at the single width
    lr_rows = [line for line in out.splitlines() if line.strip().startswith(("mup ", "sp "))
               and " 128 " in line]
    assert len(lr_rows) >= 2
    assert (root / "analysis" / "lr_opt.parquet").is_file()
    assert not (root / "analysis" / "regret.parquet").exists()
    # the same one line closes the sweep's summary
    assert summary_table(analyze(root)).splitlines()[-1] == drift_lines[0]


def test_analyze_writes_every_table_as_parquet_csv_and_markdown(tmp_path, capsys):
    root = planted_results(tmp_path, [64, 128, 256])
    assert main(["analyze", str(root)]) == 0
    out = capsys.readouterr().out
    for title in ("Optimal learning rate", "Drift", "Stability boundary", "Transfer regret",
                  "Does wider do better?"):
        assert title in out
    folder = root / "analysis"
    for stem in ("lr_opt", "drift", "stability", "stability_slope", "regret", "monotonicity",
                 "cells"):
        parquet = pd.read_parquet(folder / f"{stem}.parquet")
        csv = pd.read_csv(folder / f"{stem}.csv")
        assert len(parquet) == len(csv) > 0
    lr_opt = pd.read_parquet(folder / "lr_opt.parquet")
    expected = analyze(root).lr_opt
    np.testing.assert_allclose(lr_opt.lr_opt, expected.lr_opt)
    md = (folder / "analysis.md").read_text()
    assert md.count("\n## ") == 6 and "| parameterization |" in md


def test_bad_options_are_one_line_errors(tmp_path, capsys):
    root = planted_results(tmp_path, [64, 128])
    for bad in ("0.2", "nan", "50"):
        assert main(["analyze", str(root), "--fit-window", bad]) == 2
        assert "--fit-window" in one_line_error(capsys)


@pytest.mark.parametrize("command", ["analyze", "plot"])
@pytest.mark.parametrize("inside", ["trials", "steps", "trials/more", "running"])
def test_an_out_inside_the_stores_tables_is_refused(tmp_path, capsys, command, inside):
    """Every Parquet file under trials/ or steps/ is read as the sweep's rows: the analysis's
    tables written there (before: accepted) were skipped with a warning at every later read."""
    root = planted_results(tmp_path, [64, 128])
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    assert main([command, str(root), "--out", str(root / inside)]) == 2
    assert f"inside the results folder's {inside.split('/')[0]}/" in one_line_error(capsys)
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before  # nothing written
    assert main([command, str(root), "--out", str(root / "analysis-w3")]) == 0  # beside: fine


def test_plot_prints_the_paths_it_wrote(tmp_path, capsys):
    root = planted_results(tmp_path, [64, 128])
    assert main(["plot", str(root)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed[-1] == str(root / "analysis" / "report.html")
    assert all(Path(p).is_file() for p in printed)
    assert sum(p.endswith(".png") for p in printed) == 4


def test_plot_of_a_file_uri_store_writes_into_its_folder(tmp_path, capsys):
    """`file:///path` names a folder of this machine as a plain path does; `plot` and the
    sweep's own analysis refused it as "not a local folder" (taken for a bucket)."""
    root = planted_results(tmp_path, [64, 128])
    assert main(["plot", root.as_uri()]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.split()[-1] == str(root / "analysis" / "report.html")


def test_summary_table_names_every_width_and_the_drift(tmp_path):
    a = analyze(planted_results(tmp_path, [64, 128, 256]))
    text = summary_table(a)
    lines = text.splitlines()
    for param in ("sp", "mup"):
        for w in (64, 128, 256):
            assert any(line.split()[:2] == [param, str(w)] for line in lines)
    drift = {line.split()[0]: float(line.split()[2]) for line in lines
             if line.split() and line.split()[0] in ("sp", "mup") and "," in line.split()[1]}
    assert drift["sp"] == pytest.approx(-1.0, abs=0.1)
    assert drift["mup"] == pytest.approx(0.0, abs=0.1)


def test_written_tables_follow_the_documented_columns(tmp_path):
    """Extra axes and the store's columns both come through a one-part-per-trial layout."""
    t = synthetic_tables([Planted("mup", 2**-7, 0.0, extra={"model.x": 1})], [64, 128], LR_GRID,
                         [0])
    assert set(TRIAL_COLUMNS) <= set(t.trials.columns)
    write_results(tmp_path, t, per_trial=True)
    assert len(list((tmp_path / "trials").glob("part-*.parquet"))) == len(t.trials)
    a = analyze(tmp_path)
    assert len(a.lr_opt) == 2 and a.fixed == {"model.x": 1}
    # one seed: the interval comes from the fits' residuals (points in each window less the
    # parabola's three parameters, summed over the widths)
    assert (a.lr_opt.ci_method == "fit").all()
    assert (a.lr_opt.ci_df == (a.lr_opt.n_fit_points - 3).sum()).all()


def test_an_axis_set_for_part_of_the_sweep_is_written_as_text(tmp_path):
    """Trials without the axis get "unset"; the mixed column still goes to Parquet."""
    fams = [Planted("mup", 2**-7, 0.0, extra={"model.zero_real_fraction": 0.1}),
            Planted("sp", 2**-8, -1.0)]
    a = analyze(write_results(tmp_path, synthetic_tables(fams, [64, 128], LR_GRID, [0, 1])))
    assert sorted(map(str, a.lr_opt["model.zero_real_fraction"].unique())) == ["0.1", "unset"]
    written = {p.name for p in write_analysis(a, tmp_path / "out")}
    assert {"lr_opt.parquet", "drift.csv", "analysis.md"} <= written
    back = pd.read_parquet(tmp_path / "out" / "lr_opt.parquet")
    assert sorted(back["model.zero_real_fraction"]) == ["0.1", "0.1", "unset", "unset"]


def test_analyze_stays_light(tmp_path):
    """The tables need neither matplotlib (plots only) nor torch or Ray."""
    import subprocess
    import sys

    root = planted_results(tmp_path, [64, 128])
    code = ("import sys; from mutransfer.cli import main; main(['analyze', sys.argv[1], "
            "]); print(sorted(m for m in ('matplotlib', 'torch', 'ray') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True,
                          text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[]"


def _generation(planted: Planted, lrs: list[float], config: dict, tag: str):
    """The planted trials as one release stores them: every trial's config of one shape, its
    ids of that release (issue 31)."""
    import json

    t = synthetic_tables([planted], [64, 128], lrs, [0])
    t.trials["config"] = json.dumps(config)
    t.trials["trial_id"] = tag + t.trials["trial_id"]
    t.steps["trial_id"] = tag + t.steps["trial_id"]
    return t


def test_a_store_of_two_releases_is_analyzed_one_generation_and_says_so(tmp_path, capsys):
    from mutransfer.results.store import Tables

    old = {"width": 64, "train": {"lr": 0.01, "steps": 200}, "param": {"overrides": {}}}
    new = {"width": 64, "train": {"lr": 0.01, "steps": 200, "threads": 1},
           "param": {"overrides": {"ssm_B": {"lr_mult": 2}}}}  # deeper keys: not a field
    ours = _generation(Planted("mup", 2**-7, 0.0), LR_GRID, old, "a")
    theirs = _generation(Planted("mup", 2**-4, 0.0), LR_GRID[::2], new, "b")  # lr* 8x higher
    both = Tables(pd.concat([ours.trials, theirs.trials], ignore_index=True),
                  pd.concat([ours.steps, theirs.steps], ignore_index=True))
    mixed = analyze(write_results(tmp_path / "mixed", both))
    alone = analyze(write_results(tmp_path / "alone", ours))
    pd.testing.assert_frame_equal(mixed.lr_opt, alone.lr_opt)
    n, total = len(theirs.trials), len(both.trials)
    assert mixed.notes[0].startswith(f"{n} of {total} trials are of another generation (a "
                                     "release whose trial config has other fields: "
                                     "+train.threads)")
    assert main(["analyze", str(tmp_path / "mixed")]) == 0
    assert f"{n} of {total} trials are of another generation" in capsys.readouterr().out


def test_a_store_with_an_unreadable_part_is_analyzed_with_one_warning_line(tmp_path, capsys):
    """The part is skipped; the warning is the command's own line, not Python's two (message
    and the source line that raised it)."""
    root = planted_results(tmp_path, [64, 128])
    (root / "trials" / "part-0000bad.parquet").write_bytes(b"not parquet")
    assert main(["analyze", str(root)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: 1 unreadable parts skipped in ") and "part-0000bad" in err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize("command", ["analyze", "plot"])
def test_a_store_whose_every_trials_part_is_unreadable_says_so_in_one_line(
        tmp_path, capsys, command):
    """Not a warning and then "no trials in ...": there are trials, none of them readable."""
    root = planted_results(tmp_path, [64])
    for part in (root / "trials").glob("part-*.parquet"):
        part.write_bytes(part.read_bytes()[:100])  # cut off, as by a full disk
    assert main([command, str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "every trials part is unreadable" in err, err
    assert not (root / "analysis").exists()
