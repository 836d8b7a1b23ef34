"""A sweep file edited between two runs into one results folder (analysis/edits.py).

Edit a fixed setting (`train.steps: 100` -> `200`) and run the sweep again into the same
store: every trial id changes, so every cell runs again beside its first run, and the trials
table (whose columns are only the swept axes) holds two trials per cell and seed. Averaged as
replicates they gave one lr* per width from two different trainings, with nothing said; each
version must instead be its own family, told apart by the field its stored configs differ in.
"""

import json

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis import analyze
from mutransfer.results.store import Tables
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results

WIDTHS = [64, 128, 256]
LRS = [2.0**e for e in np.arange(-13, -2.9, 0.5)]


def _version(steps: int, lr_opt_base: float, loss_base: float, rng_seed: int) -> Tables:
    t = synthetic_tables([Planted("sp", lr_opt_base, -1.0, loss_base=loss_base)], WIDTHS,
                         LRS, [0, 1], rng_seed=rng_seed)
    trials = t.trials.copy()
    trials["trial_id"] = trials["trial_id"] + f"-{steps}"
    trials["attempt"] = trials["attempt"] + f"-{steps}"
    trials["config"] = [json.dumps({"train": {"steps": steps, "batch_size": 4, "seq_len": 64,
                                              "lr": lr, "seed": int(s)}, "width": int(w)})
                        for lr, s, w in zip(trials["lr"], trials["seed"], trials["width"])]
    steps_rows = t.steps.copy()
    steps_rows["trial_id"] = steps_rows["trial_id"] + f"-{steps}"
    steps_rows["attempt"] = steps_rows["attempt"] + f"-{steps}"
    return Tables(trials, steps_rows)


@pytest.fixture(scope="module")
def edited(tmp_path_factory):
    # the longer runs reach a lower loss with their optimum one octave higher
    short, long = _version(100, 2**-8, 3.0, 0), _version(200, 2**-7, 2.7, 1)
    both = Tables(pd.concat([short.trials, long.trials], ignore_index=True),
                  pd.concat([short.steps, long.steps], ignore_index=True))
    return analyze(write_results(tmp_path_factory.mktemp("edited"), both))


def test_each_version_of_an_edited_sweep_file_is_its_own_family(edited):
    """Two versions' trials of a cell are not averaged: no cell holds more trials than
    seeds, and each version's lr* is its own planted one (before: one lr* per width half an
    octave from both)."""
    assert (edited.cells["n_trials"] <= edited.cells["n_seeds"]).all()
    assert "tokens" in edited.choice.scale  # train.steps is now an axis, as a swept one is
    lr_opt = edited.lr_opt.set_index(["tokens", "width"])["lr_opt"]
    for steps, base in ((100, -8), (200, -7)):
        for w in WIDTHS:
            planted = base - np.log2(w / 64)
            assert abs(np.log2(lr_opt[(steps * 256, w)]) - planted) < 0.25, (steps, w)


def test_the_note_names_the_field_the_versions_differ_in(edited):
    """The header says why the store splits into families the sweep file does not sweep."""
    notes = [n for n in edited.notes if "more than one trial of a seed" in n]
    assert len(notes) == 1 and "train.steps" in notes[0]
    assert notes[0].startswith(f"{len(WIDTHS) * len(LRS)} cells")


def test_trials_of_one_seed_with_the_same_config_under_two_ids_are_averaged_with_a_note(
        tmp_path):
    """Rows copied in under new ids (nothing in their configs differs): before, averaged as
    the seed's replicates without a word."""
    once = _version(100, 2**-8, 3.0, 0)
    again = _version(100, 2**-8, 3.0, 0)
    again.trials["trial_id"] += "-copy"
    again.steps["trial_id"] += "-copy"
    both = Tables(pd.concat([once.trials, again.trials], ignore_index=True),
                  pd.concat([once.steps, again.steps], ignore_index=True))
    a = analyze(write_results(tmp_path, both))
    notes = [n for n in a.notes if "with the same config under different trial ids" in n]
    assert len(notes) == 1 and notes[0].startswith(f"{len(WIDTHS) * len(LRS)} cells")
