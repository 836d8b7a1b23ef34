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


def test_run_from_a_checkout_it_names_the_packages_version(capsys, monkeypatch):
    """Not installed (the GPU machine runs `python -m mutransfer.cli` from the repository):
    the package's own version, as the results' `versions` records it; it printed '?'."""
    from importlib import metadata

    import mutransfer

    found = metadata.version

    def not_installed(dist):
        if dist == "mutransfer":
            raise metadata.PackageNotFoundError(dist)
        return found(dist)

    monkeypatch.setattr(metadata, "version", not_installed)
    assert main(["doctor"]) == 0
    assert f"mutransfer {mutransfer.__version__}, torch" in capsys.readouterr().out


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


def _store(folder, fmt=2):
    (folder / "trials").mkdir(parents=True)
    (folder / "steps").mkdir()
    (folder / "mutransfer-store.json").write_text(f'{{"format": {fmt}}}\n')
    return folder


@pytest.mark.parametrize("case", ["other files", "newer store", "inside a store"])
def test_a_storage_a_sweep_would_refuse_is_a_problem_not_ready(tmp_path, capsys, case):
    """Writable is not enough: doctor says what `mutransfer sweep` would refuse there (a
    folder of other files, a store of another format, a folder inside a store), in the
    sweep's own words, for --storage and for a sweep file's storage alike."""
    if case == "other files":
        place = tmp_path / "mine"
        place.mkdir()
        (place / "notes.txt").write_text("not results")
        expected = "a folder that is not empty (notes.txt) and not a mutransfer results store"
    elif case == "newer store":
        place = _store(tmp_path / "newer", fmt=3)
        expected = "a results store of format 3, written by a newer mutransfer"
    else:
        place = _store(tmp_path / "outer") / "trials"
        expected = f"inside the results store {tmp_path / 'outer'}"
    assert main(["doctor", "--storage", str(place)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: storage {place}: "), err
    assert expected in err[0]
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"name: s\nstorage: {place}\n"
                     "model: {n_layer: 1, d_state: 4, base_width: 16}\n"
                     "train: {steps: 2, batch_size: 2, seq_len: 16}\n"
                     "data: {source: synthetic}\naxes: {width: [16], lr: [0.01]}\n")
    assert main(["doctor", str(sweep)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err


def test_a_store_or_a_new_folder_is_ready_and_so_is_the_default_results_folder(tmp_path,
                                                                                capsys):
    """An existing store and a folder not made yet are fine; without --storage or a sweep
    file, results/ is where stores go (results/NAME), not a store: its stores are fine."""
    _store(tmp_path / "results" / "quickstart")
    assert main(["doctor", "--storage", str(_store(tmp_path / "done"))]) == 0
    assert main(["doctor", "--storage", str(tmp_path / "new" / "sub")]) == 0
    assert main(["doctor"]) == 0
    assert "ok    storage results: writable" in capsys.readouterr().out


@pytest.mark.parametrize("cache_dir", ["/proc/mutransfer-cache", "a-file/cache"])
def test_a_token_cache_the_sweep_could_not_write_is_a_problem_not_ready(tmp_path, capsys,
                                                                        cache_dir):
    """A text source whose cache is not prepared is tokenized by the sweep into
    data.cache_dir before its first trial: a folder that takes no file (a read-only mount,
    /proc, below a file) refuses that sweep, so doctor says so instead of 'ready'."""
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "data.txt").write_text("some ordinary text, line after line.\n" * 40)
    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: s\nmodel: {n_layer: 1, d_state: 4, base_width: 16}\n"
                     "train: {steps: 2, batch_size: 2, seq_len: 16}\n"
                     f"data: {{source: text, path: data.txt, cache_dir: {cache_dir}}}\n"
                     "axes: {width: [16], lr: [0.01]}\n")
    assert main(["doctor", str(sweep)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"error: {sweep}: token cache {cache_dir}/tokens: ")
    assert err[0].endswith("set data.cache_dir to a writable folder (the sweep tokenizes its "
                           "data there before the first trial)")
    assert main(["sweep", str(sweep), "--storage", str(tmp_path / "store")]) == 2  # as doctor said
    assert "token cache" in capsys.readouterr().err
    # validate and a dry run say so too (before: "ok, 1 cells" and the cost table)
    assert main(["validate", str(sweep)]) == 2
    assert capsys.readouterr().err.strip() == err[0]
    assert main(["sweep", str(sweep), "--dry-run", "--storage", str(tmp_path / "store")]) == 0
    assert f"note: {err[0][len('error: '):]} (a run would stop here" in capsys.readouterr().out
    assert not (tmp_path / "store").exists()
