"""Where the documentation is stricter than a lenient emulator would be, the emulator follows it."""

from __future__ import annotations

import pytest

from hyperpod_scheduler.emulator.errors import EmulatorError
from tests.emulator_model.helpers import backend, cluster_request, groups, run_until, wait_status


def test_instance_type_and_instance_requirements_together_are_refused() -> None:
    b = backend()
    both = cluster_request()
    both["InstanceGroups"][1]["InstanceRequirements"] = {"InstanceTypes": ["ml.c5.xlarge", "ml.c5.2xlarge"]}
    with pytest.raises(EmulatorError) as err:
        b.dispatch("CreateCluster", both)
    assert err.value.code == "ValidationException" and "mutually exclusive" in err.value.message
    alone = cluster_request()
    del alone["InstanceGroups"][1]["InstanceType"]
    alone["InstanceGroups"][1]["InstanceRequirements"] = {"InstanceTypes": ["ml.c5.xlarge"]}
    b.dispatch("CreateCluster", alone)
    assert groups(b)["gpu"]["InstanceRequirements"]["DesiredInstanceTypes"] == ["ml.c5.xlarge"]


def test_neither_instance_type_nor_requirements_is_refused() -> None:
    b = backend()
    neither = cluster_request()
    del neither["InstanceGroups"][1]["InstanceType"]
    with pytest.raises(EmulatorError, match=r"InstanceGroups\[1\]\.InstanceType: required"):
        b.dispatch("CreateCluster", neither)


@pytest.mark.parametrize("operation", ["ListClusterEvents", "DescribeClusterEvent"])
def test_events_are_only_for_continuous_clusters(operation: str) -> None:
    b = backend()
    b.dispatch("CreateCluster", cluster_request())
    params = {"ClusterName": "demo"}
    if operation == "DescribeClusterEvent":
        params["EventId"] = "01234567-89ab-cdef-0123-456789abcdef"
    with pytest.raises(EmulatorError) as err:
        b.dispatch(operation, params)
    assert err.value.code == "ValidationException" and "Continuous" in err.value.message
    b.dispatch("CreateCluster", cluster_request("cont", continuous=True))
    assert b.dispatch("ListClusterEvents", {"ClusterName": "cont"})["Events"]


def test_batch_delete_caps_node_ids_and_logical_ids_at_50_combined() -> None:
    b = backend()
    b.dispatch("CreateCluster", cluster_request(continuous=True))
    wait_status(b, "InService")
    ids = [f"i-{n:017x}" for n in range(30)]
    logical = [f"logical-{n}" for n in range(21)]
    with pytest.raises(EmulatorError) as err:
        b.dispatch("BatchDeleteClusterNodes", {"ClusterName": "demo", "NodeIds": ids, "NodeLogicalIds": logical})
    assert err.value.code == "ValidationException" and "50" in err.value.message
    # Exactly 50 combined is fine (every id is unknown, so each comes back failed).
    out = b.dispatch("BatchDeleteClusterNodes", {"ClusterName": "demo", "NodeIds": ids, "NodeLogicalIds": logical[:20]})
    assert len(out["Failed"]) == 30 and len(out["FailedNodeLogicalIds"]) == 20
    assert "Successful" not in out  # an empty list would break the shape's minimum of one
    # NodeIds alone go up to 99 (the guide), beyond that ParamValidator's limits or ours refuse.
    many = [f"i-{n:017x}" for n in range(100)]
    with pytest.raises(EmulatorError, match="99"):
        b.dispatch("BatchDeleteClusterNodes", {"ClusterName": "demo", "NodeIds": many})


@pytest.mark.parametrize(
    ("region", "domain"), [("us-east-1", ".ec2.internal"), ("eu-west-1", ".eu-west-1.compute.internal")]
)
def test_private_dns_hostnames_have_their_domain(region: str, domain: str) -> None:
    b = backend(seed=3)
    b.dispatch("CreateCluster", cluster_request(), region=region)
    run_until(
        b, lambda: bool(b.dispatch("ListClusterNodes", {"ClusterName": "demo"}, region=region)["ClusterNodeSummaries"])
    )
    listed = b.dispatch("ListClusterNodes", {"ClusterName": "demo"}, region=region)["ClusterNodeSummaries"]
    assert all(n["PrivateDnsHostname"].startswith("ip-10-1-") for n in listed)
    assert all(n["PrivateDnsHostname"].endswith(domain) for n in listed)


def test_lifecycle_rules_from_the_guide() -> None:
    b = backend()
    cases = {
        "empty": ({}, "present but empty"),
        "entry point alone": ({"OnCreate": "a.sh"}, "needs SourceS3Uri"),
        "bucket alone": ({"SourceS3Uri": "s3://sagemaker-x/"}, "needs OnCreate or OnInitComplete"),
    }
    for name, (lcc, needle) in cases.items():
        request = cluster_request()
        request["InstanceGroups"][1]["LifeCycleConfig"] = lcc
        with pytest.raises(EmulatorError) as err:
            b.dispatch("CreateCluster", request)
        assert needle in err.value.message, name


def test_slurm_topology_rules_from_the_guide() -> None:
    b = backend()
    two = cluster_request()
    two["InstanceGroups"][1]["SlurmConfig"] = {"NodeType": "Controller"}
    with pytest.raises(EmulatorError, match="exactly one InstanceGroup with Controller"):
        b.dispatch("CreateCluster", two)
    no_partition = cluster_request()
    no_partition["InstanceGroups"][1]["SlurmConfig"] = {"NodeType": "Compute"}
    with pytest.raises(EmulatorError, match="exactly one partition name"):
        b.dispatch("CreateCluster", no_partition)
    strategy = cluster_request(continuous=True)
    strategy["Orchestrator"] = {"Slurm": {"SlurmConfigStrategy": "Managed"}}
    with pytest.raises(EmulatorError, match="SlurmConfigStrategy"):
        b.dispatch("CreateCluster", strategy)
    assert b.dispatch("ListClusters", {})["ClusterSummaries"] == []


def test_an_update_may_not_delete_every_group() -> None:
    b = backend()
    b.dispatch("CreateCluster", cluster_request())
    wait_status(b, "InService")
    with pytest.raises(EmulatorError, match="at least one instance group"):
        b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroupsToDelete": ["controller", "gpu"]})
