"""`mutransfer doctor`: one line per check, exit 0 when ready, 2 with one line per problem."""

from __future__ import annotations

import pytest
import torch

from mutransfer.cli import main
from mutransfer.ops import backends, check, scan


@pytest.fixture(autouse=True)
def quick(monkeypatch, tmp_path):
    monkeypatch.setattr(check, "TYPICAL_CPU", (1, 32, 4, 64))  # the timing: a small shape
    monkeypatch.setenv("MUTRANSFER_DATA_DIR", str(tmp_path / "data-dir"))
    monkeypatch.chdir(tmp_path)


def test_on_cpu_it_checks_the_cpu_scan_and_skips_the_gpu(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "ok    scan chunked on cpu: output" in out and "GPU checks" in out
    assert "torch " + torch.__version__ in out and out.rstrip().endswith("ready")


def test_a_wrong_backend_and_a_missing_dataset_are_one_line_each(tmp_path, capsys,
                                                                  monkeypatch):
    from mutransfer.ops.reference import selective_scan_reference

    def off_by_a_bit(*args, **kw):  # a backend 1% off the reference
        return selective_scan_reference(*args, **kw) * 1.01

    monkeypatch.setitem(scan.BACKENDS, "chunked", "mutransfer.ops.scan:_off_by_a_bit")
    monkeypatch.setattr(scan, "_off_by_a_bit", off_by_a_bit, raising=False)
    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: s\ndata: {source: parquet, path: nowhere/*.parquet}\n")
    assert main(["doctor", str(sweep)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert "scan chunked on cpu: wrong: relative error 1.0e-02" in err[0]
    assert "no .parquet files match nowhere/*.parquet" in err[1]


def test_an_unreachable_cluster_is_a_problem(capsys):
    assert main(["doctor", "--address", "127.0.0.1:1"]) == 2
    assert "Ray cluster at 127.0.0.1:1: --address 127.0.0.1:1: cannot reach" in \
        capsys.readouterr().err


@pytest.mark.parametrize("place", ["/proc/results", "/sys/results"])
def test_a_storage_where_no_file_can_be_made_is_a_problem_even_for_root(capsys, place):
    """Permission bits say 'writable' to root, and for /proc; a file made there says not."""
    assert main(["doctor", "--storage", place]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: storage {place}: cannot write in /"), err


def test_the_chosen_backend_is_remembered_per_device_and_versions():
    cpu = torch.device("cpu")
    assert backends.remembered(cpu) is None
    path = backends.remember(cpu, "chunked")
    assert backends.remembered(cpu) == "chunked" and path.endswith("scan_backends.json")
    assert "torch " + torch.__version__ in backends.device_key(cpu)


def test_an_optional_package_run_from_its_source_tree_is_named_so(tmp_path, capsys,
                                                                    monkeypatch):
    # the GPU machine's kit puts mamba_ssm's source on PYTHONPATH, not installed: doctor must
    # not call it "not installed" (nor, on a failed build, skip its backend as if absent)
    tree = tmp_path / "mamba-src"
    (tree / "mamba_ssm").mkdir(parents=True)
    (tree / "mamba_ssm" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tree))
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert f"mamba-ssm from source ({tree / 'mamba_ssm'})" in out
