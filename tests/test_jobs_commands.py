"""`mutransfer stop` and `mutransfer jobs` refuse bad input in one line, exit 2, before
reaching any cluster (the cluster itself: tests/test_cluster.py)."""

from __future__ import annotations

import pytest

from mutransfer.cli import main


@pytest.mark.parametrize("argv,says", [
    (["stop", "", "--dashboard", "http://127.0.0.1:8265"], "an empty job id"),
    (["stop", "job", "--dashboard", "127.0.0.1:6379"], "not the dashboard"),
    (["jobs", "--dashboard", "ray://head:10001"], "not the dashboard"),
    (["jobs"], "the following arguments are required: --dashboard"),
    (["jobs", "--dashboard", "http://127.0.0.1:1"], "cannot reach the Ray dashboard there"),
    (["stop", "job", "--dashboard", "http://127.0.0.1:1"], "cannot reach the Ray dashboard"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err
