"""A run given the cluster this process is already connected to, by another name for this
machine: Ray reports a local cluster at the node's own address (e.g. 192.0.2.2:6379), and a
notebook that had reached it as 127.0.0.1:6379 was refused, "this process already runs Ray".
Loopback and this machine's own addresses are one place; another host or port is not."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mutransfer.errors import UserError
from mutransfer.sweep.run import cluster


def ray_at(gcs: str) -> SimpleNamespace:
    """What check_running reads of a Ray this process is connected to."""
    return SimpleNamespace(
        get_runtime_context=lambda: SimpleNamespace(gcs_address=gcs),
        cluster_resources=lambda: {"CPU": 2.0})


def own_address() -> str:
    addresses = sorted(a for a in cluster._own_addresses() if not a.startswith("127."))
    if not addresses:
        pytest.skip("this machine has no address but loopback")
    return addresses[0]


def test_loopback_names_the_local_cluster_ray_reports_at_the_nodes_address():
    cluster.check_running(ray_at(f"{own_address()}:6379"), "127.0.0.1:6379", None, None)
    cluster.check_running(ray_at(f"{own_address()}:6379"), "localhost:6379", None, None)


def test_another_port_or_host_is_still_refused():
    with pytest.raises(UserError, match="already runs Ray"):
        cluster.check_running(ray_at(f"{own_address()}:6379"), "127.0.0.1:6380", None, None)
    with pytest.raises(UserError, match="already runs Ray"):
        cluster.check_running(ray_at("198.51.100.7:6379"), "127.0.0.1:6379", None, None)
