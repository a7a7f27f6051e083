"""A stopped cluster held running: the next tick starts it, so tonight it bills what it bills once up,
never "no instances bill" beside "everything bills"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from hyperpod_scheduler.app.compose import Context, chain_clients
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.web import create_app
from tests.web.conftest import TOKEN
from tests.web.fleet import demo_fleet

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _row(client: TestClient, name: str) -> dict[str, Any]:
    return next(r for r in client.get("/api/fleet").json() if r["cluster"] == name)


def test_a_stopped_cluster_held_running_bills_tonight_what_it_bills_once_started(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with demo_fleet(Path(tmp_path_factory.mktemp("held"))) as fleet:
        client = TestClient(create_app(fleet.dashboard(TOKEN), allowed_hosts=["testserver"]))
        assert _row(client, "g5-dev")["state"] == "stopped"  # Monday night after a Berlin office day
        held = client.post("/api/clusters/g5-dev/hold", json={"state": "running", "by": "bob"}, headers=AUTH)
        assert held.status_code == 200, held.text
        tonight = _row(client, "g5-dev")["tonight"]
        # Before: {"bills": false, "usd_per_hour": 0, "usd": 0.0, "why": "held running ...: everything bills"}
        assert tonight["bills"] is True and tonight["usd_per_hour"] > 0 and tonight["usd"] > 0
        assert "held running by dashboard:bob until released: everything bills" in tonight["why"]
        with open_store(str(fleet.state)) as store:
            ctx = Context(
                load_config(fleet.config), store, chain_clients(lambda ref: fleet.client), fleet.emu.clock.now
            )
            governed = ctx.fleet().governed()
            for _ in range(12):  # the hold starts it; then a settled start
                ctx.tick(governed)
                fleet.emu.advance(600)
        up = _row(client, "g5-dev")
        assert up["state"] == "running"
        assert up["usd_per_hour"] == pytest.approx(tonight["usd_per_hour"])  # what it was said to bill


def test_while_the_fleet_is_paused_tonight_bills_what_it_bills_now(tmp_path_factory: pytest.TempPathFactory) -> None:
    # tonight never looked at the pause switch: a cluster held running while stopped was said to bill
    # "once the next tick starts it", and a running one to stop tonight, though no tick acts while paused.
    from hyperpod_scheduler.app.compose import Pause
    from hyperpod_scheduler.app.status import status_row
    from hyperpod_scheduler.web.tonight import tonight

    with demo_fleet(Path(tmp_path_factory.mktemp("paused"))) as fleet:
        dash = fleet.dashboard(TOKEN)
        ctx = dash.context()
        ctx.paused = Pause("ops", fleet.emu.clock.now())
        for g in ctx.fleet().governed():
            r = status_row(ctx, g)
            said = tonight(ctx, g, r, dash.stop_forecast(ctx, g.ref, g.schedule))
            assert said["why"].startswith("scheduling PAUSED by ops") and said["why"].endswith("it stays as it is")
            assert said["usd_per_hour"] == (None if r.usd_per_hour is None else round(r.usd_per_hour, 2))
        dash.close()
