"""Rehearsals through the wire, as a user would run them: a new AMI overnight, strict mode, plans."""

from __future__ import annotations

import http.client
import json
import signal
from typing import Any

import pytest

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.emulator.clients import T0, make_client
from tests.emulator.driving import groups_by_name, run_until, wait_status
from tests.emulator.emu_requests import create_request, update_groups_from
from tests.emulator.test_serve import _stop, serving


def _admin(port: int, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, f"/_emulator/{path}", json.dumps(body).encode() if body is not None else None)
    resp = conn.getresponse()
    payload = json.loads(resp.read())
    conn.close()
    return resp.status, payload


def test_aws_releases_a_new_ami_overnight_and_a_stop_start_in_reset_mode_takes_it() -> None:
    with running_emulator(virtual_start=T0, seed=3, omitted_members="reset", check_answers=True) as emu:
        sm = make_client(emu.endpoint)
        sm.create_cluster(**create_request("nightly", worker_type="ml.c5.xlarge"))
        d = wait_status(emu, sm, "nightly", "InService")
        before = groups_by_name(d)["gpu"]["CurrentImageReleaseVersion"]
        status, catalogue = _admin(emu.port, "POST", "images", {"version": "9.0.0"})
        assert status == 200 and catalogue["latest"] == "9.0.0"
        assert (
            groups_by_name(sm.describe_cluster(ClusterName="nightly"))["gpu"]["ImageVersionStatus"] == "UpdateAvailable"
        )
        for count in (0, 2):
            d = sm.describe_cluster(ClusterName="nightly")
            sm.update_cluster(ClusterName="nightly", InstanceGroups=update_groups_from(d, {"gpu": count}))
            wait_status(emu, sm, "nightly", "InService")
        gpu = groups_by_name(sm.describe_cluster(ClusterName="nightly"))["gpu"]
        assert (before, gpu["CurrentImageReleaseVersion"]) == ("1.2.1", "9.0.0")
        assert emu.answer_problems == []


def test_admin_endpoints_for_the_catalogue_plans_and_state(emu: Emulator) -> None:
    status, state = _admin(emu.port, "GET", "state")
    assert status == 200 and (state["check_answers"], state["virtual"]) == (True, True)
    assert state["omitted_members"] == emu.backend.omitted_members  # keep, unless the suite runs in reset mode
    status, err = _admin(emu.port, "POST", "images", {"version": "1.0.9"})
    assert status == 400 and "not newer" in err["message"]
    status, err = _admin(emu.port, "POST", "images", {"tag": "x"})
    assert status == 400 and "tag" in err["message"]
    status, plans = _admin(
        emu.port,
        "POST",
        "training-plans",
        {
            "name": "p5",
            "instance_type": "ml.p5.48xlarge",
            "count": 2,
            "start": "+1h",
            "duration_hours": 4,
            "region": "us-west-2",
        },
    )
    assert status == 200 and [p["status"] for p in plans["training_plans"]] == ["Scheduled"]
    sm = make_client(emu.endpoint)
    assert sm.describe_training_plan(TrainingPlanName="p5")["Status"] == "Scheduled"
    status, err = _admin(emu.port, "POST", "training-plans", {"name": "bad", "count": 1})
    assert status == 400 and "instance_type" in err["message"]


def test_operations_and_events_through_boto3(emu: Emulator, sm: Any) -> None:
    request = create_request("ops", worker_type="ml.c5.xlarge", continuous=True)
    sm.create_cluster(**request)
    run_until(emu, lambda: groups_by_name(sm.describe_cluster(ClusterName="ops"))["gpu"]["CurrentCount"] == 2)
    d = sm.describe_cluster(ClusterName="ops")
    sm.update_cluster(ClusterName="ops", InstanceGroups=update_groups_from(d, {"gpu": 3}))
    listed = sm.list_cluster_operations(ClusterName="ops")["ClusterOperationSummaries"]
    newest = sm.describe_cluster_operation(ClusterName="ops", OperationId=listed[0]["OperationId"])
    assert newest["ScalingDetails"][0]["Desired"]["TargetCount"] == 3
    run_until(emu, lambda: groups_by_name(sm.describe_cluster(ClusterName="ops"))["gpu"]["CurrentCount"] == 3)
    mine = sm.list_cluster_events(ClusterName="ops", OperationId=newest["OperationId"])["Events"]
    assert mine and {e["OperationId"] for e in mine} == {newest["OperationId"]}
    sm.create_cluster(**create_request("plain", worker_type="ml.c5.xlarge"))
    with pytest.raises(sm.exceptions.ClientError) as exc:
        sm.list_cluster_events(ClusterName="plain")
    assert exc.value.response["Error"]["Code"] == "ValidationException"


def test_serve_takes_omitted_members_and_shows_it_in_the_admin_state() -> None:
    with serving("--omitted-members", "reset", "--check-answers") as (proc, endpoint):
        port = int(endpoint.rsplit(":", 1)[1])
        status, state = _admin(port, "GET", "state")
        assert status == 200 and (state["omitted_members"], state["check_answers"]) == ("reset", True)
        code, out, err = _stop(proc, signal.SIGTERM)
        assert code == 0 and out == "" and "omitted members: reset" in err
