"""LR ranges given per parameterization (`lr: {sp: ..., mup_ssm: ...}`) are checked against the
parameterizations the sweep runs, also when those come from an axis of whole `param` sections
(sweeps/depth_rule.yaml's form).

Before, `param: [{name: sp}, {name: mup_ssm}]` with `lr: {sp: [...]}` ended in a KeyError
traceback ('*') from validate and sweep: the check that every parameterization has LRs read
only a `parameterization` axis. And an LR range for a parameterization no cell runs (the
parameterization axis forgotten) was dropped without a word.
"""

from __future__ import annotations

import yaml

from mutransfer.cli import main
from tests.sweeps import tiny_sweep, write_sweep


def _validate(tmp_path, capsys, axes: dict) -> tuple[int, str, str]:
    path = write_sweep(tmp_path, "per_param", {"width": [16, 32], **axes}, tmp_path / "results",
                       data={"source": "synthetic"})
    rc = main(["validate", "--no-data", str(path)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_param_section_axis_without_lrs_for_one_of_its_names_is_one_line(tmp_path, capsys):
    for command in ("validate", "sweep"):
        doc = tiny_sweep("per_param", {"width": [16, 32],
                                       "param": [{"name": "sp"}, {"name": "mup_ssm"}],
                                       "lr": {"sp": [0.01]}},
                         storage=str(tmp_path / "results"))
        path = tmp_path / "sweep.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        assert main([command, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: "), err
        assert "axes.lr: no LRs for parameterization mup_ssm (given for sp)" in err
    assert not (tmp_path / "results").exists()


def test_a_param_section_axis_takes_lrs_per_name(tmp_path, capsys):
    """A section without a name is sp, as it replaces the file's param section."""
    rc, out, err = _validate(tmp_path, capsys, {
        "param": [{"depth": "none"}, {"name": "mup_ssm", "depth": "depth_mup"}],
        "lr": {"sp": [0.01], "mup_ssm": [0.1, 0.2]}})
    assert rc == 0, err
    assert "ok, 6 cells" in out and "not used" not in out


def test_lrs_for_a_parameterization_no_cell_runs_are_noted(tmp_path, capsys):
    rc, out, err = _validate(tmp_path, capsys, {"lr": {"sp": [0.01], "mup": [0.1]}})
    assert rc == 0, err
    assert "ok, 2 cells" in out
    assert "note: axes.lr mup is not used: the sweep runs sp" in out
