"""benchmarks/gpu_acceptance.sh on a machine without CUDA: one clear line, exit 2, nothing
run or written (on a GPU machine it runs every step; its figures go to benchmarks/README.md);
and the kit that lets it run on the lent GPU machine, which has no registry and no pydantic,
optuna or Ray (benchmarks/device_setup.sh installs it there; build_cuda_refs.py compiles the
reference kernels there)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).parent.parent / "benchmarks"
SCRIPT = BENCH / "gpu_acceptance.sh"


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
    # the CLI from the checkout where it is not installed (PATH here holds no `mutransfer`)
    assert steps["doctor"] == f"{sys.executable} -m mutransfer.cli doctor"
    assert "-m pytest -m gpu" in steps["gpu-tests"]
    assert "benchmarks/scan.py" in steps["scan"] and "--sweep" in steps["scan-sweep"]
    assert "benchmarks/train_gpu.py" in steps["train-gpu"]
    assert "benchmarks/memory_estimate.py" in steps["memory-estimate"]
    assert "gpu_width_transfer.yaml" in steps["gpu-width-transfer"]
    assert "benchmarks/gpu_repro.py" in steps["gpu-repro"]
    # the reference kernels build in the background while the GPU tests and the same trial
    # run twice; doctor's backend check and the side-by-side steps wait for them
    order = list(steps)
    assert order[:6] == ["gpu-tests", "compile-check", "gpu-repro", "memory-estimate",
                         "data-throughput", "wait-cuda-refs"]
    assert "mutransfer.ops.triton_compile_check" in steps["compile-check"]
    assert order.index("doctor") < order.index("scan") < order.index("train-gpu")
    assert order[-1] == "gpu-width-transfer"  # the long one last, cut at the deadline


def test_only_runs_the_named_steps_in_their_order():
    """A later device call runs what the first left (the width study, a sweep of launch
    configurations) without the build of the reference kernels the others wait for."""
    done = run("--only", "gpu-width-transfer,doctor", "--list")
    assert done.returncode == 0, done.stderr
    assert [line.split(": ", 1)[0] for line in done.stdout.splitlines()] == [
        "doctor", "gpu-width-transfer"]


@pytest.mark.parametrize("args, says", [(["--only", "scan,scna"], "no step 'scna'"),
                                        (["--only"], "needs step names")])
def test_an_unknown_step_is_one_line_and_exit_2(args, says, tmp_path):
    done = run(*args) if args == ["--only"] else run(*args, str(tmp_path / "acceptance"))
    assert done.returncode == 2 and done.stdout == ""
    assert "--only" in done.stderr and done.stderr.strip().count("\n") == 0
    assert says in done.stderr, done.stderr
    assert not (tmp_path / "acceptance").exists()


@pytest.mark.parametrize("args", [["--minutes", "0"], ["--minutes", "nine"], ["--minutes"]])
def test_a_bad_budget_is_one_line_and_exit_2(args, tmp_path):
    done = run(*args, str(tmp_path / "acceptance"))
    assert done.returncode == 2 and done.stdout == ""
    assert "--minutes" in done.stderr and done.stderr.strip().count("\n") == 0
    assert not (tmp_path / "acceptance").exists()


def wheel(folder: Path, name: str) -> Path:
    """A minimal pure-Python wheel of package `name` (what pip installs from the kit)."""
    path = folder / f"{name}-0.1-py3-none-any.whl"
    info = f"{name}-0.1.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}/__init__.py", "KIT = True\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: "
                                    "true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def source_setup(kit: Path, site: Path, then: str) -> subprocess.CompletedProcess:
    script = f". {BENCH / 'device_setup.sh'} {kit} && {then}"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=BENCH.parent, env={"PATH": "/usr/bin:/bin",
                                                 "PYTHON": sys.executable,
                                                 "DEVKIT_SITE": str(site),
                                                 "DEVKIT_BUILD": str(site / "build")})


def test_the_kit_installs_offline_and_goes_on_the_path(tmp_path):
    kit = tmp_path / "kit"
    (kit / "wheels").mkdir(parents=True)
    wheel(kit / "wheels", "kitpkg")
    ray_site = tmp_path / "ray-site" / "fakeray"
    ray_site.mkdir(parents=True)
    (ray_site / "__init__.py").write_text("RAY = True\n")
    subprocess.run(["tar", "-cJf", str(kit / "ray.tar.xz"), "-C", str(ray_site.parent), "."],
                   check=True)
    (kit / "src" / "mamba" / "mambapkg").mkdir(parents=True)
    (kit / "src" / "mamba" / "mambapkg" / "__init__.py").write_text("")
    done = source_setup(kit, tmp_path / "site", 'echo "$PYTHONPATH" && ' f"{sys.executable} -c "
                        "'import kitpkg, fakeray, mambapkg, mutransfer; print(kitpkg.KIT)'")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("device_setup: kit installed")
    assert done.stdout.splitlines()[-1] == "True"
    # no empty entry (it would put the working directory on the path): causal-conv1d's
    # source is not staged in this kit
    path = done.stdout.splitlines()[1].split(":")
    assert "" not in path and not any("causal-conv1d" in p for p in path)


def test_without_a_kit_setup_says_so_and_changes_nothing(tmp_path):
    done = source_setup(tmp_path / "none", tmp_path / "site", 'echo "PYTHONPATH=$PYTHONPATH"')
    assert done.returncode == 1 and "no kit at" in done.stderr
    assert not (tmp_path / "site").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine builds the kernels")
def test_the_reference_build_needs_cuda(tmp_path):
    done = subprocess.run([sys.executable, str(BENCH / "build_cuda_refs.py"), "--out",
                           str(tmp_path / "build")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no CUDA device here" in done.stderr
    assert not (tmp_path / "build").exists()
