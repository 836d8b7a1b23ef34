"""A real multi-node Ray cluster on 127.0.0.1 for tests: a head and worker nodes, each a
`ray start --block` in its own process session, so that one node can be stopped alone (its
session is killed) and everything is stopped at the end, also when a test fails.

`ray stop` is not used: it stops every Ray on the machine, including ones that are not ours.
Nor are Ray's fixed default ports (the dashboard agent's 52365, the client server's 10001):
each node gets free ones, so that the cluster starts beside other Rays on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

RAY = [sys.executable, "-m", "ray.scripts.scripts"]
NODE_MARK = "MUTRANSFER_TEST_NODE"  # in the environment of every process of a node


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marked(mark: str) -> list[int]:
    """Pids of the running processes whose environment holds NODE_MARK=mark."""
    return with_env(NODE_MARK, mark)


def with_env(name: str, value: str) -> list[int]:
    """Pids of the running processes whose environment holds name=value (a dead, unreaped
    process shows none)."""
    entry = f"{name}={value}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and entry in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@dataclass
class Node:
    name: str
    proc: subprocess.Popen
    temp: Path
    mark: str

    def stop(self, timeout_s: float = 60) -> None:
        """SIGKILL every process of the node, as when its machine is lost: its `ray start`
        session and what Ray moved out of it (trial workers in process groups of their
        own); returns once they are all gone."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        while left := marked(self.mark):
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"processes {left} of node {self.name} outlived SIGKILL")
            time.sleep(0.1)  # a killed process leaves /proc once its parent reaps it


@dataclass
class Cluster:
    gcs_port: int
    dashboard_port: int
    nodes: list[Node] = field(default_factory=list)
    # Ray >= 2.5x clusters authenticate with a token: this cluster has its own, and
    # `env` (for every process that talks to it: nodes, CLI, drivers) carries it
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    # more variables for the nodes alone (their workers inherit them), e.g. tests/gate.py's
    node_env: dict[str, str] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token,
                "RAY_USAGE_STATS_ENABLED": "0"}

    @property
    def gcs(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def _start(self, name: str, args: list[str]) -> Node:
        # short: Ray's socket paths have a length limit
        mark = uuid.uuid4().hex[:8]
        temp = Path("/tmp") / f"mtc-{mark}"
        log = open(temp.with_suffix(".log"), "wb")  # noqa: SIM115 - the node keeps it
        ports = [arg for option in ("--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
                                    "--metrics-export-port", "--runtime-env-agent-port")
                 for arg in (option, str(free_port()))]
        proc = subprocess.Popen([*RAY, "start", "--block", "--node-ip-address", "127.0.0.1",
                                 "--temp-dir", str(temp), "--disable-usage-stats", *ports, *args],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **self.env, **self.node_env,
                                     NODE_MARK: mark})
        node = Node(name, proc, temp, mark)
        self.nodes.append(node)
        return node

    def start_head(self, num_cpus: int, timeout_s: float = 240, attempts: int = 3) -> Node:
        """The head, once the cluster reports it. A head whose `ray start` exits first (a port
        free_port() chose was taken before Ray bound it: other Rays run beside, e.g. on the
        suite's other worker) is started again on fresh ports, up to `attempts` times."""
        for attempt in range(1, attempts + 1):
            node = self._start("head", ["--head", "--port", str(self.gcs_port),
                                        "--dashboard-port", str(self.dashboard_port),
                                        "--dashboard-host", "127.0.0.1",
                                        "--ray-client-server-port", str(free_port()),
                                        "--include-dashboard", "true", "--num-cpus",
                                        str(num_cpus), "--resources", json.dumps({"head": 1})])
            if self._head_up(node, timeout_s):
                return node
            log = node.temp.with_suffix(".log").read_text(errors="replace")[-2000:]
            node.stop()
            self.nodes.remove(node)
            shutil.rmtree(node.temp, ignore_errors=True)
            node.temp.with_suffix(".log").unlink(missing_ok=True)
            if attempt == attempts:
                raise RuntimeError(f"ray start for the head exited with "
                                   f"{node.proc.returncode} {attempts} times; last log: {log}")
            self.gcs_port, self.dashboard_port = free_port(), free_port()

    def _head_up(self, node: Node, timeout_s: float) -> bool:
        """True once both ports answer and the state API counts the head; False as soon as
        its `ray start` has exited; TimeoutError when neither happens in time."""
        deadline = time.monotonic() + timeout_s
        while node.proc.poll() is None:
            if self._port_open(self.gcs_port) and self._port_open(self.dashboard_port) and \
                    self.alive_nodes() >= 1:  # the state API answers a little after the ports
                return True
            if time.monotonic() > deadline:
                raise TimeoutError(f"the head did not report itself within {timeout_s:.0f}s")
            time.sleep(1)
        return False

    @staticmethod
    def _port_open(port: int) -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    def add_worker(self, num_cpus: int, name: str = "worker", timeout_s: float = 240) -> Node:
        """A worker node with its own CPUs and a custom resource named `name`; returns when
        the cluster counts it."""
        before = self.alive_nodes()
        node = self._start(name, ["--address", self.gcs, "--num-cpus", str(num_cpus),
                                  "--resources", json.dumps({name: 1})])
        deadline = time.monotonic() + timeout_s
        while self.alive_nodes() <= before:
            if node.proc.poll() is not None:
                raise RuntimeError(f"ray start for {name} exited with {node.proc.returncode}: "
                                   f"{node.temp.with_suffix('.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {name} did not join within {timeout_s:.0f}s")
            time.sleep(1)
        return node

    def _alive(self) -> list[dict]:
        """Alive nodes, from the Ray state API (CLI, so this process does not join Ray)."""
        done = subprocess.run([*RAY, "list", "nodes", "--address", self.gcs, "--format", "json",
                               "--filter", "state=ALIVE", "--detail"], capture_output=True,
                              text=True, timeout=120, env={**os.environ, **self.env})
        try:
            return json.loads(done.stdout)
        except ValueError:
            return []

    def alive_nodes(self) -> int:
        return len(self._alive())

    def node_id(self, name: str) -> str:
        """The Ray node id of the node started as `name` (it alone has the resource `name`)."""
        ids = [n["node_id"] for n in self._alive()
               if name in (n.get("resources_total") or {})]
        if len(ids) != 1:
            raise RuntimeError(f"{len(ids)} alive nodes have the resource {name}")
        return ids[0]

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()
        for node in self.nodes:
            shutil.rmtree(node.temp, ignore_errors=True)
            node.temp.with_suffix(".log").unlink(missing_ok=True)


def start_cluster(node_env: dict[str, str] | None = None) -> Cluster:
    return Cluster(free_port(), free_port(), node_env=dict(node_env or {}))
