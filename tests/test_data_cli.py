"""Bad data in `mutransfer train CONFIG.yaml`: one line on stderr, exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml


def bad_data(tmp_path, case: str) -> dict:
    if case == "missing path":
        return {"source": "parquet", "path": str(tmp_path / "nowhere" / "*.parquet")}
    if case == "empty parquet":
        (tmp_path / "empty.parquet").write_bytes(b"")
        return {"source": "parquet", "path": str(tmp_path / "empty.parquet")}
    if case == "no text column":
        pq.write_table(pa.table({"body": ["x"] * 50}), tmp_path / "body.parquet")
        return {"source": "parquet", "path": str(tmp_path / "body.parquet")}
    if case == "empty text":
        (tmp_path / "empty.txt").write_text("")
        return {"source": "text", "path": str(tmp_path / "empty.txt")}
    return {"source": "wikipedia"}


@pytest.mark.slow
@pytest.mark.parametrize("case,words", [
    ("missing path", "no .parquet files match"),
    ("empty parquet", "empty file"),
    ("no text column", "no 'text' column"),
    ("empty text", "the files are empty (TMP/empty.txt)"),  # the file, not its folder
    ("unknown source", "source"),
])
def test_bad_data_is_one_line_and_exit_code_2(tmp_path, case, words):
    config = tmp_path / "trial.yaml"
    config.write_text(yaml.safe_dump({"data": bad_data(tmp_path, case)}))
    # a real process: its exit code and everything it prints
    run = subprocess.run([sys.executable, "-m", "mutransfer.cli", "train", str(config)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    err = run.stderr.strip()
    words = words.replace("TMP", str(tmp_path))
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and words in err
