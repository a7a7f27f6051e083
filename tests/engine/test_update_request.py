"""The UpdateCluster request re-sends every group in full and changes nothing but the counts."""

from __future__ import annotations

import pytest

from hyperpod_scheduler.aws.model import validate_request
from hyperpod_scheduler.engine.update_request import build_update
from hyperpod_scheduler.errors import SpecError
from tests.engine.builders import cluster, group


def test_each_tier_keeps_its_lifecycle_config_exactly() -> None:
    view = cluster(
        group("controller", 1, node_type="Controller"),
        group("ext", 2, tier="ami+extension"),
        group("custom", 4, tier="custom", itype="ml.trn1.32xlarge"),
    )
    request = build_update(view, {"controller": (0, None), "ext": (0, None), "custom": (0, None)})
    by_name = {g["InstanceGroupName"]: g for g in request["InstanceGroups"]}
    assert "LifeCycleConfig" not in by_name["controller"]
    assert by_name["ext"]["LifeCycleConfig"] == {
        "SourceS3Uri": "s3://sagemaker-bucket/lc/",
        "OnInitComplete": "ext.sh",
    }
    assert by_name["custom"]["LifeCycleConfig"] == {
        "SourceS3Uri": "s3://sagemaker-bucket/lc/",
        "OnCreate": "on_create.sh",
    }
    for g in request["InstanceGroups"]:
        assert g["InstanceCount"] == 0
        assert g["ExecutionRole"].endswith("role/hyperpod-exec")
        assert g["ThreadsPerCore"] == 1
        assert g["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
    assert by_name["custom"]["InstanceType"] == "ml.trn1.32xlarge"
    assert by_name["custom"]["SlurmConfig"] == {"NodeType": "Compute", "PartitionNames": ["custom"]}
    assert validate_request("UpdateCluster", request) == []


def test_describe_only_fields_never_leak_into_the_request() -> None:
    g = group("gpu", 4)
    g.update(
        {
            "Status": "InService",
            "CurrentImageId": "ami-0123456789abcdef0",
            "TrainingPlanStatus": "Active",
            "KubernetesConfig": {"CurrentLabels": {"a": "b"}, "DesiredLabels": {"a": "c"}},
        }
    )
    request = build_update(cluster(group("controller", 1, node_type="Controller"), g), {"gpu": (0, None)})
    sent = next(x for x in request["InstanceGroups"] if x["InstanceGroupName"] == "gpu")
    for key in ("Status", "CurrentCount", "TargetCount", "CurrentImageId", "TrainingPlanStatus", "ImageId"):
        assert key not in sent
    assert sent["KubernetesConfig"] == {"Labels": {"a": "c"}}  # the desired value, under its request name


def test_min_count_never_exceeds_the_new_count() -> None:
    view = cluster(group("controller", 1, node_type="Controller", min_count=1))
    request = build_update(view, {"controller": (0, 0)})
    assert request["InstanceGroups"][0]["MinInstanceCount"] == 0


def test_unknown_group_is_refused() -> None:
    view = cluster(group("controller", 1, node_type="Controller"))
    with pytest.raises(SpecError, match="no such group"):
        build_update(view, {"nope": (0, None)})
