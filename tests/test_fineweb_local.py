"""`mutransfer prepare`, `validate` (with the cost table) and `sweep --dry-run` on
sweeps/fineweb_width.yaml as a user runs them, with a small local Parquet corpus in place of
FineWeb (and a tiny BPE trained here in place of gpt2, whose file needs the network)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from tests.test_data_parquet import write_shards

FINEWEB = Path(__file__).parent.parent / "sweeps" / "fineweb_width.yaml"


@pytest.fixture
def local_fineweb(tmp_path, monkeypatch, bpe_json):
    monkeypatch.setenv("MUTRANSFER_DATA_DIR", str(tmp_path / "data-dir"))
    doc = yaml.safe_load(FINEWEB.read_text())
    doc["data"].update(path=str(write_shards(tmp_path / "fineweb") / "*.parquet"),
                       tokenizer=str(bpe_json))
    doc["storage"] = str(tmp_path / "results")
    path = tmp_path / "fineweb_width.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def bpe_json(tmp_path_factory):
    pytest.importorskip("tokenizers")
    from tests.bpe import train_bpe

    return train_bpe(tmp_path_factory.mktemp("bpe") / "tokenizer.json")


def test_prepare_tokenizes_once_and_says_where(local_fineweb, tmp_path, capsys):
    assert main(["prepare", str(local_fineweb)]) == 0
    out = capsys.readouterr().out
    assert "prepared in" in out and "3 files" in out
    [cache] = (tmp_path / "data-dir" / "tokens").glob("[0-9a-f]*")
    assert str(cache) in out
    assert main(["prepare", str(local_fineweb)]) == 0  # the second time: nothing to do
    again = capsys.readouterr().out
    assert "prepared in" not in again and str(cache) in again


def test_validate_checks_the_data_and_prints_the_cost_per_width(local_fineweb, capsys):
    assert main(["validate", str(local_fineweb)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(f"ok, 555 cells -> {local_fineweb.parent / 'results'}")
    table = out[out.index(next(line for line in out if line.startswith("width"))):]
    assert [line.split()[0] for line in table[1:]] == ["256", "512", "1024", "2048", "4096",
                                                       "total"]
    assert "H100 GPU-h" in table[0] and table[-1].split()[1] == "555"


def test_dry_run_shows_the_plan_and_cost_without_the_data(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # data/fineweb/ is not there
    assert main(["sweep", str(FINEWEB), "--dry-run", "--mfu", "0.4"]) == 0
    out = capsys.readouterr().out
    assert "note: " in out and "no .parquet files match data/fineweb/*.parquet" in out
    assert "555 cells" in out and "40% of the H100's peak" in out


def test_a_trial_that_cannot_fit_its_gpu_is_refused_naming_width_and_estimate(
        local_fineweb, capsys):
    doc = yaml.safe_load(local_fineweb.read_text())
    doc["resources"]["gpu_memory_gb"] = 12
    local_fineweb.write_text(yaml.safe_dump(doc))
    assert main(["validate", str(local_fineweb), "--no-data"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "width 4096 needs an estimated" in err and "GB" in err
    doc["resources"] = {"gpus_per_trial": "auto"}
    local_fineweb.write_text(yaml.safe_dump(doc))
    assert main(["validate", str(local_fineweb), "--no-data"]) == 2
    assert "gpus_per_trial auto needs gpu_memory_gb" in capsys.readouterr().err
