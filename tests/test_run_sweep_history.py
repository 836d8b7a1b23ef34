"""sweep.yaml holds the sweep file as last run; every earlier version of it is kept under
history/ (docs/results-format.md), however fast the versions follow one another."""

from __future__ import annotations

import time
from types import SimpleNamespace

from mutransfer.results.store import Store
from mutransfer.sweep.run import driver


def test_versions_changed_within_one_second_each_keep_their_history_file(tmp_path,
                                                                        monkeypatch):
    """A script looping over variants of a sweep on one finished store runs nothing, so it
    changes sweep.yaml several times a second: no earlier version may overwrite another."""
    store = Store(tmp_path / "results")
    store.ensure_writable()
    one_second = time.gmtime(1_800_000_000)
    monkeypatch.setattr(driver.time, "gmtime", lambda *a: one_second)
    versions = [f"name: s\naxes: {{lr: [{lr}]}}\n" for lr in (0.001, 0.01, 0.003, 0.03)]
    for text in versions:
        driver.save_sweep_copy(store, SimpleNamespace(file_text=text))
    driver.save_sweep_copy(store, SimpleNamespace(file_text=versions[-1]))  # unchanged
    history = sorted((tmp_path / "results" / "history").iterdir())
    assert [p.read_text() for p in history] == versions[:-1]  # in the order they were run
    assert history[0].name == "sweep-20270115T080000.yaml"
    assert (tmp_path / "results" / "sweep.yaml").read_text() == versions[-1]


def test_a_stored_sweep_file_that_is_not_utf8_moves_to_history_byte_for_byte(tmp_path):
    """sweep.yaml edited by hand in Latin-1 (or damaged): the next run keeps it in history/
    as it was and stores the file it runs, instead of a UnicodeDecodeError traceback."""
    store = Store(tmp_path / "results")
    store.ensure_writable()
    edited = b"name: s\n# caf\xe9: tried a lower LR\naxes: {lr: [0.001]}\n"
    (tmp_path / "results" / "sweep.yaml").write_bytes(edited)
    driver.save_sweep_copy(store, SimpleNamespace(file_text="name: s\naxes: {lr: [0.01]}\n"))
    [kept] = (tmp_path / "results" / "history").iterdir()
    assert kept.read_bytes() == edited
    assert (tmp_path / "results" / "sweep.yaml").read_text() == "name: s\naxes: {lr: [0.01]}\n"
