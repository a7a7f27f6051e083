"""After the dashboard sends a cluster an UpdateCluster, no face shows the DescribeCluster answer from
before it as the cluster now (app.looks ``changing``): a demo's clock stands still between the look and
the action, so this cannot rest on timestamps."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hyperpod_scheduler.app.looks import Look, Looks
from hyperpod_scheduler.engine.ref import ClusterRef
from hyperpod_scheduler.web import create_app
from tests.web.conftest import TOKEN
from tests.web.fleet import demo_fleet

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_the_cluster_page_after_start_now_shows_what_aws_says_now(tmp_path_factory: pytest.TempPathFactory) -> None:
    with demo_fleet(Path(tmp_path_factory.mktemp("acted"))) as fleet:
        dash = fleet.dashboard(TOKEN)
        client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
        g5 = client.get("/api/clusters/g5-dev").json()  # stopped on Monday night: the page looked at it
        assert g5["groups"] and all(g["target"] == 0 for g in g5["groups"])
        sent = client.post("/api/clusters/g5-dev/start", json={"by": "eve"}, headers=AUTH)
        assert sent.status_code == 200, sent.text
        now = fleet.client.describe_cluster(ClusterName="g5-dev")["InstanceGroups"]
        wanted = {g["InstanceGroupName"]: g.get("TargetCount", g["CurrentCount"]) for g in now}
        assert any(wanted.values())
        # Before: every group still at target 0 and InService, "read from AWS", for as long as the clock stood.
        after = client.get("/api/clusters/g5-dev").json()
        assert {g["group"]: g["target"] for g in after["groups"]} == wanted


def test_a_look_whose_call_began_before_an_update_is_not_kept() -> None:
    # A refresh's DescribeCluster answered with the cluster from before, kept after the update went out
    # (by the refresh, or by the engine's own hook): dropped, so the cluster is read again.
    ref = ClusterRef(key="111111111111/us-east-1/c", name="c", region="us-east-1", account="111111111111")
    at = datetime(2026, 12, 1, 12, tzinfo=UTC)
    looks = Looks()
    looks.keep(ref, RuntimeError("an earlier look"), at)
    began = looks.sends(ref)
    looks.changing(ref)
    assert looks.look(ref) is None
    looks.record(ref, RuntimeError("the hook's copy of the answer from before"), at)  # type: ignore[arg-type]
    looks._keep(ref, Look(at, RuntimeError("the answer from before")), moves=False, sends=began)
    assert looks.look(ref) is None
    looks._keep(ref, Look(at, RuntimeError("a look begun after it")), moves=False, sends=looks.sends(ref))
    look = looks.look(ref)
    assert look is not None and "begun after" in str(look.answer)
