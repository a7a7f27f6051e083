"""engine.images.plan, the pure decision, over generated clusters, releases and records: the rules a
user relies on hold for every combination (hypothesis), not only for the emulator scenarios."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.aws.failures import FailureCause
from hyperpod_scheduler.cluster.view import parse_cluster
from hyperpod_scheduler.engine.images import Release, judged, plan, version_key
from hyperpod_scheduler.engine.ref import ImagePolicy
from hyperpod_scheduler.store.records import GroupOutcome, ImageState

NOW = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
VERSIONS = ["1.2.1", "1.2.2", "1.3.0", "1.4.0", "2.0.0"]
STATUSES = ["UpToDate", "UpdateAvailable", "SecurityUpdateRequired", "EndOfLife"]

groups = st.lists(
    st.fixed_dictionaries(
        {
            "count": st.integers(0, 2),
            "release": st.sampled_from([None, *VERSIONS[:3]]),  # None: a custom AMI
            "status": st.sampled_from(STATUSES),
            "mode": st.sampled_from(["pinned", "security", "latest"]),
        }
    ),
    min_size=1,
    max_size=4,
)
releases = st.lists(
    st.builds(
        Release,
        st.sampled_from(VERSIONS),
        st.integers(0, 10 * 24).map(lambda h: NOW - timedelta(hours=h)),
        st.booleans(),
    ),
    max_size=5,
    unique_by=lambda r: r.version,
)


def _view(spec: list[dict[str, Any]]) -> Any:
    out = []
    for i, g in enumerate(spec):
        group: dict[str, Any] = {
            "InstanceGroupName": f"g{i}",
            "InstanceType": "ml.g5.xlarge",
            "CurrentCount": g["count"],
            "TargetCount": g["count"],
            "ExecutionRole": "arn:aws:iam::123456789012:role/r",
            "ThreadsPerCore": 1,
        }
        if g["release"] is None:
            group["DesiredImageId"] = group["CurrentImageId"] = "ami-0123456789abcdef0"
        else:
            group["DesiredImageReleaseVersion"] = group["CurrentImageReleaseVersion"] = g["release"]
            group["ImageVersionStatus"] = g["status"]
        out.append(group)
    arn = "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc"
    return parse_cluster({"ClusterArn": arn, "ClusterName": "c1", "ClusterStatus": "InService", "InstanceGroups": out})


@given(groups, releases, st.integers(0, 5), st.sets(st.sampled_from(VERSIONS)), st.sampled_from([None, "1.2.1"]))
def test_a_change_is_always_to_a_settled_newer_release_of_a_managed_group_at_zero(
    spec: list[dict[str, Any]], known: list[Release], settle_days: int, refused: set[str], good: str | None
) -> None:
    view = _view(spec)
    policy = ImagePolicy(groups={f"g{i}": g["mode"] for i, g in enumerate(spec)}, settle=timedelta(days=settle_days))
    state = ImageState(
        refused={f"g{i}": sorted(refused) for i in range(len(spec))},
        good={f"g{i}": good for i in range(len(spec)) if good},
    )
    by_version = {r.version: r for r in known}
    for u in plan(view, state, policy, known, NOW):
        g = spec[int(u.group[1:])]
        assert g["release"] is not None and g["count"] == 0  # never a custom AMI, never a group with nodes
        assert u.from_release == g["release"]
        if u.why == "rolled back":
            assert g["release"] in refused and u.to_release == good
            continue
        assert g["mode"] != "pinned" and u.to_release not in refused
        chosen = by_version[u.to_release]
        assert NOW - chosen.published_at >= policy.settle  # a release younger than the settling age: never
        assert (version_key(u.to_release) or ()) > (version_key(g["release"]) or ())
        if g["mode"] == "security":
            assert g["status"] in ("SecurityUpdateRequired", "EndOfLife") and u.why == "security update"


def test_a_start_short_of_capacity_leaves_the_release_on_trial_and_a_lifecycle_failure_refuses_it() -> None:
    view = _view([{"count": 0, "release": "1.3.0", "status": "UpToDate", "mode": "security"}])
    state = ImageState(trial={"g0": "1.3.0"}, good={"g0": "1.2.1"})
    # The cause is typed at the edge (aws.failures): AWS's words are read there, not here.
    short = GroupOutcome(
        group="g0", outcome="failed", current=0, target=2, detail="no ml.g5 to give", cause=FailureCause.CAPACITY
    )
    after = judged(state, [short], view)
    assert after.trial == {"g0": "1.3.0"} and not after.refused  # a retry brings it up: still on trial
    broken = GroupOutcome(
        group="g0", outcome="failed", current=0, target=2, detail="capacity of /opt full", cause=FailureCause.OTHER
    )
    after = judged(after, [broken], view)
    assert after.refused == {"g0": ["1.3.0"]} and not after.trial and after.good == {"g0": "1.2.1"}
    rolled = plan(view, after, ImagePolicy(default="security"), [], NOW)
    assert [(u.to_release, u.why) for u in rolled] == [("1.2.1", "rolled back")]
