"""Refusals of a sweep run from Python speak of what Python has: a grid above the size limit
names the argument that raises it (`max_cells=`), not only the CLI's --max-cells; missing data
of a sweep given as a mapping does not point at a sweep file's comment."""

from __future__ import annotations

import pytest

import mutransfer
from mutransfer.errors import UserError
from tests.sweeps import tiny_sweep


def test_the_refusal_names_max_cells_for_python(tmp_path):
    doc = tiny_sweep("big", {"lr": [1e-3, 2e-3, 4e-3]}, storage=str(tmp_path / "r"))
    with pytest.raises(UserError, match=r"--max-cells 3 \(from Python: max_cells=3\)"):
        mutransfer.run(doc, max_cells=2)
    assert not (tmp_path / "r").exists()


def test_missing_data_of_a_sweep_given_as_a_mapping_points_at_no_sweep_file(tmp_path):
    doc = tiny_sweep("nodata", {"lr": [1e-3]}, storage=str(tmp_path / "r"))
    doc["data"] = {"source": "text", "path": str(tmp_path / "absent")}
    with pytest.raises(UserError) as exc:
        mutransfer.run(doc)
    assert f"put the data at {tmp_path / 'absent'} or change data.path" in str(exc.value)
    assert "sweep file" not in str(exc.value)
