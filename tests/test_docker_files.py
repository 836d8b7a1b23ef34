"""The container files (docker/) stay consistent with the project: the Dockerfile lints clean
and copies paths that exist; Compose's head and workers form one cluster around one results
volume; the KubeRay job runs a command the CLI accepts. (No Docker engine is needed: the files
are read, not built.)"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from mutransfer.cli import build_parser

DOCKER = Path(__file__).resolve().parents[1] / "docker"
REPO = DOCKER.parent


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    lines = [ln for ln in path.read_text().splitlines() if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1] if " " in ln.strip() else "")
            for ln in joined.splitlines() if ln.strip()]


@pytest.mark.skipif(shutil.which("hadolint") is None, reason="hadolint is not installed")
def test_the_dockerfile_lints_clean_with_hadolint():
    done = subprocess.run(["hadolint", str(DOCKER / "Dockerfile")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_runs_as_a_non_root_user_and_copies_paths_that_exist():
    steps = instructions(DOCKER / "Dockerfile")
    users = [args for op, args in steps if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    for op, args in steps:
        if op == "COPY":
            sources = [a for a in shlex.split(args) if not a.startswith("--")][:-1]
            for source in sources:
                assert (REPO / source).exists(), f"COPY {source}: no such path in the repo"
    assert any(op == "RUN" and "pip install" in args and args.rstrip().endswith(".")
               for op, args in steps), "the project itself is not installed"


def test_compose_head_and_workers_share_the_image_the_token_and_the_results_volume():
    doc = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    head, worker = doc["services"]["ray-head"], doc["services"]["ray-worker"]
    assert head["image"] == worker["image"]
    assert head["build"]["dockerfile"] == "docker/Dockerfile"
    for service in (head, worker):
        assert "results:/results" in service["volumes"]
        assert service["environment"]["RAY_AUTH_MODE"] == "token"
        assert "RAY_AUTH_TOKEN" in service["environment"]
    assert "results" in doc["volumes"]
    head_args = shlex.split(head["command"])
    port = head_args[head_args.index("--port") + 1]
    dashboard = head_args[head_args.index("--dashboard-port") + 1]
    worker_args = shlex.split(worker["command"])
    assert worker_args[worker_args.index("--address") + 1] == f"ray-head:{port}"
    assert any(p.endswith(f":{dashboard}:{dashboard}") for p in head["ports"])


def test_the_rayjob_runs_a_sweep_command_the_cli_accepts_on_the_shared_volume():
    doc = yaml.safe_load((DOCKER / "rayjob.yaml").read_text())
    assert doc["kind"] == "RayJob" and doc["spec"]["shutdownAfterJobFinishes"] is True
    argv = shlex.split(doc["spec"]["entrypoint"])
    assert argv[0] == "mutransfer"
    args = build_parser().parse_args(argv[1:])
    assert args.command == "sweep" and args.address == "auto"
    assert (REPO / args.file).is_file()
    mounts = {m["mountPath"] for m in
              doc["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
              ["volumeMounts"]}
    assert any(args.storage.startswith(m + "/") for m in mounts)
