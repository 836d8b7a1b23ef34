"""The `mutransfer` command itself: version, usage, the top-level help, the dashboard option
of submit/status/logs (and its former name), and the committed JSON schema of sweep files."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from tests.sweeps import tiny_sweep

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schema" / "sweep.schema.json"
SCHEMA_LINE = "# yaml-language-server: $schema=../schema/sweep.schema.json"


def run_cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mutransfer.cli", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_version_prints_the_installed_packages_version():
    proc = run_cli("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"mutransfer {version('mutransfer')}"


def test_a_bare_mutransfer_prints_the_usage_and_the_commands_and_exits_2():
    proc = run_cli()
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("usage: mutransfer")
    for command in ("sweep", "analyze", "plot", "submit", "coord-check"):
        assert f"\n    {command}" in proc.stderr, command


def test_the_top_level_help_says_what_the_tool_does_and_its_main_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "dispatcher" not in out and "module" not in out
    assert "learning rate" in out and "Parquet" in out
    for command in ("mutransfer sweep FILE", "mutransfer analyze RESULTS",
                    "mutransfer plot RESULTS"):
        assert command in out.replace("\n", " "), command


@pytest.mark.parametrize("option", ["--dashboard", "--address"])
@pytest.mark.parametrize("command", ["submit", "status", "logs"])
def test_the_dashboard_option_and_its_former_name_reach_the_dashboard(
        tmp_path, capsys, command, option):
    """Both names take the dashboard URL: nothing listens there, so the Jobs API's own
    one-line error comes back (the sweep file is fine and nothing is written)."""
    sweep = tmp_path / "ok.yaml"
    sweep.write_text(json.dumps({**tiny_sweep("ok"), "storage": str(tmp_path / "results")}))
    first = [str(sweep), "--working-dir", str(tmp_path)] if command == "submit" else ["job_1"]
    assert main([command, *first, option, "http://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot reach the Ray dashboard" in err, err
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("value", ["127.0.0.1:6379", "head:6379", "ray://head:10001", "auto"])
@pytest.mark.parametrize("command", ["submit", "status"])
def test_a_cluster_address_given_for_the_dashboard_gets_a_hint(tmp_path, capsys, command, value):
    first = [str(tmp_path / "ok.yaml")] if command == "submit" else ["job_1"]
    assert main([command, *first, "--address", value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and "mutransfer sweep --address" in err
    assert "http://HOST:8265" in err


def test_help_of_submit_names_the_dashboard_and_its_former_name(capsys):
    assert main(["submit", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--dashboard URL, --address URL" in out and "http://HOST:8265" in out


# pydantic before 2.11 writes a dict's enum keys without `propertyNames`: a looser schema than
# the committed one, which pydantic 2.11 on writes (the floor of pyproject.toml is 2.5)
SCHEMA_PYDANTIC = (2, 11)


@pytest.mark.skipif(tuple(int(p) for p in version("pydantic").split(".")[:2]) < SCHEMA_PYDANTIC,
                    reason="the committed schema is what pydantic 2.11 on writes")
def test_the_committed_schema_is_what_mutransfer_schema_prints():
    proc = run_cli("schema")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no warning
    assert SCHEMA.exists(), "schema/sweep.schema.json is missing: mutransfer schema > it"
    assert SCHEMA.read_text() == proc.stdout, (
        "schema/sweep.schema.json is stale: regenerate it with "
        "`mutransfer schema > schema/sweep.schema.json`")


SWEEP_FILES = sorted((REPO / "sweeps").glob("*.yaml"))


@pytest.mark.parametrize("path", SWEEP_FILES, ids=[p.name for p in SWEEP_FILES])
def test_every_sweep_file_points_editors_at_the_schema_and_passes_it(path):
    """What an editor does with the first line: validate the file against the schema."""
    jsonschema = pytest.importorskip("jsonschema")  # a dependency of ray
    assert path.read_text().splitlines()[0] == SCHEMA_LINE
    schema = json.loads(SCHEMA.read_text())
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(
        yaml.safe_load(path.read_text())))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]


def test_the_schema_rejects_what_sweep_rejects():
    """An editor flags a mistyped field and a wrong type, as `mutransfer validate` does."""
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    assert validator.is_valid(tiny_sweep("ok"))
    assert not validator.is_valid({**tiny_sweep("ok"), "stroage": "results/x"})
    assert not validator.is_valid({**tiny_sweep("ok"), "train": {"steps": "many"}})
