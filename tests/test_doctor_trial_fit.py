"""`mutransfer doctor FILE`: each trial is held to where the sweep would run it, by the checks
the sweep makes itself: this machine (a local Ray) without --address, the cluster's largest node
with it. Before, doctor said `ready` for a sweep whose trials asked for more CPUs than any node
had, or more memory than this machine or the cluster's largest node holds; the sweep then
refused it (or its trials waited forever).
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch
import yaml

from mutransfer.cli import main
from mutransfer.ops import check
from tests.sweeps import tiny_sweep

DEEP = {"n_layer": 10**8, "d_state": 4, "base_width": 16}  # terabytes of weights


@pytest.fixture(autouse=True)
def quick(monkeypatch, tmp_path):
    monkeypatch.setattr(check, "TYPICAL_CPU", (1, 32, 4, 64))  # the timing: a small shape
    monkeypatch.setenv("MUTRANSFER_DATA_DIR", str(tmp_path / "data-dir"))
    monkeypatch.chdir(tmp_path)


def _sweep(tmp_path, name: str, **top) -> str:
    doc = tiny_sweep(name, {"width": [16], "lr": [0.01]}, data={"source": "synthetic"},
                     storage=str(tmp_path / "results"), **top)
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    return f"{name}.yaml"


def test_this_machines_cpu_count_is_said(capsys):
    assert main(["doctor"]) == 0
    assert f"ok    this machine: {os.cpu_count()} CPUs" in capsys.readouterr().out


def test_without_a_cluster_a_trial_wanting_more_cpus_than_this_machine_is_not_ready(
        tmp_path, capsys):
    more = os.cpu_count() + 1
    path = _sweep(tmp_path, "cpus", resources={"cpus_per_trial": more})
    assert main(["doctor", path]) == 2
    out, err = capsys.readouterr()
    assert "ready" not in out and "Traceback" not in err
    assert err.strip() == (f"error: {path}: resources.cpus_per_trial: a trial needs {more} CPUs "
                           f"but the largest of the cluster's 1 node(s) has {os.cpu_count()}; "
                           f"run it on a cluster (doctor --address HEAD:6379 checks one)")


def test_without_a_cluster_a_trial_this_machines_memory_cannot_hold_is_not_ready(
        tmp_path, capsys):
    path = _sweep(tmp_path, "deep", model=DEEP)
    assert main(["doctor", path]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"error: {path}: width 16, n_layer 100000000: the model does not "
                             f"fit in memory")
    assert err[0].endswith("GB, this machine has " + err[0].rsplit(" has ", 1)[1])
    # as the sweep says, before it starts
    assert main(["sweep", path, "--no-analysis"]) == 2
    assert capsys.readouterr().err.strip() == err[0]
    assert not (tmp_path / "results").exists()


def test_a_sweep_that_fits_this_machine_is_still_ready(tmp_path, capsys):
    path = _sweep(tmp_path, "fits", resources={"cpus_per_trial": 1})
    assert main(["doctor", path]) == 0, capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.skipif(importlib.util.find_spec("aiohttp") is None,
                    reason="needs ray[default] (the cluster's dashboard)")
def test_with_address_each_trial_is_held_to_the_clusters_largest_node(tmp_path, capsys,
                                                                      monkeypatch):
    """A one-CPU cluster: a trial asking for 2 CPUs, and one no node's memory holds, are one
    line each in the sweep's own words; a one-CPU trial is ready."""
    from tests.raycluster import start_cluster

    cluster = start_cluster()
    try:
        cluster.start_head(num_cpus=1)
        for key, value in cluster.env.items():
            monkeypatch.setenv(key, value)
        cpus = _sweep(tmp_path, "cpus", resources={"cpus_per_trial": 2})
        deep = _sweep(tmp_path, "deep", model=DEEP, resources={"cpus_per_trial": 1})
        fits = _sweep(tmp_path, "fits", resources={"cpus_per_trial": 1})
        assert main(["doctor", "--address", cluster.gcs, cpus]) == 2
        out, err = capsys.readouterr()
        assert "ok    Ray cluster: 1 nodes, 1 CPUs, 0 GPUs" in out
        assert err.strip() == (f"error: {cpus}: resources.cpus_per_trial: a trial needs 2 CPUs "
                               f"but the largest of the cluster's 1 node(s) has 1")
        assert main(["doctor", "--address", cluster.gcs, deep]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "width 16, n_layer 100000000: the model does not fit in " \
            "memory" in err[0] and "the largest of the cluster's 1 node(s) has" in err[0], err
        assert main(["doctor", "--address", cluster.gcs, fits]) == 0, capsys.readouterr().err
    finally:
        cluster.stop()


def test_a_choice_that_cannot_be_remembered_is_one_line_and_the_checks_still_pass(
        tmp_path, capsys, monkeypatch):
    """On a GPU machine whose user folder takes no file (a read-only home): before, doctor
    ended in a NotADirectoryError/PermissionError traceback after checking every backend."""
    from mutransfer.ops.check import BackendCheck

    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("MUTRANSFER_DATA_DIR", str(tmp_path / "a-file" / "mutransfer"))
    # a CUDA device as doctor sees one; each backend's check is what it reports there
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Some GPU")
    timings = {"triton": 1.0, "chunked": 3.0}
    real = check.check_backend

    def on_the_gpu(name, device, dtype=torch.float32, *args, **kw):
        if device.type == "cpu":
            return real(name, device, dtype, *args, **kw)
        if name not in timings:
            return BackendCheck(name, False, error="not installed")
        return BackendCheck(name, True, out_err=1e-7, grad_err=1e-6, ms=timings[name])

    monkeypatch.setattr(check, "check_backend", on_the_gpu)
    monkeypatch.setattr("mutransfer.commands.doctor._version", lambda dist: None)
    assert main(["doctor", "--storage", str(tmp_path / "results")]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and out.rstrip().endswith("ready"), err
    said = [line for line in out.splitlines() if line.startswith("skip  auto on Some GPU")]
    assert len(said) == 1, out
    assert "triton is the fastest that passed, but it cannot be remembered" in said[0]
    assert str(tmp_path / "a-file") in said[0]
