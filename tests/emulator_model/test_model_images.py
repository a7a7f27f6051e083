"""The AMI release catalogue: "latest" moves forward, groups pin or follow it, nodes run what they got."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_scheduler.emulator.capacity import CapacityModel
from hyperpod_scheduler.emulator.errors import EmulatorError
from hyperpod_scheduler.emulator.model_images import BUILT_IN, image_id_for
from hyperpod_scheduler.errors import UsageError
from tests.emulator_model.helpers import backend, clock, cluster_request, describe, groups, nodes, resend, run_until

LATEST = BUILT_IN[-1]


def _settled(b: Any, counts: dict[str, int]) -> None:
    run_until(
        b,
        lambda: (
            describe(b)["ClusterStatus"] == "InService"
            and all(groups(b)[g]["CurrentCount"] == n for g, n in counts.items())
            and not any(n["InstanceStatus"]["Status"] != "Running" for n in nodes(b))
        ),
    )


def _stop_and_start(b: Any, keep_version: bool = False) -> None:
    sent = resend(describe(b), {"gpu": 0})
    if keep_version:
        for g in sent:
            g["ImageReleaseVersion"] = groups(b)[g["InstanceGroupName"]]["CurrentImageReleaseVersion"]
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": sent})
    _settled(b, {"gpu": 0})
    sent = resend(describe(b), {"gpu": 2})
    if keep_version:
        for g in sent:
            g["ImageReleaseVersion"] = groups(b)[g["InstanceGroupName"]]["CurrentImageReleaseVersion"]
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": sent})
    _settled(b, {"gpu": 2})


def test_a_group_created_without_a_version_gets_the_latest_and_reports_it() -> None:
    b = backend(seed=1)
    b.dispatch("CreateCluster", cluster_request())
    _settled(b, {"gpu": 2})
    gpu = groups(b)["gpu"]
    assert (gpu["CurrentImageReleaseVersion"], gpu["DesiredImageReleaseVersion"]) == (LATEST.version, LATEST.version)
    assert gpu["CurrentImageId"] == gpu["DesiredImageId"] == LATEST.image_id
    assert gpu["ImageVersionStatus"] == "UpToDate"
    node = next(n for n in nodes(b) if n["InstanceGroupName"] == "gpu")
    assert (node["CurrentImageReleaseVersion"], node["ImageVersionStatus"]) == (LATEST.version, "UpToDate")


def test_a_release_overnight_makes_groups_report_an_update_and_new_groups_take_it() -> None:
    b = backend(seed=2)
    b.dispatch("CreateCluster", cluster_request())
    _settled(b, {"gpu": 2})
    release = b.release_image()
    assert release.version == "1.2.2" and b.latest_image() == "1.2.2"
    assert groups(b)["gpu"]["ImageVersionStatus"] == "UpdateAvailable"
    b.release_image("1.3.0", security_update=True)
    assert groups(b)["gpu"]["ImageVersionStatus"] == "SecurityUpdateRequired"
    b.dispatch("CreateCluster", cluster_request("fresh"))
    assert groups(b, "fresh")["gpu"]["DesiredImageReleaseVersion"] == "1.3.0"


def test_in_keep_mode_a_stop_and_start_keeps_the_groups_release() -> None:
    b = backend(seed=3)
    b.dispatch("CreateCluster", cluster_request())
    _settled(b, {"gpu": 2})
    b.release_image("1.3.0")
    _stop_and_start(b)
    gpu = groups(b)["gpu"]
    assert (gpu["CurrentImageReleaseVersion"], gpu["DesiredImageReleaseVersion"]) == (LATEST.version,) * 2
    assert gpu["ImageVersionStatus"] == "UpdateAvailable"


def test_in_reset_mode_a_stop_and_start_brings_the_nodes_back_on_the_newer_ami() -> None:
    b = backend(seed=3, omitted_members="reset")
    b.dispatch("CreateCluster", cluster_request())
    _settled(b, {"gpu": 2})
    b.release_image("1.3.0")
    _stop_and_start(b)
    gpu = groups(b)["gpu"]
    assert (gpu["CurrentImageReleaseVersion"], gpu["DesiredImageReleaseVersion"]) == ("1.3.0", "1.3.0")
    assert {n["CurrentImageReleaseVersion"] for n in nodes(b) if n["InstanceGroupName"] == "gpu"} == {"1.3.0"}


def test_in_reset_mode_re_sending_the_release_pins_it() -> None:
    b = backend(seed=3, omitted_members="reset")
    b.dispatch("CreateCluster", cluster_request())
    _settled(b, {"gpu": 2})
    b.release_image("1.3.0")
    _stop_and_start(b, keep_version=True)
    assert groups(b)["gpu"]["CurrentImageReleaseVersion"] == LATEST.version


def test_current_is_what_the_running_nodes_run_while_new_nodes_get_the_desired_release() -> None:
    b = backend(seed=4)
    b.dispatch("CreateCluster", cluster_request(workers=1))
    _settled(b, {"gpu": 1})
    b.release_image("1.3.0")
    sent = resend(describe(b), {"gpu": 2})
    next(g for g in sent if g["InstanceGroupName"] == "gpu")["ImageReleaseVersion"] = "1.3.0"
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": sent})
    _settled(b, {"gpu": 2})
    gpu = groups(b)["gpu"]
    versions = sorted(n["CurrentImageReleaseVersion"] for n in nodes(b) if n["InstanceGroupName"] == "gpu")
    assert versions == [LATEST.version, "1.3.0"]
    # Current is the oldest release still running; Desired what the next node gets.
    assert (gpu["CurrentImageReleaseVersion"], gpu["DesiredImageReleaseVersion"]) == (LATEST.version, "1.3.0")


def test_image_id_default_custom_and_unknown_versions() -> None:
    b = backend(seed=5)
    request = cluster_request()
    request["InstanceGroups"][0]["ImageId"] = "default"
    request["InstanceGroups"][1]["ImageId"] = "ami-0123456789abcdef0"  # a custom AMI
    b.dispatch("CreateCluster", request)
    by = groups(b)
    assert by["controller"]["DesiredImageId"] == LATEST.image_id
    assert by["controller"]["DesiredImageReleaseVersion"] == LATEST.version
    assert by["gpu"]["DesiredImageId"] == "ami-0123456789abcdef0"
    assert "DesiredImageReleaseVersion" not in by["gpu"] and "ImageVersionStatus" not in by["gpu"]
    bad = cluster_request("bad")
    bad["InstanceGroups"][1]["ImageReleaseVersion"] = "9.9.9"
    with pytest.raises(EmulatorError) as err:
        b.dispatch("CreateCluster", bad)
    assert err.value.code == "ValidationException" and "9.9.9" in err.value.message
    both = cluster_request("both")
    both["InstanceGroups"][1].update(ImageReleaseVersion=BUILT_IN[0].version, ImageId="ami-0123456789abcdef0")
    with pytest.raises(EmulatorError, match="is not the AMI of ImageReleaseVersion"):
        b.dispatch("CreateCluster", both)


def test_releases_listed_in_the_capacity_file_come_out_on_the_clock() -> None:
    b = backend({"images": [{"version": "2.0.0", "at": "+8h"}]}, seed=6)
    assert b.latest_image() == LATEST.version
    assert b.next_event_time() is not None
    clock(b).advance(8 * 3600)
    assert b.latest_image() == "2.0.0"
    assert [i["version"] for i in b.images() if i["latest"]] == ["2.0.0"]
    assert next(i for i in b.images() if i["version"] == "2.0.0")["image_id"] == image_id_for("2.0.0")


def test_continuous_new_groups_inherit_the_earliest_groups_ami() -> None:
    b = backend(seed=7)
    b.dispatch("CreateCluster", cluster_request(continuous=True, workers=1))
    run_until(b, lambda: groups(b)["gpu"]["CurrentCount"] == 1)
    b.release_image("1.3.0")
    extra = {
        **cluster_request()["InstanceGroups"][1],
        "InstanceGroupName": "extra",
        "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["extra"]},
    }
    b.dispatch("UpdateCluster", {"ClusterName": "demo", "InstanceGroups": [extra]})
    assert groups(b)["extra"]["DesiredImageReleaseVersion"] == LATEST.version


@pytest.mark.parametrize(
    ("images", "needle"),
    [
        ([{"version": "1.2"}], "images[0].version"),
        ([{"version": "3.0.0", "image_id": "ami-xyz"}], "images[0].image_id"),
        ([{"version": "1.0.0"}], "listed twice"),
        ([{"version": "3.0.0", "when": "+1h"}], "images[0].when"),
        ({"version": "3.0.0"}, "images: expected a list"),
    ],
)
def test_bad_image_entries_are_one_line_errors(images: Any, needle: str) -> None:
    with pytest.raises(UsageError) as err:
        CapacityModel.from_dict({"images": images})
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_release_must_be_newer_than_every_known_one() -> None:
    b = backend()
    with pytest.raises(UsageError, match="not newer"):
        b.release_image("1.0.5")
