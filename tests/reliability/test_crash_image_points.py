"""Kill the real CLI (SIGKILL) at each step of the AMI update before a morning restore (issue 32):
after the UpdateClusterSoftware intent is stored and before it is sent, after AWS accepted it and before
that is recorded, and after it settled and before the restore is planned. The next ticks converge.

After each kill: every recorded size is intact, UpdateClusterSoftware went out exactly once and the
restore's UpdateCluster exactly once, and the cluster is back at its sizes on the release the policy
chose (the config's ``image_releases``: the release source a real AWS deployment uses).
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_scheduler.engine.crashpoints import ENV, IMAGE_PATH
from tests.reliability.crash_setup import RECOVER_AFTER, Live, live_cluster
from tests.reliability.harness import SIZES, record, recorded_sizes, run_cli, settled_lines

KILLED = -signal.SIGKILL


def _count_software_updates(live: Live) -> Counter[str]:
    sent: Counter[str] = Counter()
    original = live.emu.backend.dispatch

    def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if operation == "UpdateClusterSoftware":
            sent[str(params.get("ClusterName", "")).rsplit("/", 1)[-1]] += 1
        return original(operation, params, **kw)

    live.emu.backend.dispatch = dispatch  # type: ignore[method-assign]
    return sent


def _releases(live: Live) -> dict[str, str | None]:
    d = live.emu.backend.dispatch("DescribeCluster", {"ClusterName": "c1"})
    return {g["InstanceGroupName"]: g.get("CurrentImageReleaseVersion") for g in d["InstanceGroups"]}


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    for made in live_cluster(tmp_path, "start"):
        # Every group on `security`; the release as the team listed it (long settled, a security update).
        text = made.config.read_text().replace(
            "defaults: {poll_seconds: 0.05, settle_timeout_minutes: 600}",
            "defaults: {poll_seconds: 0.05, settle_timeout_minutes: 600, policy: {image: security}}",
        )
        assert "policy: {image: security}" in text
        made.config.write_text(text + "image_releases: [{version: 1.3.0, released: 2026-01-05, security: true}]\n")
        yield made


@pytest.mark.parametrize("point", IMAGE_PATH)
def test_a_start_killed_around_the_ami_update_converges_on_the_new_release(live: Live, point: str) -> None:
    code, out = live.cli("stop", "c1", "--wait")
    assert code == 0, out
    assert recorded_sizes(live.state) == SIZES
    before = _releases(live)
    managed = {g for g, v in before.items() if v is not None}
    assert managed and all(before[g] != "1.3.0" for g in managed)
    live.emu.backend.release_image("1.3.0", security_update=True)  # AWS: the groups are SecurityUpdateRequired
    live.tally.reset()
    software = _count_software_updates(live)

    child = run_cli(live.args("start", "c1", "--wait"), {**live.env, ENV: point}, live.tmp)
    assert child.returncode == KILLED, f"{point} was never reached: {child.stdout}{child.stderr}"
    rec = record(live.state)
    assert rec is not None and recorded_sizes(live.state) == SIZES  # the kill lost no remembered size
    if point != "after-image-taken":
        assert [u.to_release for u in rec.images.pending] == ["1.3.0"] * len(managed)  # the intent, first

    live.converge(SIZES, live.start_at + RECOVER_AFTER)
    assert recorded_sizes(live.state) == SIZES, "a recorded size was lost or overwritten"
    assert software["c1"] == 1, f"UpdateClusterSoftware sent {software['c1']} times for one morning"
    assert live.tally.sent["c1"] == 1, f"the restore's UpdateCluster sent {live.tally.sent['c1']} times"
    assert settled_lines(live.state, "start") == 1
    after = _releases(live)
    assert {g: after[g] for g in managed} == {g: "1.3.0" for g in managed}  # restored on the chosen release
    rec = record(live.state)
    assert rec is not None and not rec.images.pending and not rec.images.trial  # judged on its first morning
    assert rec.images.good == {g: "1.3.0" for g in managed} and not rec.images.refused
