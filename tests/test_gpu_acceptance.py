"""benchmarks/gpu_acceptance.sh on a machine without CUDA: one clear line, exit 2, nothing
run or written (on a GPU machine it runs every step; its figures go to benchmarks/README.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "gpu_acceptance.sh"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine runs the steps")
def test_without_cuda_it_says_so_and_writes_nothing(tmp_path):
    out = tmp_path / "acceptance"
    done = run(str(out))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0
    assert "no CUDA device here" in done.stderr and "nothing was run" in done.stderr
    assert not out.exists()


def test_it_lists_every_step_that_still_has_no_figure():
    done = run("--list")
    assert done.returncode == 0
    steps = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert steps["doctor"] == "mutransfer doctor"
    assert "-m pytest -m gpu" in steps["gpu-tests"]
    assert "benchmarks/scan.py" in steps["scan"] and "--sweep" in steps["scan-sweep"]
    assert "benchmarks/train_gpu.py" in steps["train-gpu"]
    assert "benchmarks/memory_estimate.py" in steps["memory-estimate"]
    assert "gpu_width_transfer.yaml" in steps["gpu-width-transfer"]
