"""`check.coord.seeds` needs two different seeds: a seed given twice runs one model twice and
counts once, leaving a one-seed coordinate check whose every slope outside the tolerance is a
violation (no standard error at two widths). It is refused in one line, as
`mutransfer coord-check --seeds 1 1` is, before anything runs or is written."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from mutransfer.commands.check_spec import CheckSpec


def test_a_coordinate_seed_given_twice_is_refused():
    with pytest.raises(ValidationError, match="seed 1 is given twice"):
        CheckSpec(name="c", check={"coord": {"seeds": [1, 1]}})
    with pytest.raises(ValidationError, match="seed 0 is given twice"):
        CheckSpec(name="c", check={"coord": {"seeds": [0, 1, 0]}})
    assert CheckSpec(name="c", check={"coord": {"seeds": [3, 1]}}).check.coord.seeds == [3, 1]


def test_check_with_a_repeated_coordinate_seed_is_one_line_exit_2_nothing_written(
        tmp_path, capsys):
    from mutransfer.cli import main

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"name": "c", "model": {"arch": "mamba", "n_layer": 1,
                                                           "base_width": 16},
                                    "check": {"widths": [16, 32],
                                              "coord": {"seeds": [1, 1]}}}))
    out = tmp_path / "out"
    assert main(["check", str(path), "--out", str(out), "--coord-only"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "check.coord.seeds" in err, err
    assert "given twice" in err and not out.exists()
