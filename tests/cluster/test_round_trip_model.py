"""The DescribeCluster → UpdateCluster round trip, generated from the installed botocore model.

Every request member of a group (and of the cluster) that has a twin in the answer must come back in the
rebuilt request exactly as it was sent; a member botocore adds without a twin fails the first test until
the round trip handles it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.model import ListShape, MapShape, Shape, StructureShape

from hyperpod_scheduler.aws.model import operation_model, service_model, validate_request
from hyperpod_scheduler.cluster.describe import (
    GROUP_ANSWER,
    GROUP_REQUEST,
    RESTRICTED_ANSWER,
    RESTRICTED_REQUEST,
    cluster_settings,
    group_request_from_details,
)
from hyperpod_scheduler.cluster.round_trip import DESIRED, twin, untwinned
from hyperpod_scheduler.config.model import Policy
from hyperpod_scheduler.engine.update_request import build_update
from tests.engine.builders import cluster, group

WHEN = datetime(2026, 12, 24, 3, 0, tzinfo=UTC)


def _shape(name: str) -> StructureShape:
    found = service_model().shape_for(name)
    assert isinstance(found, StructureShape)
    return found


def test_every_request_member_has_a_twin_in_the_answer() -> None:
    # The only members no answer reports are the counts, which an update sets itself. A new request
    # member without a twin would be silently dropped by every stop: this fails until it is handled.
    assert untwinned(_shape(GROUP_REQUEST), _shape(GROUP_ANSWER)) == ["InstanceCount", "MinInstanceCount"]
    assert untwinned(_shape(RESTRICTED_REQUEST), _shape(RESTRICTED_ANSWER)) == ["InstanceCount"]
    update = operation_model("UpdateCluster").input_shape
    described = operation_model("DescribeCluster").output_shape
    assert update is not None and described is not None
    assert untwinned(update, described) == [
        "InstanceGroups[].InstanceCount",
        "InstanceGroups[].MinInstanceCount",
        "RestrictedInstanceGroups[].InstanceCount",
        "InstanceGroupsToDelete",
    ]


def _request_value(shape: Shape, name: str, depth: int = 0) -> Any:
    """A value for ``shape`` with every member set (deterministic, distinct per member name)."""
    if isinstance(shape, StructureShape):
        if depth > 6:
            return {}
        return {m: _request_value(s, m, depth + 1) for m, s in shape.members.items()}
    if isinstance(shape, ListShape):
        return [_request_value(shape.member, name, depth + 1)]
    if isinstance(shape, MapShape):
        return {"key": _request_value(shape.value, name, depth + 1)}
    if shape.type_name == "string":
        enum = getattr(shape, "enum", None)
        return enum[-1] if enum else f"{name}-value"
    if shape.type_name in ("integer", "long"):
        return int(shape.metadata.get("min", 1)) + 1
    if shape.type_name in ("float", "double"):
        return 1.5
    if shape.type_name == "boolean":
        return True
    if shape.type_name == "timestamp":
        return WHEN
    return f"{name}-blob"


def _as_answer(request_shape: Shape, answer_shape: Shape, value: Any) -> Any:
    """How an answer reports ``value``: under the twin's name, with a different *current* value beside
    every desired one, so a round trip that re-sent the current value would be caught."""
    if isinstance(request_shape, StructureShape) and isinstance(answer_shape, StructureShape):
        out: dict[str, Any] = {}
        for name, member in request_shape.members.items():
            source = twin(name, answer_shape)
            if source is None or name not in value:
                continue
            out[source] = _as_answer(member, answer_shape.members[source], value[name])
            current = "Current" + name
            if source == DESIRED + name and current in answer_shape.members:
                out[current] = "stale-current" if isinstance(value[name], str) else out[source]
        return out
    if isinstance(request_shape, ListShape) and isinstance(answer_shape, ListShape):
        return [_as_answer(request_shape.member, answer_shape.member, v) for v in value]
    if isinstance(request_shape, MapShape) and isinstance(answer_shape, MapShape):
        return {k: _as_answer(request_shape.value, answer_shape.value, v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("member", [m for m in _shape(GROUP_REQUEST).members if m not in ("InstanceCount",)])
def test_each_group_member_comes_back_in_the_rebuilt_request(member: str) -> None:
    request_shape, answer_shape = _shape(GROUP_REQUEST), _shape(GROUP_ANSWER)
    sent = {"InstanceGroupName": "workers", member: _request_value(request_shape.members[member], member)}
    details = _as_answer(request_shape, answer_shape, sent)
    details.update(CurrentCount=3, TargetCount=4, MinCount=2, Status="InService")
    rebuilt = group_request_from_details(details)
    if member == "MinInstanceCount":
        assert rebuilt["MinInstanceCount"] == 2  # from MinCount
    else:
        assert rebuilt[member] == sent[member]
    assert rebuilt["InstanceCount"] == 4


def test_a_group_with_every_member_set_round_trips_whole() -> None:
    request_shape, answer_shape = _shape(GROUP_REQUEST), _shape(GROUP_ANSWER)
    sent = _request_value(request_shape, "group")
    sent["InstanceGroupName"] = "workers"
    details = _as_answer(request_shape, answer_shape, sent)
    details.update(TargetCount=sent["InstanceCount"], MinCount=sent["MinInstanceCount"])
    assert group_request_from_details(details) == sent


def test_restricted_groups_round_trip_whole() -> None:
    request_shape, answer_shape = _shape(RESTRICTED_REQUEST), _shape(RESTRICTED_ANSWER)
    sent = _request_value(request_shape, "restricted")
    details = _as_answer(request_shape, answer_shape, sent)
    details["TargetCount"] = sent["InstanceCount"]
    assert group_request_from_details(details, restricted=True) == sent


def test_cluster_settings_round_trip() -> None:
    update = operation_model("UpdateCluster").input_shape
    described = operation_model("DescribeCluster").output_shape
    assert isinstance(update, StructureShape) and isinstance(described, StructureShape)
    settings = {
        m: _request_value(s, m)
        for m, s in update.members.items()
        if m not in ("ClusterName", "InstanceGroups", "RestrictedInstanceGroups", "InstanceGroupsToDelete")
    }
    # The only enum value is Continuous, which changes what may be sent (below); first without it.
    settings.pop("NodeProvisioningMode")
    assert cluster_settings(_as_answer(update, described, settings)) == settings
    continuous = {**settings, "NodeProvisioningMode": "Continuous"}
    expected = {
        **continuous,
        "Orchestrator": {**settings["Orchestrator"], "Slurm": dict(settings["Orchestrator"]["Slurm"])},
    }
    expected["Orchestrator"]["Slurm"].pop("SlurmConfigStrategy")
    assert cluster_settings(_as_answer(update, described, continuous)) == expected


# ---- the shapes the issue reported, by hand --------------------------------------------------------


def _patched_group() -> dict[str, Any]:
    g = group("workers", 4, itype="ml.g5.12xlarge")
    g.update(
        AutoPatchConfig={
            "PatchingStrategy": "DrainFirst",
            "IdleWaitWindowInSeconds": 7200,
            "DrainPolicy": {"DrainTimeoutInSeconds": 900, "OnDrainTimeout": "Skip"},
            "CurrentPatchSchedule": {"NextPatchDate": datetime(2026, 12, 10, tzinfo=UTC)},
            "DesiredPatchSchedule": {"NextPatchDate": datetime(2026, 12, 17, tzinfo=UTC)},
        },
        CurrentImageId="ami-0aaaaaaaaaaaaaaa1",
        DesiredImageId="ami-0bbbbbbbbbbbbbbb2",
        CurrentImageReleaseVersion="1.4.0",
        DesiredImageReleaseVersion="1.4.1",
        ImageVersionStatus="CREATED",
    )
    return g


def test_auto_patch_config_is_re_sent_in_full() -> None:
    view = cluster(group("controller", 1, node_type="Controller"), _patched_group())
    request = build_update(view, {"workers": (0, None)})
    workers = next(g for g in request["InstanceGroups"] if g["InstanceGroupName"] == "workers")
    assert workers["AutoPatchConfig"] == {
        "PatchingStrategy": "DrainFirst",
        "IdleWaitWindowInSeconds": 7200,
        "DrainPolicy": {"DrainTimeoutInSeconds": 900, "OnDrainTimeout": "Skip"},
        "PatchSchedule": {"NextPatchDate": datetime(2026, 12, 17, tzinfo=UTC)},
    }
    assert validate_request("UpdateCluster", request) == []


def test_a_stop_pins_the_ami_the_group_is_configured_with() -> None:
    view = cluster(group("controller", 1, node_type="Controller"), _patched_group())
    workers = next(
        g for g in build_update(view, {"workers": (0, None)})["InstanceGroups"] if g["InstanceGroupName"] == "workers"
    )
    assert (workers["ImageId"], workers["ImageReleaseVersion"]) == ("ami-0bbbbbbbbbbbbbbb2", "1.4.1")


def test_follow_latest_leaves_the_image_to_aws() -> None:
    view = cluster(group("controller", 1, node_type="Controller"), _patched_group())
    request = build_update(view, {"workers": (0, None)}, Policy(ami="follow-latest"))
    workers = next(g for g in request["InstanceGroups"] if g["InstanceGroupName"] == "workers")
    assert "ImageId" not in workers and "ImageReleaseVersion" not in workers
    assert workers["AutoPatchConfig"]["PatchingStrategy"] == "DrainFirst"  # only the image is left out


def test_continuous_slurm_never_echoes_a_config_strategy() -> None:
    answer = {"NodeProvisioningMode": "Continuous", "Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Merge"}}}
    assert cluster_settings(answer) == {"NodeProvisioningMode": "Continuous", "Orchestrator": {"Slurm": {}}}
    default = {"Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Managed"}}, "NodeRecovery": "None"}
    assert cluster_settings(default) == default


def test_autoscaling_status_is_not_sent_back() -> None:
    answer = {"AutoScaling": {"Mode": "Disable", "AutoScalerType": "Karpenter", "Status": "InService"}}
    assert cluster_settings(answer) == {"AutoScaling": {"Mode": "Disable", "AutoScalerType": "Karpenter"}}
