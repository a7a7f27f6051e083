"""Commands on a cluster's record, through the CLI in process (issue "one truth per cluster", cases 5
and 16): a start never lands on a cluster or group replaced while stopped, and two accounts' clusters
of one name are told apart with --profile by hold, release and history."""

from __future__ import annotations

import csv
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.emulator import Emulator
from tests.engine.conftest import START, settle
from tests.reliability.cli_inproc import Ran, cli
from tests.reliability.harness import account_emulator
from tests.sessions import shared_session

PROD, DEV = "111111111111", "222222222222"
ROLE = "arn:aws:iam::123456789012:role/records"


@dataclass
class Two:
    emus: dict[str, Emulator]
    clients: dict[str, Any]
    env: dict[str, str]
    tmp: Path

    def run(self, *argv: str) -> Ran:
        return cli(*argv, "-c", str(self.tmp / "config.yaml"), "--state", str(self.tmp / "state.db"), env=self.env)

    def targets(self, account: str, name: str = "train") -> dict[str, int]:
        d = self.clients[account].describe_cluster(ClusterName=name)
        return {g["InstanceGroupName"]: g["TargetCount"] for g in d["InstanceGroups"]}


@pytest.fixture
def two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Two]:
    with (
        account_emulator(PROD, virtual_start=START, seed=1, in_process=True) as prod,
        account_emulator(DEV, virtual_start=START, seed=2, in_process=True) as dev,
    ):
        emus = {PROD: prod, DEV: dev}
        profiles = "".join(
            f"[profile {p}]\nregion = us-east-1\naws_access_key_id = t\naws_secret_access_key = t\n"
            f"endpoint_url = {emus[a].endpoint}\n"
            for p, a in (("prod", PROD), ("dev", DEV))
        )
        (tmp_path / "aws-config").write_text(profiles)
        (tmp_path / "config.yaml").write_text(
            'defaults: {schedule: "Mon-Fri 08:00-18:00 UTC"}\n'
            "targets:\n"
            "  - {region: us-east-1, profile: prod, clusters: [train]}\n"
            "  - {region: us-east-1, profile: dev, clusters: [train]}\n"
        )
        for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER", "AWS_PROFILE", "HYPERPOD_SCHEDULER_CONFIG"):
            monkeypatch.delenv(var, raising=False)
        env = {"AWS_CONFIG_FILE": str(tmp_path / "aws-config"), "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}
        session = shared_session()
        clients = {a: session.client("sagemaker", endpoint_url=e.endpoint) for a, e in emus.items()}
        for account, emu in emus.items():
            clients[account].create_cluster(**slurm_request("train", {"workers": ("ml.c5.xlarge", 4)}, role=ROLE))
            settle(emu, clients[account], "train")
        yield Two(emus, clients, env, tmp_path)


def test_hold_release_and_history_take_a_profile_when_two_accounts_share_a_name(two: Two) -> None:
    ambiguous = two.run("hold", "train", "--state-wanted", "stopped")
    assert ambiguous.code == 2 and "--profile" in ambiguous.one_error_line()
    assert two.run("hold", "train", "--profile", "prod", "--state-wanted", "stopped").code == 0
    prod = two.run("history", "train", "--profile", "prod", "-o", "json")
    dev = two.run("history", "train", "--profile", "dev", "-o", "json")
    assert prod.code == 0 and '"hold"' in prod.out
    assert dev.code in (0, 2) and '"hold"' not in dev.out
    assert "no hold" in two.run("release", "train", "--profile", "dev").out
    assert "released" in two.run("release", "train", "--profile", "prod").out


def _replace_group(client: Any, name: str, group: str, itype: str, emu: Emulator) -> None:
    """Delete ``group`` and add a group of the same name with another instance type (at 0)."""
    d = client.describe_cluster(ClusterName=name)
    keep = ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig")
    others = [{**{k: g[k] for k in keep if k in g}, "InstanceCount": 0} for g in d["InstanceGroups"]]
    client.update_cluster(
        ClusterName=name,
        InstanceGroups=[g for g in others if g["InstanceGroupName"] != group],
        InstanceGroupsToDelete=[group],
    )
    settle(emu, client, name)
    new = {**next(g for g in others if g["InstanceGroupName"] == group), "InstanceType": itype}
    client.update_cluster(
        ClusterName=name, InstanceGroups=[g for g in others if g["InstanceGroupName"] != group] + [new]
    )
    settle(emu, client, name)


def test_a_start_onto_a_group_replaced_while_stopped_is_refused_until_its_sizes_are_forgotten(two: Two) -> None:
    assert two.run("stop", "train", "--profile", "prod").code == 0
    settle(two.emus[PROD], two.clients[PROD], "train")
    _replace_group(two.clients[PROD], "train", "workers", "ml.p5.48xlarge", two.emus[PROD])
    refused = two.run("start", "train", "--profile", "prod")
    assert refused.code == 1
    said = refused.out + refused.err
    assert "'workers' was ml.c5.xlarge, now ml.p5.48xlarge" in said and "forget" in said
    assert two.targets(PROD)["workers"] == 0  # nothing was sent: no P5 was launched
    assert two.run("forget", "train", "--profile", "prod").code == 0
    assert two.run("start", "train", "--profile", "prod").code == 0
    assert two.targets(PROD)["workers"] == 0


def test_a_start_onto_a_cluster_created_again_under_the_same_name_is_refused(two: Two) -> None:
    assert two.run("stop", "train", "--profile", "prod").code == 0
    client = two.clients[PROD]
    settle(two.emus[PROD], client, "train")
    client.delete_cluster(ClusterName="train")
    settle_gone(two.emus[PROD], client)
    client.create_cluster(**slurm_request("train", {"workers": ("ml.c5.xlarge", 0)}, role=ROLE))
    settle(two.emus[PROD], client, "train")
    refused = two.run("start", "train", "--profile", "prod")
    assert refused.code == 1 and "replaced while stopped" in refused.out + refused.err
    assert two.targets(PROD)["workers"] == 0


def settle_gone(emu: Emulator, client: Any) -> None:
    for _ in range(240):
        names = [c["ClusterName"] for c in client.list_clusters()["ClusterSummaries"]]
        if "train" not in names:
            return
        emu.advance(60)
    raise AssertionError("the cluster was not deleted")


def _named_command(said: str, verb: str) -> list[str]:
    """The `hyperpod-scheduler VERB ...` command a line tells the user to run, as argv."""
    found = re.search(rf"`hyperpod-scheduler ({verb} [^`]+)`", said)
    assert found, f"no `{verb}` command in {said!r}"
    return shlex.split(found.group(1))


def test_the_release_a_refused_stop_names_reaches_the_held_cluster_of_two_namesakes(two: Two) -> None:
    assert two.run("hold", "train", "--profile", "prod", "--state-wanted", "running").code == 0
    refused = two.run("stop", "train", "--profile", "prod")
    assert refused.code == 1
    released = two.run(*_named_command(refused.out + refused.err, "release"))
    assert released.code == 0 and "released" in released.out, released.err
    assert two.run("stop", "train", "--profile", "prod").code == 0


def test_the_forget_a_refused_start_names_reaches_the_replaced_cluster_of_two_namesakes(two: Two) -> None:
    assert two.run("stop", "train", "--profile", "prod").code == 0
    settle(two.emus[PROD], two.clients[PROD], "train")
    _replace_group(two.clients[PROD], "train", "workers", "ml.p5.48xlarge", two.emus[PROD])
    refused = two.run("start", "train", "--profile", "prod")
    assert refused.code == 1
    forgot = two.run(*_named_command(refused.out + refused.err, "forget"))
    assert forgot.code == 0, forgot.err
    assert two.run("start", "train", "--profile", "prod").code == 0


def _rows(table: str, name: str) -> list[str]:
    return [line for line in table.splitlines() if line.startswith(f"{name} ")]


def test_status_and_plan_tell_two_namesakes_apart_before_either_account_is_known(two: Two) -> None:
    # A fresh config, before any tick has learned whose each cluster is: the rows still differ, as the
    # JSON does, by the profile that reaches each.
    status = two.run("status")
    rows = _rows(status.out, "train")
    assert len(rows) == 2 and len(set(rows)) == 2 and any("prod" in r for r in rows), status.out
    documents = json.loads(two.run("status", "-o", "json").out)
    assert sorted(d["profile"] for d in documents) == ["dev", "prod"]
    plan = two.run("plan")
    steps = [line for line in plan.out.splitlines() if re.match(r"^[0-9]{4}-", line)]
    assert steps and any("prod" in s for s in steps) and any("dev" in s for s in steps), plan.out


def _replace_group_with(client: Any, name: str, group: str, shape: dict[str, Any], emu: Emulator) -> None:
    """Delete ``group`` and add a group of the same name of another ``shape`` (its type fields), at 0."""
    others = [_request_of(g, {}) for g in client.describe_cluster(ClusterName=name)["InstanceGroups"]]
    rest = [g for g in others if g["InstanceGroupName"] != group]
    client.update_cluster(ClusterName=name, InstanceGroups=rest, InstanceGroupsToDelete=[group])
    settle(emu, client, name)
    old = next(g for g in others if g["InstanceGroupName"] == group)
    new = {k: v for k, v in old.items() if k not in ("InstanceType", "InstanceRequirements")} | shape
    client.update_cluster(ClusterName=name, InstanceGroups=[*rest, new])
    settle(emu, client, name)


def _request_of(group: dict[str, Any], sizes: dict[str, int]) -> dict[str, Any]:
    """A described group as UpdateCluster takes it, at its size in ``sizes`` (else 0)."""
    keep = ("InstanceGroupName", "InstanceType", "ExecutionRole", "SlurmConfig")
    out = {k: group[k] for k in keep if k in group} | {"InstanceCount": sizes.get(group["InstanceGroupName"], 0)}
    if "InstanceRequirements" in group:
        out["InstanceRequirements"] = {"InstanceTypes": group["InstanceRequirements"]["DesiredInstanceTypes"]}
    return out


FLEXIBLE_P5 = {"InstanceRequirements": {"InstanceTypes": ["ml.p5.48xlarge", "ml.p4d.24xlarge"]}}
FLEXIBLE_C5 = {"InstanceRequirements": {"InstanceTypes": ["ml.c5.xlarge", "ml.c5.2xlarge"]}}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(None, FLEXIBLE_P5, id="plain-c5-to-flexible-p5"),
        pytest.param(FLEXIBLE_C5, FLEXIBLE_P5, id="flexible-c5-to-flexible-p5"),
        pytest.param(FLEXIBLE_C5, {"InstanceType": "ml.p5.48xlarge"}, id="flexible-c5-to-plain-p5"),
    ],
)
def test_a_start_onto_a_flexible_group_replaced_while_stopped_is_refused(
    two: Two, before: dict[str, Any] | None, after: dict[str, Any]
) -> None:
    client, emu = two.clients[PROD], two.emus[PROD]
    if before is not None:
        _replace_group_with(client, "train", "workers", before, emu)
        groups = client.describe_cluster(ClusterName="train")["InstanceGroups"]
        sizes = {"controller": 1, "workers": 4}
        client.update_cluster(ClusterName="train", InstanceGroups=[_request_of(g, sizes) for g in groups])
        settle(emu, client, "train")
    assert two.run("stop", "train", "--profile", "prod").code == 0
    settle(emu, client, "train")
    _replace_group_with(client, "train", "workers", after, emu)
    refused = two.run("start", "train", "--profile", "prod")
    assert refused.code == 1, refused.out + refused.err
    assert "replaced while stopped" in refused.out + refused.err
    assert two.targets(PROD)["workers"] == 0  # no P5 was launched


