"""What a Ray cluster offers, for `mutransfer doctor --address`: nodes, CPUs, GPUs and their
types (Ray's `accelerator_type:...` resources)."""

from __future__ import annotations

from mutransfer.sweep.run.cluster import ray_session


def cluster_summary(address: str) -> list[str]:
    """One line per alive node and a total; UserError when the cluster cannot be reached."""
    with ray_session(address):
        import ray

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        lines = []
        for node in nodes:
            res = node.get("Resources", {})
            kinds = [k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:")]
            gpus = res.get("GPU", 0)
            lines.append(f"node {node.get('NodeManagerAddress', '?')}: {res.get('CPU', 0):g} "
                         f"CPUs, {gpus:g} GPUs{' (' + ', '.join(kinds) + ')' if kinds else ''}"
                         f", {res.get('memory', 0) / 1e9:.0f} GB memory")
        total = ray.cluster_resources()
        lines.append(f"cluster: {len(nodes)} nodes, {total.get('CPU', 0):g} CPUs, "
                     f"{total.get('GPU', 0):g} GPUs")
        return lines
