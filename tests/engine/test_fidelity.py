"""What a stop or start must not change: members botocore does not know, autoscaled clusters, damaged
answers and the AMI. The emulator serves the cluster; a loopback proxy in front of it plays a newer (or
broken) AWS by rewriting its answers, so nothing here depends on the emulator sharing our assumptions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import botocore
import pytest

from hyperpod_scheduler.config.model import Policy
from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.fleet import turn
from hyperpod_scheduler.engine.runner import ClusterRef, ClusterSettings, Engine
from hyperpod_scheduler.notify.channels import message_for
from hyperpod_scheduler.store.memory import MemoryStore
from tests.aws.proxy import AnswerProxy, Rewrite, add_to_group, answer_proxy
from tests.engine.conftest import settle, three_tier_request
from tests.sessions import shared_session

REF = ClusterRef(key="123456789012/us-east-1/c1", name="c1", region="us-east-1")


class Rig:
    def __init__(self, emu: Emulator, proxy: AnswerProxy, policy: Policy) -> None:
        self.emu = emu
        self.proxy = proxy
        self.store = MemoryStore()
        self.events = Collector()
        session = shared_session()
        self.client = session.client("sagemaker", endpoint_url=proxy.endpoint)
        self.engine = Engine(
            self.store,
            lambda ref: self.client,
            emu.clock.now,
            events=self.events,
            sleep=lambda s: emu.advance(s),
        )
        self.ref = REF.governed(ClusterSettings(policy=policy))

    def act(self, action: str) -> Any:
        return self.engine.act(self.ref, action, transition_id=f"manual-{action}", wait=True, poll_seconds=60)  # type: ignore[arg-type]

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events.events]


@pytest.fixture
def emu(served_emu: Emulator) -> Emulator:
    """About the wire: every answer crosses loopback HTTP (and the rewriting proxy), never in process."""
    return served_emu


@pytest.fixture
def rewrites() -> list[Rewrite]:
    return []


@pytest.fixture
def rig(emu: Emulator, rewrites: list[Rewrite], request: pytest.FixtureRequest) -> Iterator[Rig]:
    def rewrite(operation: str, answer: Any) -> Any:
        for r in rewrites:
            answer = r(operation, answer)
        return answer

    policy = getattr(request, "param", Policy())
    with answer_proxy(emu.endpoint, rewrite) as proxy:
        r = Rig(emu, proxy, policy)
        r.client.create_cluster(**three_tier_request())
        settle(emu, r.client, "c1")
        yield r


def test_a_member_botocore_does_not_know_refuses_the_stop(rig: Rig, rewrites: list[Rewrite]) -> None:
    assert rig.act("stop").kind == "settled" and rig.act("start").kind == "settled"
    sizes_before = rig.store.get(REF.key).snapshot.sizes  # type: ignore[union-attr]
    sent_before = len(rig.proxy.sent("UpdateCluster"))
    rewrites.append(add_to_group("train", "FancyNewSetting", {"Mode": "On"}))

    result = rig.act("stop")

    assert result.kind == "refused"
    assert "group 'train' carries InstanceGroups[2].FancyNewSetting" in result.message
    assert f"botocore {botocore.__version__}" in result.message
    assert "accept_unknown_members: [FancyNewSetting]" in result.message
    assert len(rig.proxy.sent("UpdateCluster")) == sent_before  # nothing reached AWS
    record = rig.store.get(REF.key)
    assert record is not None and record.snapshot is not None
    assert record.snapshot.sizes == sizes_before  # the remembered sizes are untouched
    assert record.refused is not None and record.refused.action == "stop"
    line = rig.store.history(REF.key, limit=1)[0]
    assert (line.action, line.outcome) == ("stop", "refused")
    assert line.detail["members"] == [
        {"path": "InstanceGroups[2].FancyNewSetting", "member": "FancyNewSetting", "group": "train"}
    ]
    refused = next(e for e in rig.events.events if e.kind == "refused")
    message = message_for(refused)
    assert message is not None and "update refused" in message.subject


def test_an_unknown_member_inside_a_known_structure_is_found(rig: Rig, rewrites: list[Rewrite]) -> None:
    def nested(operation: str, answer: Any) -> Any:
        if operation == "DescribeCluster":
            answer["InstanceGroups"][1]["InstanceStorageConfigs"][0]["EbsVolumeConfig"]["Throughput"] = 500
        return answer

    rewrites.append(nested)
    result = rig.act("stop")
    assert result.kind == "refused"
    assert "InstanceGroups[1].InstanceStorageConfigs[0].EbsVolumeConfig.Throughput" in result.message
    assert rig.proxy.sent("UpdateCluster") == []


@pytest.mark.parametrize("rig", [Policy(accept_unknown_members=["FancyNewSetting"])], indirect=True)
def test_a_policy_may_accept_the_loss_by_name(rig: Rig, rewrites: list[Rewrite]) -> None:
    rewrites.append(add_to_group("train", "FancyNewSetting", {"Mode": "On"}))
    result = rig.act("stop")
    assert result.kind == "settled"
    (update,) = rig.proxy.sent("UpdateCluster")
    assert all("FancyNewSetting" not in g for g in update["InstanceGroups"])
    assert any("FancyNewSetting" in e.message and e.kind == "note" for e in rig.events.events)


def test_an_autoscaled_cluster_is_never_resized(rig: Rig, rewrites: list[Rewrite]) -> None:
    def karpenter(operation: str, answer: Any) -> Any:
        if operation == "DescribeCluster":
            answer["AutoScaling"] = {"Mode": "Enable", "AutoScalerType": "Karpenter", "Status": "InService"}
        return answer

    rewrites.append(karpenter)
    for action in ("stop", "start"):
        result = rig.act(action)
        assert result.kind == "refused" and "autoscaler (Karpenter) owns" in result.message
    assert rig.proxy.sent("UpdateCluster") == []


@pytest.mark.parametrize(
    ("member", "value", "said"),
    [
        ("AutoPatchConfig", "weekly", 'InstanceGroups[1].AutoPatchConfig is "weekly", expected an object'),
        ("AutoPatchConfig", {"PatchingStrategy": 3}, "InstanceGroups[1].AutoPatchConfig.PatchingStrategy is 3"),
        ("CurrentImageReleaseVersion", 7, "InstanceGroups[1].CurrentImageReleaseVersion is 7, expected a string"),
        ("DesiredImageId", ["ami-1"], 'InstanceGroups[1].DesiredImageId is ["ami-1"], expected a string'),
    ],
)
def test_a_malformed_patch_or_image_field_is_one_line_naming_it(
    rig: Rig, rewrites: list[Rewrite], member: str, value: Any, said: str
) -> None:
    assert rig.act("stop").kind == "settled"
    before = rig.store.get(REF.key)
    rewrites.append(add_to_group("dev", member, value))
    result = turn(rig.engine, rig.ref, _wants_running(rig))
    assert result.kind == "error"
    assert said in result.message and "\n" not in result.message
    after = rig.store.get(REF.key)
    assert after is not None and before is not None and after.snapshot == before.snapshot
    assert rig.proxy.sent("UpdateCluster")[-1]["InstanceGroups"][1]["InstanceCount"] == 0  # no start went out


def _wants_running(rig: Rig) -> Any:
    from hyperpod_scheduler.engine.planner import ScheduleState

    return ScheduleState(desired="running", last_transition_at=rig.emu.clock.now())


def test_a_start_that_brings_a_group_back_on_another_ami_is_reported(rig: Rig, rewrites: list[Rewrite]) -> None:
    # The emulator's catalogue knows the releases (a request naming one it does not is refused, as on
    # AWS); the proxy only makes dev's nodes come back on the newer one despite the pin.
    ran = rig.emu.backend.latest_image()
    assert ran is not None
    release: dict[str, str | None] = {"now": None}

    def image(operation: str, answer: Any) -> Any:
        if operation == "DescribeCluster" and release["now"]:
            for g in answer["InstanceGroups"]:
                if g["InstanceGroupName"] == "dev":
                    g["CurrentImageReleaseVersion"] = release["now"]
        return answer

    rewrites.append(image)
    assert rig.act("stop").kind == "settled"
    record = rig.store.get(REF.key)
    assert record is not None and record.snapshot is not None
    assert record.snapshot.sizes["dev"].image_release == ran
    (stop,) = rig.proxy.sent("UpdateCluster")
    assert {g["InstanceGroupName"]: g["ImageReleaseVersion"] for g in stop["InstanceGroups"]} == {
        "controller": ran,
        "dev": ran,
        "train": ran,
    }  # pinned: an omitted version would mean "the latest"

    rig.emu.backend.release_image("1.5.2")  # AWS releases a newer AMI overnight
    release["now"] = "1.5.2"  # and the group came back on it anyway
    assert rig.act("start").kind == "settled"
    record = rig.store.get(REF.key)
    assert record is not None
    assert [(c.group, c.from_release, c.to_release) for c in record.ami_changes] == [("dev", ran, "1.5.2")]
    drift = next(e for e in rig.events.events if e.kind == "drift")
    assert f"group 'dev' came back on AMI 1.5.2 (was {ran} at the stop)" in drift.message
    message = message_for(drift)
    assert message is not None and "AMI changed" in message.subject
    line = rig.store.history(REF.key, limit=1)[0]
    assert line.detail["ami_changes"][0]["to_release"] == "1.5.2"
