"""Pausing a real-time emulator holds every cluster where it is, as seen through boto3."""

from __future__ import annotations

import time

from hyperpod_scheduler.emulator import running_emulator
from tests.emulator.clients import make_client
from tests.emulator.emu_requests import create_request


def _status(sm: object, name: str) -> str:
    return str(sm.describe_cluster(ClusterName=name)["ClusterStatus"])  # type: ignore[attr-defined]


def test_a_paused_emulator_keeps_a_cluster_creating_until_resumed() -> None:
    # At this speed creation takes well under a second of real time; paused, it must not finish.
    with running_emulator(speed=5000, seed=3, check_answers=True) as emu:
        sm = make_client(emu.endpoint)
        with emu.paused():
            sm.create_cluster(**create_request("held"))
            time.sleep(0.5)
            assert _status(sm, "held") == "Creating"
        for _ in range(500):
            if _status(sm, "held") == "InService":
                break
            time.sleep(0.02)
        assert _status(sm, "held") == "InService"
