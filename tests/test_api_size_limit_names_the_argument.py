"""A grid above the size limit, run from Python: the refusal names the argument that raises
the limit there (`max_cells=`), not only the CLI's --max-cells."""

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