def test_tick_json_says_which_of_two_namesakes_each_result_is(two: Two) -> None:
    ran = two.run("tick", "-o", "json")
    assert ran.code == 0, ran.err
    results = json.loads(ran.out)
    assert len(results) == 2 and {r["cluster"] for r in results} == {"train"}
    assert sorted((r["account"], r["profile"], r["region"]) for r in results) == [
        (PROD, "prod", "us-east-1"),
        (DEV, "dev", "us-east-1"),
    ]


def _next_of(two: Two, profile: str) -> dict[str, str] | None:
    rows = json.loads(two.run("status", "-o", "json").out)
    [row] = [r for r in rows if r["profile"] == profile]
    return row["next_transition"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("state", ["stopped", "running"])
def test_status_promises_no_schedule_transition_a_hold_until_released_overrides(two: Two, state: str) -> None:
    assert two.run("hold", "train", "--profile", "dev", "--state-wanted", state).code == 0
    assert _next_of(two, "dev") is None  # nothing changes until the hold is released
    assert _next_of(two, "prod") is not None  # the other namesake keeps its schedule's


def test_status_gives_the_next_transition_after_a_hold_with_an_end(two: Two) -> None:
    until = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)
    assert two.run("hold", "train", "--profile", "dev", "--until", until.isoformat()).code == 0
    nxt = _next_of(two, "dev")
    assert nxt is not None and datetime.fromisoformat(nxt["at"]) >= until, nxt


