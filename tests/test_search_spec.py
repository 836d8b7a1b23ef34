"""`search: {kind: transfer}` in sweep files: options, refusals, and what `validate` and
`--dry-run` say it will run (no Ray)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from mutransfer.results.store import StoreState
from mutransfer.sweep.plan.spec import json_schema
from mutransfer.sweep.run.driver import prepare
from mutransfer.sweep.run.progress import Progress
from mutransfer.sweep.search.registry import plan_work
from tests.sweeps import tiny_sweep

AXES = {"width": [16, 32, 64], "parameterization": ["sp", "mup"],
        "lr": [0.001, 0.002, 0.004, 0.008, 0.016], "seed": [0, 1]}


def write(tmp_path: Path, search: dict, axes: dict | None = None) -> Path:
    doc = tiny_sweep("tr", axes or AXES, storage=str(tmp_path / "results"), search=search)
    path = tmp_path / "tr.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.parametrize("search,needle", [
    ({"kind": "grid", "window": 5}, "window is an option of kind transfer, not grid"),
    ({"kind": "transfer", "trials_per_width": 5}, "trials_per_width is an option of kind optuna"),
    ({"kind": "transfer", "window": 0}, "search.window"),
    ({"kind": "transfer", "settle_octaves": 0}, "search.settle_octaves"),
    ({"kind": "optuna", "stop": {}}, "stop is an option of kind grid or transfer, not optuna"),
    ({"kind": "grid", "stop": {"protect_octaves": -1}}, "search.stop.protect_octaves"),
    ({"kind": "transfer", "stop": {"safety": ".nan"}}, "search.stop.safety"),
    ({"kind": "transfer", "settle_octaves": ".inf"}, "search.settle_octaves"),
    # a file written for the old count-of-LRs rule: told what replaced it
    # (it named the fit window's 2.5 octaves as settle_octaves' default, which is 1.22)
    ({"kind": "transfer", "margin": 2}, "margin was removed: the transfer search now settles a "
                                        "width once every grid LR within settle_octaves"),
    ({"kind": "transfer", "full_widths": -1}, "search.full_widths"),
    ({"kind": "transfer", "probe_stability": "sometimes"}, "search.probe_stability"),
])
def test_a_search_option_of_the_wrong_kind_or_out_of_range_is_one_line_exit_2(
        tmp_path, capsys, search, needle):
    rc = main(["validate", str(write(tmp_path, search))])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and needle in err, err
    assert not (tmp_path / "results").exists()


def test_a_transfer_search_needs_an_lr_axis(tmp_path, capsys):
    rc = main(["validate", str(write(tmp_path, {"kind": "transfer"}, {"width": [16, 32]}))])
    err = capsys.readouterr().err
    assert rc == 2 and "axes.lr: a transfer search needs an LR axis" in err


def test_validate_says_the_least_and_most_a_transfer_search_runs(tmp_path, capsys):
    rc = main(["validate", str(write(tmp_path, {"kind": "transfer", "window": 3}))])
    out = capsys.readouterr().out
    # 2 families x 2 seeds x (the walk's 3 first LRs at width 16 + 3 LRs at each of widths 32
    # and 64) = 36
    assert rc == 0 and "transfer search over 60 cells: runs at least 36" in out, out
    assert "a walk from the grid's middle at the smallest width" in out
    assert "window of 3 at each of the 2 wider" in out
    # every LR within 1.22 octaves of the middle one, and two a side in the fit's window (2.5
    # octaves on a one-octave grid): all 5 LRs of this grid: 60
    assert "about 60 when each optimum is inside the grid (about 5 LRs a width" in out
    assert "within 1.22 octaves" in out and "at most 60" in out


def test_dry_run_lists_each_family_and_width_and_writes_nothing(tmp_path, capsys):
    path = write(tmp_path, {"kind": "transfer", "probe_stability": True})
    rc = main(["sweep", str(path), "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 0 and "0 stored, 12 to run now" in out, out  # 2 x the walk's 3 x 2 seeds
    assert "probes upward" in out
    lines = [ln.split() for ln in out.splitlines() if ln.split()[:1] in (["sp"], ["mup"])]
    assert [ln[:2] for ln in lines] == [["sp", "16"], ["sp", "32"], ["sp", "64"],
                                        ["mup", "16"], ["mup", "32"], ["mup", "64"]]
    assert "waits for narrower widths" in out
    assert not (tmp_path / "results").exists()


def test_transfer_cells_are_the_grids_cells(tmp_path):
    grid = prepare(str(write(tmp_path, {"kind": "grid"})), check_data=False)
    tr = prepare(str(write(tmp_path, {"kind": "transfer"})), check_data=False)
    assert [c.trial_id for c in tr.cells] == [c.trial_id for c in grid.cells]
    work = plan_work(tr, StoreState())
    first = set(work.state.to_run())
    # the walk starts at the smallest width: the middle LR of five and one either side
    middle = sorted({c.columns["lr"] for c in grid.cells})[1:4]
    assert first == {c.trial_id for c in grid.cells if c.width == 16 and
                     c.columns["lr"] in middle}


def test_the_schema_documents_the_transfer_options():
    search = json_schema()["$defs"]["Search"]
    assert "transfer" in search["properties"]["kind"]["enum"]
    for name in ("full_widths", "window", "settle_octaves", "probe_stability"):
        assert search["properties"][name]["description"].startswith("transfer:")
    assert "bracketed" in search["description"]


def test_progress_without_a_known_total_shows_the_expected_count():
    import io

    clock = iter(range(0, 10_000, 5)).__next__
    out = io.StringIO()
    p = Progress(None, out=out, tty=False, every_s=0, clock=clock)
    p.expected = 12
    p.started("a")
    p.finished("a", "complete")
    assert "[ 1/~12] done 1" in p.line() and "eta ?" not in p.line()
    p.expected = 0  # never fewer than started
    p.started("b")
    assert "/~2]" in p.line()


def test_progress_writing_to_a_file_can_be_pickled_as_tune_pickles_its_callbacks(tmp_path):
    import ray.cloudpickle

    with open(tmp_path / "log.txt", "w") as log:
        progress = Progress(3, out=log)
        copy = ray.cloudpickle.loads(ray.cloudpickle.dumps(progress))
        assert copy.total == 3 and progress.out is log
