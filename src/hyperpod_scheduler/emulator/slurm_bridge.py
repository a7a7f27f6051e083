"""Slurm for the emulator: a listener that gives each emulated compute node a real slurmd.

Node names come from per-group pools (the NodeName entries of a local slurm.conf, e.g. the ones
scripts/slurm-ci.sh writes). When an emulated node reaches Running, it takes a free name from its
group's pool and that slurmd is started; when the node is terminated (or starts shutting down), its
slurmd is stopped and the node marked DOWN, as a vanished instance would be. So a whole stop/start
cycle against the emulator drains, loses and regains real Slurm nodes.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from hyperpod_scheduler.slurm.commands import SlurmError, SubprocessSlurm

log = logging.getLogger(__name__)

GONE_REASON = "emulator: instance terminated"
DEFAULT_PIDFILE = "/run/slurm-ci/slurmd-{name}.pid"
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class SlurmdControl(Protocol):
    def start(self, name: str) -> None: ...

    def stop(self, name: str) -> None: ...


class LocalSlurmd:
    """``slurmd -N NAME`` on this host; stopped by the pid file its slurm.conf names."""

    def __init__(self, pidfile: str = DEFAULT_PIDFILE, timeout_s: float = 30.0) -> None:
        self.pidfile = pidfile
        self.timeout_s = timeout_s

    def _pid(self, name: str) -> int | None:
        try:
            with open(self.pidfile.format(name=name)) as handle:
                pid = int(handle.read().strip())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def start(self, name: str) -> None:
        if self._pid(name) is None:
            subprocess.run(["slurmd", "-N", name], check=True, capture_output=True, timeout=self.timeout_s)

    def stop(self, name: str) -> None:
        # The instance is gone and its processes with it: the jobs still on it end too.
        subprocess.run(["scancel", f"--nodelist={name}"], check=False, capture_output=True, timeout=self.timeout_s)
        pid = self._pid(name)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
        # Without this Slurm would notice only after SlurmdTimeout; a terminated instance is gone now.
        # A drained node keeps its drain (and the scheduler's reason, which the start looks for).
        try:
            drained = any(n.name == name and n.draining for n in SubprocessSlurm(timeout_s=self.timeout_s).nodes())
        except SlurmError:
            drained = False
        if not drained:
            subprocess.run(
                ["scontrol", "update", f"nodename={name}", "state=down", f"reason={GONE_REASON}"],
                check=False,
                capture_output=True,
                timeout=self.timeout_s,
            )


class SlurmBridge:
    """``backend.add_listener(SlurmBridge({"gpu": ["node1", "node2"]}, LocalSlurmd()))``."""

    def __init__(self, pools: Mapping[str, Sequence[str]], daemons: SlurmdControl, cluster: str | None = None) -> None:
        self.pools = {group: list(names) for group, names in pools.items()}
        self.daemons = daemons
        self.cluster = cluster  # only this cluster's nodes (by name), or every cluster
        self.assigned: dict[str, str] = {}  # instance id -> slurm node name
        self._lock = threading.Lock()

    def __call__(self, event: Mapping[str, Any]) -> None:
        if event.get("type") != "node" or (self.cluster and event.get("cluster_name") != self.cluster):
            return
        group, instance = event.get("instance_group"), event.get("instance_id")
        if not isinstance(group, str) or not isinstance(instance, str) or group not in self.pools:
            return
        status = event.get("status")
        with self._lock:
            if status == "Running" and instance not in self.assigned:
                name = self._free_name(group)
                if name is None:
                    log.warning("slurm bridge: no free node name left in group %s for %s", group, instance)
                    return
                self.assigned[instance] = name
            elif status in ("Gone", "ShuttingDown") and instance in self.assigned:
                name = self.assigned.pop(instance)
            else:
                return
        if status == "Running":
            self.daemons.start(name)
        else:
            self.daemons.stop(name)

    def _free_name(self, group: str) -> str | None:
        taken = set(self.assigned.values())
        return next((n for n in self.pools[group] if n not in taken), None)


def parse_pools(values: Sequence[str]) -> dict[str, dict[str, list[str]]]:
    """``["c1/gpu=node1,node2", "c1/cpu=node3"]`` → ``{"c1": {"gpu": ["node1", "node2"], "cpu": ["node3"]}}``.

    Raises ValueError naming the bad value: each Slurm node name may back one group only.
    """
    pools: dict[str, dict[str, list[str]]] = {}
    owner: dict[str, str] = {}
    for value in values:
        where, sep, names_part = value.partition("=")
        cluster, slash, group = where.strip().partition("/")
        names = [n.strip() for n in names_part.split(",")]
        if not sep or not slash or not cluster or not group or not all(names):
            raise ValueError(f"{value!r}: expected CLUSTER/GROUP=NODE[,NODE...], e.g. c1/gpu=node1,node2")
        bad = [n for n in names if not _NODE_NAME.fullmatch(n)]
        if bad:
            raise ValueError(f"{value!r}: {bad[0]!r} is not a Slurm node name")
        for name in names:
            if name in owner:
                raise ValueError(f"{value!r}: node {name} already backs {owner[name]}")
            owner[name] = f"{cluster}/{group}"
        pools.setdefault(cluster, {}).setdefault(group, []).extend(names)
    return pools