def _plan_of(two: Two, profile: str) -> list[dict[str, str]]:
    steps = json.loads(two.run("plan", "--no-describe", "-o", "json").out)["steps"]
    return [s for s in steps if s["profile"] == profile]


def test_plan_lists_no_step_a_hold_until_released_overrides(two: Two) -> None:
    assert two.run("hold", "train", "--profile", "dev", "--state-wanted", "stopped").code == 0
    assert _plan_of(two, "dev") == []  # held stopped until released: the engine starts nothing
    assert _plan_of(two, "prod")  # the other namesake keeps its schedule's steps


def test_plan_takes_up_the_schedule_when_a_hold_ends(two: Two) -> None:
    until = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)
    assert two.run("hold", "train", "--profile", "dev", "--until", until.isoformat()).code == 0
    steps = _plan_of(two, "dev")
    assert steps and all(datetime.fromisoformat(s["at"]) >= until for s in steps), steps


def test_a_quiet_tick_promises_no_step_a_hold_overrides(two: Two) -> None:
    for profile in ("prod", "dev"):
        assert two.run("stop", "train", "--profile", profile).code == 0
        settle(two.emus[{"prod": PROD, "dev": DEV}[profile]], two.clients[{"prod": PROD, "dev": DEV}[profile]], "train")
        assert two.run("hold", "train", "--profile", profile, "--state-wanted", "stopped").code == 0
    assert two.run("tick").code == 0  # records how the stops settled
    ran = two.run("tick")
    assert ran.code == 0 and "nothing due" in ran.out, ran.out + ran.err
    assert "next: train" not in ran.out, ran.out  # both held stopped until released: nothing is next


