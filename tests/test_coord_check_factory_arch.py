"""`mutransfer coord-check` on a `package.module:factory` arch (examples/tiny_gpt.py): such a
model records no traced activations, so the check measures what `mutransfer check` does, the
output of every module holding parameters and the logits. Before, it measured nothing and the
verdict ended in a KeyError traceback."""

import pytest

from mutransfer.coord.settings import CoordSettings
from mutransfer.coordcheck import coord_check

GPT = {"arch": "examples.tiny_gpt:tiny_gpt", "options": {"n_layer": 1, "head_dim": 8}}


@pytest.fixture(scope="module")
def result():
    return coord_check(CoordSettings(widths=[16, 32], params=["sp", "mup"], steps=1,
                                     seeds=[0, 1], batch_size=2, seq_len=8, model=GPT))


def test_a_factory_models_coordinate_check_measures_its_modules_and_logits(result):
    quantities = set(result.coord["quantity"])
    assert {"tok", "blocks.0.qkv", "blocks.0.fc_out", "logits"} <= quantities
    # the readout's own output is not measured apart: it is the logits before readout_mult
    assert "head" not in quantities
    assert set(result.coord["width"]) == {16, 32}
    assert list(result.coord.columns) == ["parameterization", "optimizer", "width", "n_layer",
                                          "seed", "step", "layer", "quantity", "rms", "drms"]


def test_a_factory_models_coordinate_check_gives_a_verdict_per_parameterization(result):
    assert sorted(result.verdicts["parameterization"]) == ["mup", "sp"]
    assert set(result.verdicts["verdict"]) <= {"PASS", "FAIL", "INCONCLUSIVE"}
