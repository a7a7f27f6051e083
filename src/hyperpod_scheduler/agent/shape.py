"""Which instance group holds the Slurm controller, as the agent on the controller sees it.

HyperPod writes ``/opt/ml/config/resource_config.json`` on every node of a cluster: the cluster's ARN
(``ClusterConfig.ClusterArn``) and each instance group by ``Name`` with its ``Instances`` (each with a
``CustomerIpAddress``). On HyperPod a Slurm node is named after that address (``ip-10-1-2-3``), and so
is the host. The agent runs on the controller, so the group that holds its own host is the controller
group; a group with a host Slurm lists as a node is compute. Any other group (login nodes are not Slurm
nodes; a group at zero has no hosts) is not named: its role stays unknown, and the scheduler keeps it
with any compute that stays.

The lifecycle scripts of aws-samples decide a node's role the same way (its address against the
controller and login groups' hosts in this file). ``parse_shape`` is pure; ``local_shape`` reads the
file and the host name, and gives None when either cannot be had (a verdict never fails for it).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from hyperpod_scheduler.agent.messages import SlurmShape
from hyperpod_scheduler.inputs import bounded

RESOURCE_CONFIG = Path("/opt/ml/config/resource_config.json")


def host_of(address: str) -> str:
    """The host (and Slurm node) name HyperPod gives the node at ``address``: ``ip-10-1-2-3``."""
    return "ip-" + address.replace(".", "-")


def _hosts(group: Mapping[str, Any]) -> set[str]:
    out: set[str] = set()
    instances = group.get("Instances")
    for instance in instances if isinstance(instances, list) else []:
        address = instance.get("CustomerIpAddress") if isinstance(instance, Mapping) else None
        if isinstance(address, str) and address:
            out.update({host_of(address), address})
    return out


def parse_shape(doc: Any, host: str, slurm_nodes: Iterable[str], now: datetime) -> SlurmShape | None:
    """The shape ``doc`` (resource_config.json) gives, seen from ``host``; None when ``host`` is in no
    group (the agent is not on one of this cluster's nodes, so it can name no controller)."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("InstanceGroups"), list):
        return None
    me = host.split(".", 1)[0]
    nodes = set(slurm_nodes)
    groups = {
        str(g["Name"]): _hosts(g)
        for g in doc["InstanceGroups"]
        if isinstance(g, Mapping) and isinstance(g.get("Name"), str) and g["Name"]
    }
    controller = next((name for name, hosts in groups.items() if me in hosts), None)
    if controller is None:
        return None
    compute = sorted(name for name, hosts in groups.items() if name != controller and hosts & nodes)
    others = sorted(name for name in groups if name != controller and name not in compute)
    config = doc.get("ClusterConfig")
    arn = config.get("ClusterArn") if isinstance(config, Mapping) else None
    return SlurmShape(
        controller=controller,
        compute=compute,
        others=others,
        cluster_arn=arn if isinstance(arn, str) and arn else None,
        seen_at=now,
    )


def local_shape(
    slurm_nodes: Iterable[str], now: datetime, path: Path = RESOURCE_CONFIG, host: str | None = None
) -> SlurmShape | None:
    """The shape on this node, or None when the file or the host name cannot be read."""
    try:
        doc = bounded.read_json(path)
        return parse_shape(doc, host or socket.gethostname(), slurm_nodes, now)
    except (OSError, bounded.Unreadable, bounded.BadDocument):
        return None
