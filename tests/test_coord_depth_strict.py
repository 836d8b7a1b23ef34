"""`--strict` in a depth check: the width is held fixed, so sp is not expected to FAIL there (at
the base width it is the same model as mup); every parameterization is expected to PASS. Before,
a depth check whose depth parameterization did its job (all PASS) exited 1 on "sp PASSes"."""

import pandas as pd

from mutransfer.coord.settings import CoordSettings
from mutransfer.coordcheck import CoordResult


def _result(verdicts: dict[str, str], depths: list[int] | None) -> CoordResult:
    settings = CoordSettings(widths=[32] if depths else [32, 64], params=list(verdicts),
                             depths=depths)
    table = pd.DataFrame({"parameterization": list(verdicts), "verdict": list(verdicts.values())})
    return CoordResult(settings=settings, coord=pd.DataFrame(), slopes=pd.DataFrame(),
                       verdicts=table, elapsed_s=0.0)


def test_a_depth_check_where_every_parameterization_passes_breaks_no_strict_expectation():
    assert _result({"sp": "PASS", "mup": "PASS"}, depths=[1, 2, 4]).strict_failures() == []


def test_a_depth_check_flags_any_parameterization_that_fails_or_is_inconclusive():
    result = _result({"sp": "FAIL", "mup": "PASS", "mup_ssm": "INCONCLUSIVE"}, depths=[2, 4])
    assert result.strict_failures() == ["sp FAILs", "mup_ssm is INCONCLUSIVE"]


def test_a_width_check_still_expects_sp_to_fail():
    result = _result({"sp": "PASS", "mup": "PASS"}, depths=None)
    assert result.strict_failures() == ["sp PASSes"]
