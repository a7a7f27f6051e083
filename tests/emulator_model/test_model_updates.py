"""UpdateCluster: scale to zero and back, omitted groups, deletes, conflicts, semantic validation."""

from __future__ import annotations

import pytest

from hyperpod_scheduler.emulator.backend import HyperPodBackend
from hyperpod_scheduler.emulator.errors import EmulatorError
from tests.emulator_model.helpers import (
    backend,
    clock,
    cluster_request,
    describe,
    group,
    groups,
    nodes,
    resend,
    run_until,
    statuses_seen,
    wait_status,
)


def _in_service(tier: str = "extension", continuous: bool = False) -> HyperPodBackend:
    b = backend(seed=11)
    b.dispatch("CreateCluster", cluster_request(tier=tier, continuous=continuous))
    wait_status(b, "InService")
    if continuous:
        run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == groups(b)["gpu"]["TargetCount"])
    return b


@pytest.mark.parametrize("continuous", [False, True])
def test_scale_a_group_to_zero_and_back_keeps_its_lifecycle_config(continuous: bool) -> None:
    b = _in_service(continuous=continuous)
    before = describe(b)
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(before, {"gpu": 0})})
    if not continuous:
        assert describe(b)["ClusterStatus"] == "Updating"
    shutting = [n for n in nodes(b) if n["InstanceGroupName"] == "gpu"]
    run_until(b, lambda: not [n for n in nodes(b) if n["InstanceGroupName"] == "gpu"])
    zero = wait_status(b, "InService")
    gpu = {g["InstanceGroupName"]: g for g in zero["InstanceGroups"]}["gpu"]
    assert (gpu["CurrentCount"], gpu["TargetCount"]) == (0, 0)
    assert gpu["LifeCycleConfig"] == before["InstanceGroups"][1]["LifeCycleConfig"]
    assert shutting  # the workers were visible on their way out
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(zero, {"gpu": 2})})
    run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == 2)
    after = wait_status(b, "InService")
    assert after["InstanceGroups"] == before["InstanceGroups"]


def test_scale_in_nodes_go_shutting_down_then_disappear_and_free_capacity() -> None:
    b = backend(seed=3, capacity={"timing": {"update_start": 0, "shutdown": 100}})
    b.dispatch("CreateCluster", cluster_request(workers=3, worker_type="ml.p5.48xlarge"))
    d = wait_status(b, "InService")
    assert b.usage()["ml.p5.48xlarge"] == 3
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(d, {"gpu": 1})})
    b.process_due()
    gpu = [n["InstanceStatus"]["Status"] for n in nodes(b) if n["InstanceGroupName"] == "gpu"]
    assert sorted(gpu) == ["Running", "ShuttingDown", "ShuttingDown"]
    assert groups(b)["gpu"]["TargetCount"] == 1
    assert b.usage()["ml.p5.48xlarge"] == 3  # held until the instances are gone
    wait_status(b, "InService")
    assert b.usage()["ml.p5.48xlarge"] == 1


def test_groups_left_out_of_an_update_stay_as_they_are() -> None:
    b = _in_service()
    d = describe(b)
    only_gpu = [g for g in resend(d, {"gpu": 3}) if g["InstanceGroupName"] == "gpu"]
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": only_gpu})
    after = wait_status(b, "InService")
    by = {g["InstanceGroupName"]: g for g in after["InstanceGroups"]}
    assert by["controller"] == d["InstanceGroups"][0]
    assert (by["gpu"]["CurrentCount"], by["gpu"]["TargetCount"]) == (3, 3)


def test_an_update_that_omits_lifecycle_config_keeps_it() -> None:
    b = _in_service()
    d = describe(b)
    sent = resend(d, {"gpu": 1})
    sent[1].pop("LifeCycleConfig")
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": sent})
    assert groups(b)["gpu"]["LifeCycleConfig"] == d["InstanceGroups"][1]["LifeCycleConfig"]


def test_add_and_delete_instance_groups() -> None:
    b = _in_service()
    d = describe(b)
    extra = group("cpu", 2, "Compute", "ml.c5.2xlarge")
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": [*resend(d, {}), extra]})
    assert groups(b)["cpu"]["Status"] == "Creating"
    after = wait_status(b, "InService")
    assert [g["InstanceGroupName"] for g in after["InstanceGroups"]] == ["controller", "gpu", "cpu"]
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroupsToDelete": ["cpu"]})
    wait_status(b, "InService")
    run_until(b, lambda: "cpu" not in groups(b))
    assert not [n for n in nodes(b) if n["InstanceGroupName"] == "cpu"]


@pytest.mark.parametrize("status_during", ["Creating", "Updating"])
def test_default_mode_update_conflicts_unless_in_service(status_during: str) -> None:
    b = backend(seed=1)
    b.dispatch("CreateCluster", cluster_request())
    if status_during == "Updating":
        d = wait_status(b, "InService")
        b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(d, {"gpu": 3})})
    d = describe(b)
    assert d["ClusterStatus"] == status_during
    with pytest.raises(EmulatorError) as err:
        b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(d, {"gpu": 1})})
    assert err.value.code == "ConflictException"
    assert status_during in err.value.message