def test_report_tells_two_namesakes_apart(two: Two) -> None:
    for profile, account in (("prod", PROD), ("dev", DEV)):
        assert two.run("stop", "train", "--profile", profile).code == 0
        settle(two.emus[account], two.clients[account], "train")
    assert two.run("tick").code == 0  # records how both stops settled
    ran = two.run("report")
    assert ran.code == 0, ran.err
    windows = [line for line in ran.out.splitlines() if line.startswith("train") and " window " in line]
    assert len(windows) == 2 and PROD in windows[0] + windows[1] and DEV in windows[0] + windows[1], ran.out
    labels = sorted(c["label"] for c in json.loads(two.run("report", "-o", "json").out)["clusters"])
    assert labels == [f"train (account {PROD} us-east-1)", f"train (account {DEV} us-east-1)"]
    sheet = two.tmp / "report.csv"
    assert two.run("report", "--csv", str(sheet)).code == 0
    assert sorted({r["cluster"] for r in csv.DictReader(sheet.open(encoding="utf-8"))} - {"TOTAL"}) == labels
    page = two.tmp / "report.html"
    assert two.run("report", "--html", str(page)).code == 0
    html = page.read_text(encoding="utf-8")
    assert all(label in html for label in labels)  # the shared page too
    # Each namesake's section has its own id, and the fleet table's links reach each one.
    ids = re.findall(r'<section class="cluster" id="([^"]+)"', html)
    assert len(ids) == 2 and len(set(ids)) == 2, ids
    assert all(f'href="#{i}"' in html for i in ids), ids


def test_a_hold_reason_too_long_or_with_an_escape_code_is_refused_in_one_line_and_nothing_is_held(two: Two) -> None:
    too_long = ("y" * 2001, "--reason: 2,001 characters, at most 500 allowed")
    for reason, said in (too_long, ("a\nb", "control character")):
        refused = two.run("hold", "train", "--profile", "prod", "--reason", reason)
        assert refused.code == 2 and said in refused.one_error_line()
    history = two.run("history", "train", "--profile", "prod", "-o", "json")
    assert '"hold"' not in history.out


def test_a_first_tick_that_finds_two_targets_naming_one_cluster_says_why_it_exits_1(two: Two) -> None:
    # A second profile reaches prod's account: two targets name prod's 'train'. On the first tick the two
    # accounts are learned and the second target is a problem (exit 1): that tick must say so on stderr,
    # as every later tick does, not exit 1 with nothing said.
    prod = two.emus[PROD].endpoint
    config = two.tmp / "aws-config"
    config.write_text(
        config.read_text()
        + "[profile alias]\nregion = us-east-1\naws_access_key_id = t\naws_secret_access_key = t\n"
        + f"endpoint_url = {prod}\n"
    )
    (two.tmp / "config.yaml").write_text(
        'defaults: {schedule: "Mon-Fri 08:00-18:00 UTC"}\n'
        "targets:\n"
        "  - {region: us-east-1, profile: prod, clusters: [train]}\n"
        "  - {region: us-east-1, profile: alias, clusters: [train]}\n"
    )
    first, second = two.run("tick"), two.run("tick")
    assert second.code == 1 and "name it once" in second.err
    assert first.code == 1 and "name it once" in first.err, first
