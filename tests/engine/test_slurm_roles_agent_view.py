"""Slurm roles from the Slurm agent's view, when neither SlurmConfig nor provisioning_parameters.json
gives them (issue 26, "Slurm roles from the cluster's real shape": "the Slurm agent's view where there
is one"): the agent names the controller's own group and the groups with Slurm nodes, from the node's
resource_config.json; the scheduler uses it as the last fallback and remembers it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.agent.messages import AgentVerdict, SlurmShape
from hyperpod_scheduler.agent.shape import host_of, local_shape, parse_shape
from hyperpod_scheduler.cluster.view import parse_cluster
from hyperpod_scheduler.engine.slurm_roles import AGENT_SOURCE, remembered_roles, resolve_roles
from hyperpod_scheduler.store.records import ClusterRecord

NOW = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
ARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc123"


def resource_config(groups: dict[str, list[str]], arn: str = ARN) -> dict[str, Any]:
    """What HyperPod writes at /opt/ml/config/resource_config.json: groups and their instances' addresses."""
    return {
        "ClusterConfig": {"ClusterArn": arn, "ClusterName": "legacy"},
        "InstanceGroups": [
            {
                "Name": name,
                "InstanceType": "ml.m5.xlarge",
                "Instances": [
                    {"InstanceId": f"i-{name}-{i}", "InstanceName": f"{name}-{i}", "CustomerIpAddress": ip}
                    for i, ip in enumerate(ips)
                ],
            }
            for name, ips in groups.items()
        ],
    }


SHAPED = {
    "controller-machine": ["10.1.0.10"],
    "login-group": ["10.1.0.20"],
    "cpu-group": ["10.1.1.1", "10.1.1.2"],
    "worker-group-1": ["10.1.2.1"],
}
SLURM_NODES = [host_of(ip) for ip in ("10.1.1.1", "10.1.1.2", "10.1.2.1")]  # login nodes are not Slurm nodes


def test_the_agent_names_its_own_group_the_controller_and_groups_with_slurm_nodes_compute() -> None:
    shape = parse_shape(resource_config(SHAPED), "ip-10-1-0-10.ec2.internal", SLURM_NODES, NOW)
    assert shape is not None
    assert shape.controller == "controller-machine"
    assert shape.compute == ["cpu-group", "worker-group-1"]
    assert shape.others == ["login-group"]  # not said: login nodes run no slurmd, a group at zero has no hosts
    assert shape.cluster_arn == ARN


def test_an_agent_on_no_node_of_the_cluster_names_nothing(tmp_path: Any) -> None:
    assert parse_shape(resource_config(SHAPED), "ip-10-9-9-9", SLURM_NODES, NOW) is None
    assert parse_shape({"InstanceGroups": "x"}, "ip-10-1-0-10", SLURM_NODES, NOW) is None
    assert local_shape(SLURM_NODES, NOW, path=tmp_path / "absent.json", host="ip-10-1-0-10") is None
    bad = tmp_path / "resource_config.json"
    bad.write_text("{not json")
    assert local_shape(SLURM_NODES, NOW, path=bad, host="ip-10-1-0-10") is None


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: (
            st.lists(c, max_size=3)
            | st.dictionaries(
                st.sampled_from(["Name", "Instances", "InstanceGroups", "CustomerIpAddress", "ClusterConfig", "x"]),
                c,
                max_size=4,
            )
        ),
        max_leaves=12,
    )
)
def test_any_document_gives_a_shape_or_none_never_an_error(doc: Any) -> None:
    shape = parse_shape(doc, "ip-10-1-0-10", SLURM_NODES, NOW)
    assert shape is None or isinstance(shape, SlurmShape)


def test_an_older_agent_without_the_field_still_reads() -> None:
    old = {"intent_id": "i", "phase": "done", "decision": "allow", "reason": "ok", "at": NOW.isoformat()}
    assert AgentVerdict.model_validate(old).shape is None


LEGACY = {  # no SlurmConfig, and a lifecycle source whose provisioning_parameters.json cannot be read
    "ClusterArn": ARN,
    "ClusterName": "legacy",
    "ClusterStatus": "InService",
    "InstanceGroups": [
        {
            "InstanceGroupName": name,
            "InstanceType": itype,
            "CurrentCount": n,
            "TargetCount": n,
            "LifeCycleConfig": {"SourceS3Uri": "s3://b/src/", "OnCreate": "on_create.sh"},
        }
        for name, itype, n in (
            ("controller-machine", "ml.m5.12xlarge", 1),
            ("login-group", "ml.m5.4xlarge", 1),
            ("cpu-group", "ml.c5.xlarge", 2),
            ("worker-group-1", "ml.p5.48xlarge", 4),
        )
    ],
}


def _denied(uri: str) -> bytes:
    raise PermissionError("AccessDenied")


def test_the_agent_fills_the_roles_the_file_could_not_give_and_is_remembered() -> None:
    view = parse_cluster(LEGACY)
    shape = parse_shape(resource_config(SHAPED), "ip-10-1-0-10", SLURM_NODES, NOW)
    resolved = resolve_roles(view, None, _denied, NOW, lambda: shape)
    roles = {g.name: (g.node_type, g.role_source, g.role_unknown is not None) for g in resolved.view.groups}
    assert roles == {
        "controller-machine": ("Controller", AGENT_SOURCE, False),
        "login-group": (None, None, True),  # the agent cannot tell a login group: kept with the head
        "cpu-group": ("Compute", AGENT_SOURCE, False),
        "worker-group-1": ("Compute", AGENT_SOURCE, False),
    }
    assert (
        resolved.note is not None
        and "Slurm roles from the Slurm agent: 'controller-machine' Controller" in resolved.note
    )
    change = resolved.record_change
    assert change is not None and change.agent == {
        "controller-machine": "Controller",
        "cpu-group": "Compute",
        "worker-group-1": "Compute",
    }
    # Remembered: the next turn and the faces read it back without asking the agent again.
    record = ClusterRecord.new("k", NOW).evolve(slurm_roles=change)
    asked: list[int] = []

    def never() -> SlurmShape | None:
        asked.append(1)
        return None

    later = NOW + timedelta(minutes=5)
    again = resolve_roles(view, record, _denied, later, never)
    assert {g.name: g.node_type for g in again.view.groups} == {g.name: g.node_type for g in resolved.view.groups}
    assert asked == [1]  # only for the login group it did not name; nothing more was learned
    faces = remembered_roles(view, record, later)
    assert faces.group("controller-machine").node_type == "Controller"  # type: ignore[union-attr]


def test_an_agent_that_says_nothing_or_speaks_of_another_cluster_changes_nothing() -> None:
    view = parse_cluster(LEGACY)
    other = parse_shape(resource_config(SHAPED, arn=ARN + "x"), "ip-10-1-0-10", SLURM_NODES, NOW)
    for shape, said in ((None, "reported no view"), (other, "not this cluster")):
        resolved = resolve_roles(view, None, _denied, NOW, lambda s=shape: s)  # type: ignore[misc]
        assert all(g.node_type is None and g.role_unknown for g in resolved.view.groups)
        assert resolved.note is not None and said in resolved.note
        assert resolved.record_change is not None and resolved.record_change.agent == {}
