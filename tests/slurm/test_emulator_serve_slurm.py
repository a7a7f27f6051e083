"""`emulator serve --slurm`: a served emulator whose instances start and stop real local slurmd's."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from hyperpod_scheduler.cluster.view import parse_cluster
from hyperpod_scheduler.emulator.slurm_bridge import LocalSlurmd
from hyperpod_scheduler.engine.update_request import build_update

from .real import ensure_slurm, exclusive, node_states, wait_for
from .test_emulator_bridge import _client, _request

SERVE = [sys.executable, "-m", "hyperpod_scheduler.cli.main", "emulator", "serve"]


@contextmanager
def serving(*args: str) -> Iterator[str]:
    proc = subprocess.Popen([*SERVE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("endpoint: "), (line, proc.stderr and proc.stderr.read())
        yield line.removeprefix("endpoint: ").strip()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _advance(endpoint: str, seconds: int) -> None:
    request = urllib.request.Request(
        f"{endpoint}/_emulator/clock", data=json.dumps({"advance_seconds": seconds}).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def _settled(endpoint: str, client: Any) -> bool:
    _advance(endpoint, 60)
    d = client.describe_cluster(ClusterName="c1")
    return d["ClusterStatus"] == "InService" and all(
        g["CurrentCount"] == g.get("TargetCount", g["CurrentCount"]) for g in d["InstanceGroups"]
    )


@pytest.mark.real_slurm
def test_served_instances_bring_their_slurm_nodes_and_take_them_away() -> None:
    ensure_slurm()
    with exclusive():
        for name in ("node1", "node2"):  # no instance behind them yet
            LocalSlurmd().stop(name)
        wait_for(lambda: all(node_states()[n][0] == "down" for n in ("node1", "node2")), "node1-2 to be down")
        with serving("--virtual-start", "2026-11-30T18:00:00Z", "--slurm", "c1/gpu=node1,node2") as endpoint:
            client = _client(endpoint)
            client.create_cluster(**_request())
            wait_for(lambda: _settled(endpoint, client), "c1 in service")
            wait_for(lambda: all(node_states()[n][0] == "idle" for n in ("node1", "node2")), "node1-2 to join")

            view = parse_cluster(client.describe_cluster(ClusterName="c1"))
            request = build_update(view, {"controller": (1, None), "gpu": (0, None)})
            client.update_cluster(**request)
            wait_for(lambda: _settled(endpoint, client), "the gpu group scaled in")
            states = node_states()
            assert states["node1"][0].startswith("down") and states["node2"][0].startswith("down"), states
            assert states["node3"][0] == "idle"  # not bridged: untouched