def test_continuous_mode_accepts_updates_while_scaling_but_not_on_a_creating_group() -> None:
    b = backend(seed=1, capacity={"instance_types": {"ml.p5.48xlarge": 1}})
    b.dispatch("CreateCluster", cluster_request(continuous=True, workers=1, worker_type="ml.p5.48xlarge"))
    with pytest.raises(EmulatorError) as err:  # the cluster itself is still Creating
        b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(describe(b), {"gpu": 2})})
    assert err.value.code == "ConflictException"
    wait_status(b, "InService")
    run_until(b, lambda: groups(b)["gpu"]["Status"] == "InService")  # the controller comes first
    d = describe(b)
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(d, {"gpu": 3})})
    assert describe(b)["ClusterStatus"] == "InService"  # stays InService while it scales
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": resend(describe(b), {"gpu": 2})})
    new = group("more", 1, "Compute", "ml.c5.xlarge")
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": [new]})
    assert groups(b)["more"]["Status"] == "Creating"
    with pytest.raises(EmulatorError) as err:
        b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": [{**new, "InstanceCount": 2}]})
    assert err.value.code == "ConflictException" and "more" in err.value.message


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"InstanceType": "ml.c5.2xlarge"}, "InstanceType: cannot change"),
        ({"ExecutionRole": "arn:aws:iam::123456789012:role/other"}, "ExecutionRole: cannot change"),
        ({"SlurmConfig": {"NodeType": "Login"}}, "NodeType cannot change"),
    ],
)
def test_update_runs_the_shared_semantic_rules(change: dict[str, object], needle: str) -> None:
    b = _in_service()
    sent = resend(describe(b), {})
    sent[1].update(change)
    with pytest.raises(EmulatorError) as err:
        b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": sent})
    assert err.value.code == "ValidationException"
    assert needle in err.value.message
    assert describe(b)["ClusterStatus"] == "InService"


def test_create_runs_the_shared_semantic_rules_and_refuses_a_taken_name() -> None:
    b = backend()
    bad = cluster_request()
    bad["InstanceGroups"][1]["LifeCycleConfig"] = {
        "SourceS3Uri": "s3://sagemaker-x/",
        "OnCreate": "a.sh",
        "OnInitComplete": "b.sh",
    }
    with pytest.raises(EmulatorError) as err:
        b.dispatch("CreateCluster", bad)
    assert err.value.code == "ValidationException" and "mutually exclusive" in err.value.message
    b.dispatch("CreateCluster", cluster_request())
    with pytest.raises(EmulatorError) as err:
        b.dispatch("CreateCluster", cluster_request())
    assert err.value.code == "ResourceInUse"


def test_unknown_clusters_and_operations() -> None:
    b = backend()
    for op in ("DescribeCluster", "DeleteCluster", "ListClusterNodes"):
        with pytest.raises(EmulatorError) as err:
            b.dispatch(op, {"ClusterName": "nope"})
        assert err.value.code == "ResourceNotFound"
    with pytest.raises(EmulatorError) as err:
        b.dispatch("DescribeCluster", {"ClusterName": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefabcdef"})
    assert err.value.code == "ResourceNotFound"
    with pytest.raises(EmulatorError) as err:
        b.dispatch("StopCluster", {})
    assert err.value.code == "UnknownOperationException"


def test_clusters_are_namespaced_by_account_and_region() -> None:
    b = backend()
    b.dispatch("CreateCluster", cluster_request(), region="us-west-2")
    with pytest.raises(EmulatorError):
        b.dispatch("DescribeCluster", {"ClusterName": "demo"})
    b.dispatch("CreateCluster", cluster_request())  # the same name elsewhere is another cluster
    assert b.dispatch("DescribeCluster", {"ClusterName": "demo"}, region="us-west-2")["ClusterArn"].startswith(
        "arn:aws:sagemaker:us-west-2:123456789012:cluster/"
    )


def test_delete_goes_deleting_then_gone_and_frees_capacity() -> None:
    b = backend(seed=2)
    b.dispatch("CreateCluster", cluster_request(worker_type="ml.p5.48xlarge"))
    wait_status(b, "InService")
    b.dispatch("DeleteCluster", {"ClusterName": "demo"})
    assert describe(b)["ClusterStatus"] == "Deleting"
    assert {g["Status"] for g in describe(b)["InstanceGroups"]} == {"Deleting"}
    with pytest.raises(EmulatorError) as err:
        b.dispatch("DeleteCluster", {"ClusterName": "demo"})
    assert err.value.code == "ConflictException"

    def gone() -> bool:
        try:
            describe(b)
        except EmulatorError as exc:
            return exc.code == "ResourceNotFound"
        return False

    run_until(b, gone)
    assert b.usage() == {}
    assert b.next_event_time() is None
    assert b.dispatch("ListClusters", {})["ClusterSummaries"] == []
    clock(b).advance(1)
    b.dispatch("CreateCluster", cluster_request())  # the name is free again


def test_delete_while_creating_cancels_the_launches() -> None:
    b = backend(seed=2)
    b.dispatch("CreateCluster", cluster_request())
    clock(b).advance(200)
    b.dispatch("DeleteCluster", {"ClusterName": "demo"})
    assert statuses_seen(b, "Deleting") == ["Deleting"]
    run_until(b, lambda: b.dispatch("ListClusters", {})["ClusterSummaries"] == [])
    assert b.usage() == {}
