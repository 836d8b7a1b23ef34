"""An LR range widened between two runs into one store runs only the new LRs.

`2**(lo + i/k)` depends on lo in its last bits: widening `{log2: [-10, -6], per_octave: 3}`
to `[-12, -6]` gave 4 of the 13 stored LRs a float an ulp away, new trial ids, and ran their
cells again beside the stored ones (before: 38 cells, 18 complete; now 26 complete)."""

from __future__ import annotations

from mutransfer.sweep.run.driver import prepare
from tests.sweeps import SP, tiny_sweep
from tests.synthetic_sweeps import synthetic_tables, write_results

FIRST = [2.0 ** (-10 + i / 3) for i in range(13)]  # what a run of [-10, -6] stored


def test_a_widened_range_keeps_the_floats_of_the_lrs_the_store_ran(tmp_path):
    write_results(tmp_path / "store", synthetic_tables([SP], [16, 32], FIRST, [0]),
                  per_trial=True)
    widened = tiny_sweep("wide", {"width": [16, 32],
                                  "lr": {"log2": [-12, -6], "per_octave": 3}})
    fresh = {c.columns["lr"] for c in prepare(widened, str(tmp_path / "none"),
                                              check_data=False).cells}
    assert len(set(FIRST) - fresh) == 4  # the drift this guards against
    planned = {c.columns["lr"] for c in prepare(widened, str(tmp_path / "store"),
                                                check_data=False).cells}
    assert set(FIRST) <= planned and len(planned) == 19
