"""Model fields that build no model are refused with the config, before any trial starts:
S4D's modes are d_state/2 conjugate pairs, so an odd d_state was accepted by `validate` and
`sweep` and then failed every trial of the grid when it built its model."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from mutransfer.cli import main
from mutransfer.config import TrialConfig


@pytest.mark.parametrize("d_state", [1, 3, 5])
def test_s4d_with_an_odd_d_state_is_refused_by_the_config(d_state):
    with pytest.raises(ValidationError, match=f"d_state {d_state}: S4D needs an even d_state"):
        TrialConfig(width=16, model={"arch": "s4d", "d_state": d_state, "base_width": 16})


def test_odd_d_state_stays_fine_for_mamba_and_even_for_s4d():
    TrialConfig(width=16, model={"arch": "mamba", "d_state": 3, "base_width": 16})
    TrialConfig(width=16, model={"arch": "s4d", "d_state": 2, "base_width": 16})


def test_validate_refuses_an_s4d_sweep_with_an_odd_d_state_in_one_line(tmp_path, capsys):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "name": "s4d_odd", "model": {"arch": "s4d", "n_layer": 1, "d_state": 3,
                                     "base_width": 16},
        "train": {"steps": 2, "batch_size": 2, "seq_len": 16, "eval_batches": 1},
        "axes": {"width": [16, 32], "lr": [0.001]}, "storage": str(tmp_path / "store")}))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "even d_state" in err[0], err
    assert not (tmp_path / "store").exists()
