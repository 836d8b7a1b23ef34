"""`mutransfer prepare A.yaml B.yaml`: every file is read and checked before any corpus is
tokenized, so a bad file anywhere in the list is one line and exit 2 with nothing written."""

from __future__ import annotations

import yaml

from mutransfer.cli import main


def test_a_bad_later_file_is_refused_before_the_first_files_data_is_tokenized(tmp_path,
                                                                               monkeypatch,
                                                                               capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.txt").write_text("some ordinary text, line after line.\n" * 40)
    good = {"name": "good", "model": {"arch": "mamba", "n_layer": 1, "d_state": 4,
                                      "base_width": 16},
            "train": {"steps": 4, "batch_size": 2, "seq_len": 16},
            "data": {"source": "text", "path": "data.txt", "cache_dir": "cache"},
            "axes": {"width": [16], "lr": [0.01]}}
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(good))
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump({**good, "name": "typo",
                                                        "axes": {"width": [16], "lr": [-1]}}))
    assert main(["prepare", "good.yaml", "typo.yaml"]) == 2
    out, err = capsys.readouterr()
    assert err.strip() == "error: typo.yaml: axes.lr[0]: -1 is not a positive learning rate"
    assert "preparing" not in out
    assert not (tmp_path / "cache").exists()  # the good file's corpus was not tokenized
    assert main(["prepare", "good.yaml"]) == 0  # on its own it prepares
    assert (tmp_path / "cache" / "tokens").is_dir()
