"""`make_plots` in a notebook or script: the figures are drawn without pyplot, so the caller's
matplotlib backend (a notebook's inline one, a script's window) and its open figures stay as
they were. Before, importing the figures' module (by make_plots, coord_check, the coordinate
check's module) set the process's backend to Agg: the notebook's own plt.show() showed nothing
after. In a fresh process: a process chooses its backend once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.sweeps import planted_results

REPO = Path(__file__).resolve().parents[1]

# the caller's backend: svg stands for any but Agg (inline, QtAgg...), and needs no display
AFTER = """
import sys
import matplotlib
matplotlib.use("svg")
import matplotlib.pyplot as plt
mine = plt.figure()
{call}
print(matplotlib.get_backend(), plt.get_fignums() == [mine.number])
"""


def backend_after(call: str) -> str:
    out = subprocess.run([sys.executable, "-c", AFTER.format(call=call)], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    return out.split()[-2] + " " + out.split()[-1]


def test_make_plots_leaves_the_callers_backend_and_figures(tmp_path):
    results = planted_results(tmp_path, widths=(64, 128), seeds=(0,))
    call = ("from mutransfer.analysis import make_plots\n"
            f"assert make_plots({str(results)!r})")
    assert backend_after(call) == "svg True"


def test_importing_the_coordinate_check_leaves_the_callers_backend():
    assert backend_after("import mutransfer\nmutransfer.coord_check") == "svg True"
