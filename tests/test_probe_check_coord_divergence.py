"""A coordinate stage whose runs blow up already at the narrowest width (a coordinate LR too
large for the model) measures nothing about width: `mutransfer check` answers INCONCLUSIVE and
says to lower check.coord.lr, rather than FAIL naming a tensor "grows as width^+inf"; and an
LR whose step overflows float32 is such a run, not a traceback (check and coord-check)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from mutransfer.cli import main

CHECK = {"name": "diverging_coord", "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
         "param": {"name": "mup_ssm"}, "data": {"source": "synthetic"},
         "train": {"steps": 10, "batch_size": 2, "seq_len": 16, "eval_every": 5},
         "check": {"widths": [16, 32], "seeds": [0, 1], "lr": [0.001, 0.003, 0.01],
                   "budget": {"minutes": 1, "seeds": 2},
                   "coord": {"steps": 1, "seeds": [0, 1], "batch_size": 2, "seq_len": 16}}}


def _check(tmp_path: Path, coord_lr: float, *options: str) -> tuple[int, dict]:
    doc = yaml.safe_load(yaml.safe_dump(CHECK))
    doc["check"]["coord"]["lr"] = coord_lr
    path = tmp_path / "check.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    code = main(["check", str(path), "--out", str(out), *options])
    return code, json.loads((out / "verdict.json").read_text())


def test_a_coordinate_lr_that_blows_up_at_the_narrowest_width_is_inconclusive(tmp_path):
    code, v = _check(tmp_path, 1e30, "--coord-only")  # NaN at every width (was: FAIL, +inf)
    assert (code, v["verdict"]) == (3, "INCONCLUSIVE"), v
    assert "narrowest width 16" in v["reason"] and v["culprit"] is None
    assert any("lower check.coord.lr" in a for a in v["advice"]), v["advice"]
    report = (tmp_path / "out" / "report.html").read_text()
    assert "INCONCLUSIVE" in report and "lower check.coord.lr" in report


def test_a_diverged_coordinate_stage_runs_no_transfer_search(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr("mutransfer.commands.check._transfer_stage",
                        lambda *a, **k: ran.append("transfer"))
    code, v = _check(tmp_path, 1e30)
    assert ran == [] and code == 3 and v["rounds"] == 0, v


def test_a_coordinate_lr_beyond_float32_is_a_diverged_run_not_a_traceback(tmp_path):
    code, v = _check(tmp_path, 1e300, "--coord-only")  # was: RuntimeError ... overflow
    assert (code, v["verdict"]) == (3, "INCONCLUSIVE"), v


def test_coord_check_with_an_lr_beyond_float32_measures_non_finite_sizes(tmp_path):
    code = main(["coord-check", "--widths", "16", "32", "--seeds", "0", "1", "--steps", "1",
                 "--param", "mup_ssm", "--lr", "1e300", "--out", str(tmp_path / "cc")])
    assert code == 0 and (tmp_path / "cc" / "verdicts.parquet").exists()


def test_coord_check_of_a_run_diverged_at_the_smallest_width_is_inconclusive():
    from mutransfer import CoordSettings, coord_check

    r = coord_check(CoordSettings(widths=[16, 32], seeds=[0, 1], steps=1, n_layer=1, d_state=4,
                                  params=["mup_ssm"], lr=1e30))
    assert r.verdict("mup_ssm") == "INCONCLUSIVE"  # was: FAIL, ΔL0...@t1 +inf
    assert "diverged at width 16" in r.text() and "lower --lr" in r.text()
