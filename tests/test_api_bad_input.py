"""The Python API (README, "From Python") with bad input: `mutransfer.run`, `coord_check` and
`CoordResult` refuse it with a one-line UserError naming the problem, before anything is
written and before any training; never a TypeError, an AttributeError or a pydantic
ValidationError from deep inside. Each test stops the work that would follow a missed refusal
(the sweep on Ray, the coordinate check's measurement), so none of them trains a model."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

import pandas as pd
import pytest

import mutransfer
from mutransfer.errors import UserError

SPEC = {"name": "bad-input", "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
        "train": {"steps": 2, "batch_size": 2, "seq_len": 16, "eval_every": 1},
        "data": {"source": "synthetic"}, "axes": {"width": [16], "lr": [0.001]}}


class ReachedWork(Exception):
    """What the tests put where the training would start: a refusal came too late."""


@pytest.fixture
def no_sweep(monkeypatch):
    """`run` stops where the store's lease is held and the trials would start."""
    from mutransfer.sweep.run import driver

    def stop(*args, **kwargs):
        raise ReachedWork

    monkeypatch.setattr(driver, "_run_holding_lease", stop)


def _refused(match: str, tmp_path: Path, **options) -> None:
    options.setdefault("storage", str(tmp_path / "r"))
    with pytest.raises(UserError, match=match) as info:
        mutransfer.run(SPEC, **options)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "r").exists() and not (tmp_path / "results").exists()


# -- run: the options ----------------------------------------------------------------------------

@pytest.mark.parametrize("storage,needle", [
    (5, "storage: expected a folder path or URI, got int 5"),
    (["r"], "storage: expected a folder path or URI, got list"),
    ("", "storage '': expected a folder path or URI"),
    ("a\nb", "storage: 'a\\\\nb' holds a control character"),
    ("s3://", "storage: s3://: a URI with no location"),
])
def test_run_refuses_a_storage_that_is_no_folder_or_uri_in_one_line(tmp_path, no_sweep,
                                                                     storage, needle):
    _refused(needle, tmp_path, storage=storage)


def test_run_takes_a_pathlib_storage_as_its_folder(tmp_path, monkeypatch):
    from mutransfer.sweep.run import driver

    def where(plan, store, *args, **kwargs):
        raise ReachedWork(store.root)

    monkeypatch.setattr(driver, "_run_holding_lease", where)
    with pytest.raises(ReachedWork) as info:
        mutransfer.run(SPEC, storage=tmp_path / "r", out=io.StringIO())
    assert Path(info.value.args[0]) == tmp_path / "r"


@pytest.mark.parametrize("option,value", [
    ("num_cpus", 1.5), ("num_cpus", "2"), ("num_cpus", True),
    ("num_gpus", "x"), ("num_gpus", 0.5),
    ("max_cells", "3"), ("max_cells", 1.5),
])
def test_run_refuses_a_count_option_that_is_no_whole_number(tmp_path, no_sweep, option, value):
    _refused(f"{option}: expected a whole number, got {value!r}", tmp_path, **{option: value})


@pytest.mark.parametrize("max_cells", [0, -5])
def test_run_refuses_max_cells_below_one_naming_the_option(tmp_path, no_sweep, max_cells):
    _refused(f"max_cells {max_cells}: give at least 1", tmp_path, max_cells=max_cells)


@pytest.mark.parametrize("address", [5, ""])
def test_run_refuses_an_address_that_is_no_host_name(tmp_path, no_sweep, address):
    _refused("address: expected HOST:PORT", tmp_path, address=address)


def test_run_refuses_an_out_it_cannot_write_to_before_the_store_exists(tmp_path, no_sweep):
    closed = io.StringIO()
    closed.close()
    (tmp_path / "f").write_text("x")
    with open(tmp_path / "f") as read_only:
        for out, needle in [(5, "out: expected a text stream .* got int"),
                            (str(tmp_path / "log.txt"), "out: expected a text stream .* got str"),
                            (closed, "out: the stream is closed"),
                            (read_only, "out: the stream is not open for writing")]:
            _refused(needle, tmp_path, out=out)


