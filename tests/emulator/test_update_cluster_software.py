"""UpdateClusterSoftware as botocore's model defines it: per-group releases, refused while updating."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.engine.conftest import START, settle, three_tier_request
from tests.sessions import shared_session


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with running_emulator(virtual_start=START, seed=3, in_process=True) as e:
        yield e


def _versions(client: object, name: str = "c1") -> dict[str, tuple[str | None, str | None]]:
    d = client.describe_cluster(ClusterName=name)  # type: ignore[attr-defined]
    return {
        g["InstanceGroupName"]: (g.get("CurrentImageReleaseVersion"), g.get("DesiredImageReleaseVersion"))
        for g in d["InstanceGroups"]
    }


def test_a_named_group_moves_to_the_release_and_a_second_update_is_refused_while_updating(emu: Emulator) -> None:
    client = shared_session().client("sagemaker", endpoint_url=emu.endpoint)
    client.create_cluster(**three_tier_request())
    settle(emu, client, "c1")
    emu.backend.release_image("1.3.0", security_update=True)
    client.update_cluster_software(
        ClusterName="c1", InstanceGroups=[{"InstanceGroupName": "dev", "ImageReleaseVersion": "1.3.0"}]
    )
    assert client.describe_cluster(ClusterName="c1")["ClusterStatus"] == "Updating"
    with pytest.raises(ClientError) as refused:
        client.update_cluster_software(
            ClusterName="c1", InstanceGroups=[{"InstanceGroupName": "train", "ImageReleaseVersion": "1.3.0"}]
        )
    assert refused.value.response["Error"]["Code"] == "ConflictException"
    settle(emu, client, "c1")
    versions = _versions(client)
    assert versions["dev"][1] == "1.3.0"
    assert versions["train"] == ("1.2.1", "1.2.1")  # not named: unchanged


def test_an_unknown_release_or_group_is_refused_and_changes_nothing(emu: Emulator) -> None:
    client = shared_session().client("sagemaker", endpoint_url=emu.endpoint)
    client.create_cluster(**three_tier_request())
    settle(emu, client, "c1")
    for groups, code in (
        ([{"InstanceGroupName": "dev", "ImageReleaseVersion": "9.9.9"}], "ValidationException"),
        ([{"InstanceGroupName": "nope", "ImageReleaseVersion": "1.2.1"}], "ResourceNotFound"),
    ):
        with pytest.raises(ClientError) as refused:
            client.update_cluster_software(ClusterName="c1", InstanceGroups=groups)
        assert refused.value.response["Error"]["Code"] == code
    assert client.describe_cluster(ClusterName="c1")["ClusterStatus"] == "InService"
    assert all(v == ("1.2.1", "1.2.1") for v in _versions(client).values())
