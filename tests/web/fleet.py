"""The demo fleet in the emulator, a config file and a SQLite store with a day and a half of ticks:
what the dashboard tests look at."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
import yaml

from hyperpod_scheduler.app.compose import Context, chain_clients
from hyperpod_scheduler.app.looks import Looks
from hyperpod_scheduler.aws.clients import AwsClients
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.demo.run import create_fleet, demo_cost, stock_storage
from hyperpod_scheduler.demo.scenario import CAPACITY, SCHEDULES, VIRTUAL_START, examples_dir
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.web import Dashboard, create_app
from tests.sessions import shared_session

REGION = "us-east-1"


@dataclass
class DemoFleet:
    emu: Emulator
    client: Any
    config: Path
    state: Path
    names: list[str]
    group_counts: dict[str, int]  # instance groups per cluster, from the example specs

    def dashboard(self, token: str | None) -> Dashboard:
        # SageMaker, S3 and FSx all from the emulator, as in the demo.
        return Dashboard(
            config_file=str(self.config),
            state=str(self.state),
            token=token,
            now=self.emu.clock.now,
            client_for=lambda ref: self.client,
            aws=AwsClients(self.emu.endpoint),
            # The fleet read inside the first request, as before the store-first answer: the tests of what
            # a page shows see it read (tests/web/test_fleet_cold.py: the first request answered from the store).
            looks=Looks(cold_first=False),
        )


def _wait_in_service(emu: Emulator, client: Any, names: list[str]) -> None:
    for _ in range(360):
        answers = [client.describe_cluster(ClusterName=n) for n in names]
        if all(
            a["ClusterStatus"] == "InService"
            and all(g["CurrentCount"] == g.get("TargetCount", g["CurrentCount"]) for g in a["InstanceGroups"])
            for a in answers
        ):
            return
        emu.advance(60)
    raise AssertionError("demo clusters did not come up in the emulator")


@contextmanager
def demo_fleet(folder: Path, hours: float = 36.0, step_minutes: float = 30.0) -> Iterator[DemoFleet]:
    """Sunday noon: create the three example clusters, then tick the scheduler for ``hours``."""
    with running_emulator(virtual_start=VIRTUAL_START, seed=7, capacity=CAPACITY, in_process=True) as emu:
        session = shared_session(REGION)
        client = session.client("sagemaker", endpoint_url=emu.endpoint)
        stock_storage(emu)
        requests = create_fleet(emu, client, examples_dir())
        names = [r["ClusterName"] for _, r in requests]
        _wait_in_service(emu, client, names)
        config = folder / "hyperpod-scheduler.yaml"
        state = folder / "state.sqlite"
        document = {
            "state": str(state),
            "defaults": {"settle_timeout_minutes": 120, "concurrency": 1},
            "schedules": SCHEDULES,
            "targets": [
                {
                    "region": REGION,
                    "clusters": [{"name": r["ClusterName"], "schedule": c.schedule} for c, r in requests],
                }
            ],
            "cost": demo_cost().model_dump(mode="json"),
        }
        config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        with open_store(str(state)) as store:
            ctx = Context(load_config(config), store, chain_clients(lambda ref: client), emu.clock.now, notify=False)
            governed = ctx.fleet().governed()
            for _ in range(int(hours * 60 / step_minutes)):
                ctx.tick(governed)
                emu.advance(step_minutes * 60)
        counts = {r["ClusterName"]: len(r["InstanceGroups"]) for _, r in requests}
        yield DemoFleet(emu, client, config, state, names, counts)


@contextmanager
def serving(dash: Dashboard) -> Iterator[str]:
    """The dashboard on a free loopback port in a thread; yields its base URL."""
    server = uvicorn.Server(uvicorn.Config(create_app(dash), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.01)
    else:
        raise AssertionError("the dashboard server did not start")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        dash.close()
