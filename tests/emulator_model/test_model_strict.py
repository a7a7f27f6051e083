"""omitted_members: "keep" (an update's omitted optional members keep their values) or "reset" (they go
back to their defaults, the unconfirmed worst case on AWS, for rehearsal)."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_scheduler.emulator.errors import EmulatorError
from hyperpod_scheduler.errors import UsageError
from tests.emulator_model.helpers import LCC, backend, cluster_request, describe, groups, resend, run_until, wait_status

PATCH = {"PatchingStrategy": "WhenIdle", "IdleWaitWindowInSeconds": 7200}
SCHEDULE = {"ScheduleExpression": "cron(0 3 ? * SUN *)"}


def _cluster(mode: str, continuous: bool = False) -> Any:
    b = backend(seed=8, omitted_members=mode)
    request = cluster_request(tier="extension", continuous=continuous, AutoPatchConfig=PATCH)
    request["InstanceGroups"][1]["ScheduledUpdateConfig"] = SCHEDULE
    request["InstanceGroups"][1]["MinInstanceCount"] = 1
    b.dispatch("CreateCluster", request)
    wait_status(b, "InService")
    run_until(b, lambda: groups(b)["gpu"]["Status"] == "InService")  # Continuous: the controller comes first
    return b


def _bare(described: dict[str, Any], counts: dict[str, int]) -> list[dict[str, Any]]:
    """Each group with only the members an update cannot do without (and its type and topology)."""
    keep = ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig")
    return [
        {**{k: g[k] for k in keep if k in g}, "InstanceCount": counts.get(g["InstanceGroupName"], g["TargetCount"])}
        for g in described["InstanceGroups"]
    ]


@pytest.mark.parametrize("continuous", [False, True])
def test_keep_mode_leaves_every_omitted_member_as_it_was(continuous: bool) -> None:
    b = _cluster("keep", continuous)
    before = groups(b)["gpu"]
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": _bare(describe(b), {"gpu": 1})})
    after = groups(b)["gpu"]
    for key in (
        "LifeCycleConfig",
        "AutoPatchConfig",
        "ScheduledUpdateConfig",
        "MinCount",
        "DesiredImageReleaseVersion",
    ):
        assert after[key] == before[key], key


@pytest.mark.parametrize("continuous", [False, True])
def test_reset_mode_resets_every_omitted_optional_member(continuous: bool) -> None:
    b = _cluster("reset", continuous)
    b.release_image("1.3.0")
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": _bare(describe(b), {"gpu": 1})})
    after = groups(b)["gpu"]
    for key in ("LifeCycleConfig", "AutoPatchConfig", "ScheduledUpdateConfig"):
        assert key not in after, key
    assert after.get("MinCount") == (0 if continuous else None)  # back to the mode's default
    assert after["DesiredImageReleaseVersion"] == "1.3.0"  # omitted: the latest available version


def test_reset_mode_keeps_what_was_re_sent() -> None:
    b = _cluster("reset")
    d = describe(b)
    sent = resend(d, {"gpu": 1})
    gpu = next(g for g in sent if g["InstanceGroupName"] == "gpu")
    gpu.update(AutoPatchConfig=PATCH, ScheduledUpdateConfig=SCHEDULE, MinInstanceCount=1)
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": sent})
    after = groups(b)["gpu"]
    assert after["LifeCycleConfig"] == LCC["extension"]
    assert after["AutoPatchConfig"]["IdleWaitWindowInSeconds"] == 7200
    assert after["MinCount"] == 1


@pytest.mark.parametrize(("member", "needle"), [("ThreadsPerCore", "ThreadsPerCore"), ("SlurmConfig", "NodeType")])
def test_reset_mode_refuses_to_reset_what_cannot_change(member: str, needle: str) -> None:
    b = backend(seed=9, omitted_members="reset")
    b.dispatch("CreateCluster", cluster_request(ThreadsPerCore=1))
    d = wait_status(b, "InService")
    sent = resend(d, {})
    next(g for g in sent if g["InstanceGroupName"] == "gpu").pop(member)
    with pytest.raises(EmulatorError) as err:
        b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": sent})
    assert err.value.code == "ValidationException" and needle in err.value.message
    # The same request in keep mode is fine: the omitted member keeps its value.
    k = backend(seed=9)
    k.dispatch("CreateCluster", cluster_request(ThreadsPerCore=1))
    wait_status(k, "InService")
    k.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": sent})


def test_groups_left_out_of_the_request_stay_as_they_are_in_both_modes() -> None:
    b = _cluster("reset")
    before = groups(b)["controller"]
    only_gpu = [g for g in resend(describe(b), {"gpu": 3}) if g["InstanceGroupName"] == "gpu"]
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": only_gpu})
    wait_status(b, "InService")
    assert groups(b)["controller"] == before


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(UsageError, match="omitted_members"):
        backend(omitted_members="forget")
