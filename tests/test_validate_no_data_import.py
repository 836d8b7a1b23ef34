"""`mutransfer validate --no-data --import`: the user's model is imported even where the
sweep's data is the cluster's alone; probed only where its data loads."""

from __future__ import annotations

from pathlib import Path

from mutransfer.cli import main

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "tiny_gpt.yaml"


def with_data(tmp_path: Path, data: str, arch: str = "examples.tiny_gpt:tiny_gpt") -> Path:
    text = EXAMPLE.read_text()
    assert "data: {source: stdlib}" in text and "examples.tiny_gpt:tiny_gpt" in text
    path = tmp_path / "sweep.yaml"
    path.write_text(text.replace("data: {source: stdlib}", data)
                    .replace("examples.tiny_gpt:tiny_gpt", arch))
    return path


def test_data_only_on_the_cluster_does_not_refuse_the_file_under_no_data(tmp_path, capsys):
    """Before: `error: text: /cluster/only: no such file or directory`, exit 2, though
    --no-data skips what is only on the cluster."""
    path = with_data(tmp_path, "data: {source: text, path: /cluster/only/corpus}")
    assert main(["validate", "--no-data", "--import", str(path)]) == 0
    out = capsys.readouterr().out
    assert "(model examples.tiny_gpt:tiny_gpt imported, not probed: its data is not on this " \
           "machine)" in out.splitlines()[0]


def test_a_factory_that_is_not_there_is_still_refused_under_no_data(tmp_path, capsys):
    path = with_data(tmp_path, "data: {source: text, path: /cluster/only/corpus}",
                     arch="examples.tiny_gpt:nope")
    assert main(["validate", "--no-data", "--import", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "examples.tiny_gpt has no callable 'nope'" in err, err


def test_data_that_loads_here_still_probes_the_model_under_no_data(tmp_path, capsys):
    assert main(["validate", "--no-data", "--import", str(EXAMPLE)]) == 0
    assert "imported and probed" in capsys.readouterr().out
