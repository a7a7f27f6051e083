"""The repository's example specs (the demo fleet) and `load_request`, the call the demo makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperpod_scheduler.cluster.load import load_report, load_request
from hyperpod_scheduler.cluster.rules import uses_api_slurm_topology
from hyperpod_scheduler.cluster.tiers import Tier
from hyperpod_scheduler.errors import SpecError
from tests.cluster.cluster_specs import slurm_spec, write_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# file -> (every group's tier, Continuous?, API-driven SlurmConfig?): what the demo's stories promise.
FLEET = {
    "p5-continuous-ami.yaml": (Tier.AMI, True, True),
    "g5-dev-extension.yaml": (Tier.AMI_EXTENSION, False, True),
    "trn1-legacy-custom.yaml": (Tier.CUSTOM, False, False),
}


@pytest.mark.parametrize("name", sorted(FLEET))
def test_demo_specs_are_clean_and_keep_their_story(name: str) -> None:
    report = load_report(EXAMPLES / name)
    assert report.problems == []  # not even a warning
    tier, continuous, api_topology = FLEET[name]
    assert set(report.tiers().values()) == {tier}
    assert (report.request.get("NodeProvisioningMode") == "Continuous") is continuous
    assert uses_api_slurm_topology(report.request) is api_topology


def test_demo_specs_have_distinct_cluster_names() -> None:
    names = [load_request(EXAMPLES / name)["ClusterName"] for name in FLEET]
    assert len(set(names)) == len(names)


def test_load_request_returns_the_rendered_request(tmp_path: Path) -> None:
    request = load_request(write_spec(tmp_path, slurm_spec()))
    assert request["ClusterName"] == "demo"
    assert [g["InstanceGroupName"] for g in request["InstanceGroups"]] == ["controller", "login", "gpu"]


def test_load_request_refuses_a_spec_with_errors_naming_each(tmp_path: Path) -> None:
    data = slurm_spec()
    data["instance_groups"][2].update(count=-1)
    data["instance_groups"][1]["slurm"] = {"node_type": "Controller"}
    path = write_spec(tmp_path, data)
    with pytest.raises(SpecError) as info:
        load_request(path)
    assert str(info.value).startswith(f"{path}: ")
    fields = [p.field for p in info.value.problems]
    assert fields == ["instance_groups[2].count", "instance_groups[].slurm.node_type"]


def test_load_request_lets_warnings_through(tmp_path: Path) -> None:
    data = slurm_spec()
    data["instance_groups"][1]["lifecycle"] = {"source_s3_uri": "s3://mine/", "on_init_complete": "e.sh"}
    assert load_request(write_spec(tmp_path, data))["InstanceGroups"][1]["LifeCycleConfig"]["SourceS3Uri"] == (
        "s3://mine/"
    )