def test_run_refuses_an_empty_sweep_path_naming_it(tmp_path):
    with pytest.raises(UserError, match="sweep file '': expected the path of a sweep file"):
        mutransfer.run("", storage=str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()


# -- coord_check: the settings -------------------------------------------------------------------

SMALL = {"widths": [16, 32], "params": ["sp"], "seeds": [0], "steps": 1, "n_layer": 1,
         "d_state": 4, "batch_size": 2, "seq_len": 16}


@pytest.fixture
def no_measuring(monkeypatch):
    """coord_check stops where the corpus would load, before any model trains."""
    import mutransfer.coordcheck as cc

    def stop(*args, **kwargs):
        raise ReachedWork

    monkeypatch.setattr(cc, "load_data", stop)
    monkeypatch.setattr(cc, "run_coord_check", stop)


def _coord_refused(needle: str, **settings) -> None:
    with pytest.raises(UserError, match=needle) as info:
        mutransfer.coord_check(mutransfer.CoordSettings(**{**SMALL, **settings}))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("settings,needle", [
    ({"widths": "1632"}, "widths: input should be a valid list, got '1632'"),
    ({"widths": ["16", "32"]}, "widths[0]: input should be a valid integer, got '16'"),
    ({"widths": [16.5, 32]}, "widths[0]: input should be a valid integer, got 16.5"),
    ({"widths": None}, "widths: input should be a valid list, got None"),
    ({"widths": 16}, "widths: input should be a valid list, got 16"),
    ({"steps": "2"}, "steps: input should be a valid integer, got '2'"),
    ({"steps": 1.5}, "steps: input should be a valid integer, got 1.5"),
    ({"n_layer": "2"}, "n_layer: input should be a valid integer"),
    # a bare string of params was read letter by letter ("unknown parameterization 'm'")
    ({"params": "sp"}, "params: input should be a valid list, got 'sp'"),
    ({"params": None}, "params: input should be a valid list"),
    ({"lr": "0.1"}, "lr: input should be a valid number, got '0.1'"),
    ({"seeds": 3}, "seeds: input should be a valid list, got 3"),
    ({"seeds": "0"}, "seeds: input should be a valid list, got '0'"),
    ({"base_width": "16"}, "base_width: input should be a valid integer"),
    ({"alpha": "0.05"}, "alpha: input should be a valid number"),
    ({"overrides": [1]}, "overrides: input should be a valid dictionary, got [1]"),
    ({"model": [1]}, "model: input should be a valid dictionary, got [1]"),
    ({"widths": [16], "depths": 3}, "depths: input should be a valid list, got 3"),
    ({"widths": [16], "depths": ["1", "2"]}, "depths[0]: input should be a valid integer"),
])
def test_coord_check_refuses_a_setting_of_the_wrong_type_naming_it(no_measuring, settings,
                                                                   needle):
    _coord_refused(re.escape(needle), **settings)


def test_an_optimizer_that_is_no_name_is_refused_by_coord_check_not_by_the_settings(
        no_measuring):
    _coord_refused(re.escape("optimizer: input should be a valid string, got ['adam']"),
                   optimizer=["adam"])
    _coord_refused("optimizer: input should be a valid string", optimizer=None)


@pytest.mark.parametrize("settings,needle", [
    ({"params": []}, "params: give at least one parameterization"),
    ({"params": ["sp", "sp"]}, "params: parameterization 'sp' is given twice"),
    # a repeated seed would count as a second sample in the slopes' standard error
    ({"seeds": [0, 0]}, "seeds: seed 0 is given twice"),
    ({"seeds": [2**60]}, f"seeds {2**60}: out of range for a seed"),
    ({"lr": math.inf}, "lr: must be positive, got inf"),
])
def test_coord_check_refuses_settings_that_would_measure_nothing_or_wrongly(no_measuring,
                                                                           settings, needle):
    _coord_refused(needle, **settings)


@pytest.mark.parametrize("settings,needle", [
    ({"d_state": 0}, "d_state: must be at least 1, got 0"),
    ({"batch_size": 0}, "batch_size: must be at least 1, got 0"),
    ({"seq_len": 1}, "seq_len: must be at least 2, got 1"),
    ({"model": {"no_such_field": 1}}, "model no_such_field: Extra inputs are not permitted"),
    ({"overrides": {"sp": {"no_such_role": {"lr_adam": 1}}}}, "param.overrides.no_such_role"),
    ({"widths": [16], "depths": [1, 2], "depth_param": "no_such_rule"}, "param.depth"),
])
def test_coord_check_refuses_what_the_trial_config_refuses_as_a_user_error(no_measuring,
                                                                          settings, needle):
    _coord_refused(needle, **settings)


def test_coord_check_refuses_a_batch_larger_than_the_machine_before_the_corpus_loads(
        no_measuring, monkeypatch):
    import mutransfer.coordcheck as cc

    monkeypatch.setattr(cc, "memory_bytes", lambda: 16 * 2**30)
    _coord_refused("batch_size 1000000000000 x seq_len 16: one batch's token ids alone",
                   batch_size=10**12)


@pytest.mark.parametrize("settings", [{}, {"widths": [16, 32]}, 5])
def test_coord_check_refuses_settings_that_are_no_coord_settings(no_measuring, settings):
    """An empty dict was taken as 'no settings' and ran the full default check."""
    with pytest.raises(UserError, match="settings are a CoordSettings, not"):
        mutransfer.coord_check(settings)


# -- CoordResult ---------------------------------------------------------------------------------

@pytest.fixture
def result() -> mutransfer.CoordResult:
    verdicts = pd.DataFrame({"parameterization": ["mup", "sp"], "verdict": ["PASS", "FAIL"]})
    return mutransfer.CoordResult(settings=mutransfer.CoordSettings(), coord=pd.DataFrame(),
                                  slopes=pd.DataFrame(), verdicts=verdicts, elapsed_s=0.0)


def test_the_verdict_of_a_parameterization_the_check_did_not_run_is_a_user_error(result):
    assert result.verdict("mup") == "PASS"
    with pytest.raises(UserError, match="no verdict for 'mu_p': this check ran mup, sp"):
        result.verdict("mu_p")


def test_write_refuses_a_target_that_is_no_folder_and_writes_nothing(result, tmp_path,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f").write_text("x")
    for out, needle in [(tmp_path / "f", "is a file"),
                        (tmp_path / "f" / "sub", "f is a file, not a folder"),
                        (5, "out: expected a folder path, got 5"),
                        (None, "out: expected a folder path, got None"),
                        ("", "out: expected a folder path, got ''")]:
        with pytest.raises(UserError, match=needle):
            result.write(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


# -- read_tables, run_trial, analyze -------------------------------------------------------------

@pytest.mark.parametrize("path,needle", [
    (5, "read_tables: expected a results folder or URI, got 5"),
    (None, "read_tables: expected a results folder or URI, got None"),
    ("", "read_tables: expected a results folder or URI, got ''"),
])
def test_read_tables_refuses_what_names_no_folder(path, needle):
    """Before: empty tables, as for a store not there yet."""
    with pytest.raises(UserError, match=re.escape(needle)):
        mutransfer.read_tables(path)


def test_read_tables_refuses_a_file_and_reads_a_missing_folder_as_empty(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="is a file, not a results folder"):
        mutransfer.read_tables(tmp_path / "f")
    assert mutransfer.read_tables(tmp_path / "not_yet").trials.empty


@pytest.mark.parametrize("config", [{"width": 16}, None, 5])
def test_run_trial_refuses_what_is_no_trial_config(config):
    """Before: AttributeError: 'dict' object has no attribute 'train'."""
    with pytest.raises(UserError, match="run_trial: expected a TrialConfig, got "):
        mutransfer.run_trial(config)


def test_analyze_of_an_empty_path_names_it():
    """Before: "no trials in  (expected /trials/part-*.parquet)"."""
    with pytest.raises(UserError, match=re.escape("expected a results folder, got ''")):
        mutransfer.analyze("")
