"""Each cluster is judged by its own target (issue "one truth per cluster", cases 1, 2 and 17).

Two accounts each have a cluster named ``train`` with P5 workers in us-east-1, reached through the
profiles ``prod`` and ``dev``. The targets differ in what a stop may release and whether jobs are
audited first; the same name in the same region must never borrow the other target's settings. The
tick runs through the composition root (``app.compose.Context``), as every face runs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
import yaml

from hyperpod_scheduler.agent.messages import AgentVerdict, Intent
from hyperpod_scheduler.agent.settings import CheckpointSettings
from hyperpod_scheduler.app.compose import Context, LocalAgent, chain_clients
from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.config.load import parse_config
from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.engine.events import Collector
from hyperpod_scheduler.engine.plan_steps import plan
from hyperpod_scheduler.engine.runner import ClusterRef
from hyperpod_scheduler.notify.channels import message_for
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import START, settle
from tests.reliability.harness import account_emulator
from tests.sessions import shared_session

PROD, DEV = "111111111111", "222222222222"
ROLE = "arn:aws:iam::123456789012:role/own-target"
# Monday 06:00 UTC: the office schedule wants these clusters stopped now.
OFFICE = "Mon-Fri 08:00-18:00 UTC"


def p5_request(name: str) -> dict[str, Any]:
    return slurm_request(name, {"gpu": ("ml.p5.48xlarge", 2)}, role=ROLE)


@dataclass
class Audits:
    """The Slurm side of the checkpoint audit, in process: who was asked, and it blocks every stop."""

    asked: list[str] = field(default_factory=list)

    def link_for(self, ref: ClusterRef, settings: CheckpointSettings) -> Any:
        audits = self

        class Link:
            def ask(self, intent: Intent) -> AgentVerdict | None:
                audits.asked.append(ref.profile or "")
                return AgentVerdict(
                    intent_id=intent.id,
                    phase="done",
                    decision="block",
                    reason="a job has no fresh checkpoint",
                    at=intent.posted_at,
                )

        return Link()


class Accounts:
    """Two accounts' emulators; a profile reaches one of them."""

    def __init__(self, prod: Emulator, dev: Emulator) -> None:
        self.emus = {PROD: prod, DEV: dev}
        session = shared_session()
        self.clients = {a: session.client("sagemaker", endpoint_url=e.endpoint) for a, e in self.emus.items()}
        self.route = {"prod": PROD, "dev": DEV}

    def create(self, account: str, name: str, request: dict[str, Any]) -> None:
        self.clients[account].create_cluster(**request)
        settle(self.emus[account], self.clients[account], name)

    def context(self, config_text: str, audits: Audits | None = None) -> tuple[Context, Collector]:
        events = Collector()
        clients = chain_clients(lambda ref: self.clients[self.route[ref.profile or "prod"]])
        agent = LocalAgent(link_for=audits.link_for, now=self.emus[PROD].clock.now) if audits else None
        ctx = Context(
            parse_config(yaml.safe_load(config_text), "test.yaml"),
            MemoryStore(),
            clients,
            self.emus[PROD].clock.now,
            events,
            agent=agent,
            notify=False,
        )
        return ctx, events

    def targets(self, account: str, name: str) -> dict[str, int]:
        d = self.clients[account].describe_cluster(ClusterName=name)
        return {g["InstanceGroupName"]: g["TargetCount"] for g in d["InstanceGroups"]}


@pytest.fixture
def accounts() -> Iterator[Accounts]:
    with (
        account_emulator(PROD, virtual_start=START - timedelta(hours=1), seed=1, in_process=True) as prod,
        account_emulator(DEV, virtual_start=START - timedelta(hours=1), seed=2, in_process=True) as dev,
    ):
        yield Accounts(prod, dev)


def _tick(ctx: Context) -> dict[str, str]:
    """One tick of the whole fleet: each cluster's result kind, by profile/name."""
    governed = ctx.fleet().governed()
    results = ctx.tick(governed)
    return {f"{g.ref.profile}/{g.ref.name}": r.kind for g, r in zip(governed, results, strict=True)}


TWO_PROFILES = f"""
defaults: {{schedule: "{OFFICE}"}}
targets:
  - region: us-east-1
    profile: dev
    clusters: [train]
    policy: {{release_scarce_capacity: true}}
  - region: us-east-1
    profile: prod
    clusters: [train]
"""


def test_two_profiles_one_name_each_is_stopped_by_its_own_policy(accounts: Accounts) -> None:
    for account in (PROD, DEV):
        accounts.create(account, "train", p5_request("train"))
    ctx, _ = accounts.context(TWO_PROFILES)
    _tick(ctx)
    # dev's target releases scarce capacity; prod's keeps it (the default): prod's P5s stay up.
    assert accounts.targets(DEV, "train")["gpu"] == 0
    assert accounts.targets(PROD, "train")["gpu"] == 2


TAGGED_THEN_NAMED = f"""
defaults: {{schedule: "{OFFICE}"}}
targets:
  - region: us-east-1
    profile: prod
    tag_selector: true
    policy: {{release_scarce_capacity: true}}
  - region: us-east-1
    profile: prod
    clusters: [solo]
"""


def test_a_named_cluster_is_not_judged_by_an_earlier_tag_selector_target(accounts: Accounts) -> None:
    accounts.create(PROD, "solo", p5_request("solo"))  # untagged: governed only by the second target
    ctx, _ = accounts.context(TAGGED_THEN_NAMED)
    _tick(ctx)
    assert accounts.targets(PROD, "solo")["gpu"] == 2


AUDITED_PROD = f"""
defaults: {{schedule: "{OFFICE}"}}
targets:
  - region: us-east-1
    profile: dev
    clusters: [train]
    policy: {{release_scarce_capacity: true}}
  - region: us-east-1
    profile: prod
    clusters: [train]
    policy: {{release_scarce_capacity: true}}
    checkpoints: {{policy: block}}
"""


def test_each_cluster_gets_its_own_checkpoint_audit_or_none(accounts: Accounts) -> None:
    for account in (PROD, DEV):
        accounts.create(account, "train", p5_request("train"))
    audits = Audits()
    ctx, _ = accounts.context(AUDITED_PROD, audits)
    kinds = _tick(ctx)
    # prod's own blocking audit ran and kept its nodes; dev (no audit configured) was stopped unaudited.
    assert audits.asked == ["prod"]
    assert kinds["prod/train"] == "blocked"
    assert accounts.targets(PROD, "train")["gpu"] == 2
    assert accounts.targets(DEV, "train")["gpu"] == 0


def eks_request(name: str) -> dict[str, Any]:
    lifecycle = {"SourceS3Uri": "s3://sagemaker-tests/lifecycle/", "OnCreate": "on_create.sh"}
    group = {"InstanceType": "ml.g5.8xlarge", "ExecutionRole": ROLE, "LifeCycleConfig": lifecycle}
    return {
        "ClusterName": name,
        "Orchestrator": {"Eks": {"ClusterArn": f"arn:aws:eks:us-east-1:{PROD}:cluster/{name}"}},
        "InstanceGroups": [{"InstanceGroupName": "workers", "InstanceCount": 3, **group}],
    }


def _eks_config(extra: str = "") -> str:
    return f"""
defaults: {{schedule: "{OFFICE}"}}
targets:
  - region: us-east-1
    profile: prod
    clusters: [kube]
{extra}"""


def test_a_scheduled_stop_of_an_eks_cluster_needs_its_target_to_say_no_audit(accounts: Accounts) -> None:
    accounts.create(PROD, "kube", eks_request("kube"))
    ctx, _ = accounts.context(_eks_config())
    assert _tick(ctx) == {"prod/kube": "blocked"}
    assert accounts.targets(PROD, "kube")["workers"] == 3
    [line] = ctx.store.history(ctx.fleet().governed()[0].ref.key, limit=1)
    assert line.outcome == "blocked" and "checkpoints: none" in line.detail["reason"]


def test_every_stop_of_an_eks_cluster_says_no_audit_ran(accounts: Accounts) -> None:
    accounts.create(PROD, "kube", eks_request("kube"))
    ctx, events = accounts.context(_eks_config("    checkpoints: none"))
    assert _tick(ctx) == {"prod/kube": "sent"}
    assert any("no checkpoint audit ran" in e.message for e in events.events if e.kind == "note")
    emu = accounts.emus[PROD]
    for _ in range(60):
        emu.advance(60)
        if _tick(ctx)["prod/kube"] != "in-progress":
            break
    assert accounts.targets(PROD, "kube")["workers"] == 0
    key = ctx.fleet().governed()[0].ref.key
    [line] = [e for e in ctx.store.history(key, limit=5) if e.action == "stop" and e.outcome == "ok"]
    assert "no checkpoint audit ran" in line.detail["audit"]


BOTH_AUDITED = f"""
defaults: {{schedule: "{OFFICE}", policy: {{release_scarce_capacity: true}}, checkpoints: {{policy: block}}}}
targets:
  - {{region: us-east-1, profile: dev, clusters: [train]}}
  - {{region: us-east-1, profile: prod, clusters: [train]}}
"""


def test_a_notice_and_a_tick_line_name_which_of_two_namesakes_they_are_about(accounts: Accounts) -> None:
    for account in (PROD, DEV):
        accounts.create(account, "train", p5_request("train"))
    ctx, events = accounts.context(BOTH_AUDITED, Audits())
    assert _tick(ctx) == {"dev/train": "blocked", "prod/train": "blocked"}
    notices = [m for m in map(message_for, events.events) if m is not None and "blocked" in m.subject]
    assert len(notices) == 2
    # Read out of context (Slack, e-mail), each says whose cluster was kept up, and the two differ.
    for account, notice in zip(sorted((PROD, DEV)), sorted(notices, key=lambda m: m.subject), strict=True):
        assert account in notice.subject, notice
    lines = {e.label for e in events.events if e.kind == "blocked"}
    assert len(lines) == 2, lines  # a tick's lines tell the two apart too


DEFAULT_CREDENTIALS_TAGS_THEN_PROFILE_NAMES = f"""
defaults: {{schedule: "{OFFICE}"}}
targets:
  - region: us-east-1
    tag_selector: true
    policy: {{release_scarce_capacity: true}}
  - region: us-east-1
    profile: prod
    clusters: [solo]
"""


def test_a_cluster_reached_by_two_targets_credentials_is_governed_once_by_the_one_naming_it(
    accounts: Accounts,
) -> None:
    # The default credentials and the profile prod reach the same account: the tag selector finds the
    # tagged 'solo', and the second target names it. One cluster, one turn, by the naming target's policy.
    request = {**p5_request("solo"), "Tags": [{"Key": "hyperpod-scheduler:schedule", "Value": OFFICE}]}
    accounts.create(PROD, "solo", request)
    ctx, _ = accounts.context(DEFAULT_CREDENTIALS_TAGS_THEN_PROFILE_NAMES)
    governed = ctx.fleet().governed()
    assert [(g.ref.profile, g.ref.name) for g in governed] == [("prod", "solo")]
    _tick(ctx)
    assert accounts.targets(PROD, "solo")["gpu"] == 2
    # Its account now learned, the two are known to be one cluster: still one turn.
    assert [(g.ref.profile, g.ref.account) for g in ctx.fleet().governed()] == [("prod", PROD)]


TWO_CREDENTIALS_NAME_ONE_CLUSTER = """
defaults: {schedule: "Mon-Sun 00:00-23:59 UTC"}
targets:
  - region: us-east-1
    clusters: [solo]
  - region: us-east-1
    profile: prod
    clusters: [solo]
    policy: {release_scarce_capacity: true}
"""


def test_two_targets_naming_one_cluster_through_two_credentials_govern_it_once_and_say_so(
    accounts: Accounts,
) -> None:
    # The default credentials and the profile prod reach one account: both targets name 'solo'. Once its
    # first look has learned that, the first target governs it, and the other is a problem (tick exits 1).
    accounts.create(PROD, "solo", p5_request("solo"))
    ctx, _ = accounts.context(TWO_CREDENTIALS_NAME_ONE_CLUSTER)
    _tick(ctx)  # the schedule wants it running: nothing to do, but each reach learns its account
    fleet = ctx.fleet()
    assert [(g.ref.profile, g.ref.account) for g in fleet.governed()] == [(None, PROD)]
    [problem] = fleet.problems
    assert "profile 'prod'" in str(problem) and "name it once" in str(problem)


# The same two targets with the office schedule: its stop is due at once.
TWO_CREDENTIALS_NAME_ONE_CLUSTER_DUE = TWO_CREDENTIALS_NAME_ONE_CLUSTER.replace("Mon-Sun 00:00-23:59 UTC", OFFICE)


@pytest.mark.parametrize("order", ["as configured", "reversed"])
def test_two_targets_naming_one_cluster_race_no_policy_on_the_first_tick(accounts: Accounts, order: str) -> None:
    # As above, but the stop is due on the very first tick, before either reach's account is known: the
    # first target keeps scarce capacity and the second releases it. Both turns looking at once and each
    # acting by its own policy would release the P5s against the first target's; the second must wait
    # for its account to be known and then be said, never act. (The default concurrency, 8, has both
    # turns in flight together; reversed, the second target's turn comes first.)
    accounts.create(PROD, "solo", p5_request("solo"))
    text = TWO_CREDENTIALS_NAME_ONE_CLUSTER_DUE
    if order == "reversed":  # the turns' order must not decide it: the config's order does
        ctx, _ = accounts.context(text)
        governed = list(reversed(ctx.fleet().governed()))
        ctx.tick(governed)
    else:
        ctx, _ = accounts.context(text)
        _tick(ctx)
    assert accounts.targets(PROD, "solo")["gpu"] == 2, "the second target's policy released the first's P5s"
    fleet = ctx.fleet()
    assert [(g.ref.profile, g.ref.account) for g in fleet.governed()] == [(None, PROD)]
    [problem] = fleet.problems
    assert "profile 'prod'" in str(problem) and "name it once" in str(problem)
    _tick(ctx)  # and on: still the first target's policy only
    assert accounts.targets(PROD, "solo")["gpu"] == 2


ONE_TARGET = """
defaults: {schedule: "Mon-Fri 08:00-18:00 UTC"}
targets:
  - region: us-east-1
    clusters: [solo]
"""


def test_a_target_added_before_a_known_one_holds_both_until_the_config_order_decides(accounts: Accounts) -> None:
    # 'solo' has been governed by the default credentials' target (its account known). A target naming it
    # through the profile prod is added ahead of it in the config (enforced, so its schedule's stop is due
    # although the cluster ran by the old one): neither may act until prod's first look says they are
    # one cluster; then the first in the config (prod) governs it, in the same tick.
    accounts.create(PROD, "solo", p5_request("solo"))
    ctx, _ = accounts.context(ONE_TARGET.replace("Mon-Fri 08:00-18:00", "Mon-Sun 00:00-23:59"))
    _tick(ctx)  # running, as wanted: only the account is learned
    added = ctx.reconfigured(
        parse_config(
            yaml.safe_load(
                ONE_TARGET.replace(
                    "targets:\n",
                    "targets:\n  - region: us-east-1\n    profile: prod\n    clusters: [solo]\n"
                    "    policy: {release_scarce_capacity: true}\n    enforced: true\n",
                )
            ),
            "test.yaml",
        )
    )
    governed = added.fleet().governed()
    assert [(g.ref.profile, g.looks_first) for g in governed] == [("prod", True), (None, True)]
    results = added.tick(governed)
    assert accounts.targets(PROD, "solo")["gpu"] == 0  # prod's policy releases it: prod is first now
    assert [r.kind for r in results] == ["sent", "skip"]
    assert "name it once" in results[1].message
    assert [(g.ref.profile, g.ref.account) for g in added.fleet().governed()] == [("prod", PROD)]


# The second target asks approval before a stop releases scarce capacity; the first (which governs the
# cluster, the two credentials reaching one account) never asks. The stop is due at 06:30, within the
# approval window of the first tick (05:00).
APPROVING_SECOND_TARGET = TWO_CREDENTIALS_NAME_ONE_CLUSTER.replace("00:00-23:59", "00:00-06:30").replace(
    "{release_scarce_capacity: true}", "{release_scarce_capacity: true, approve_release: scarce}"
)


def test_a_first_look_asks_no_approval_in_the_name_of_a_target_that_may_not_govern_the_cluster(
    accounts: Accounts,
) -> None:
    # A looks_first turn acts in no one's name: an approval request by the second target's policy, for a
    # cluster the first target governs, is a notice with a link about a release that never comes.
    accounts.create(PROD, "solo", p5_request("solo"))
    ctx, events = accounts.context(APPROVING_SECOND_TARGET)
    assert _tick(ctx) == {"None/solo": "noop", "prod/solo": "skip"}
    assert [e.message for e in events.events if e.kind == "approval"] == []
    [g] = ctx.fleet().governed()
    record = ctx.store.get(g.ref.key)
    assert record is None or record.approvals == []


MISSING_FIRST = f"""
defaults: {{schedule: "{OFFICE}"}}
targets:
  - region: us-east-1
    profile: dev
    clusters: [train]
  - region: us-east-1
    profile: prod
    clusters: [train]
"""


def test_a_namesake_that_finds_no_cluster_does_not_hold_the_others_stop_forever(accounts: Accounts) -> None:
    # A config shared by two accounts names 'train' in both; dev's has not been created (or was deleted).
    # Before fb1a4a8 prod's train was stopped on the first tick; now its turn only looks, tick after tick.
    accounts.create(PROD, "train", slurm_request("train", {"workers": ("ml.c5.xlarge", 4)}, role=ROLE))
    ctx, _ = accounts.context(MISSING_FIRST)
    for _ in range(3):
        kinds = _tick(ctx)
        assert kinds["dev/train"] == "error"  # ResourceNotFound, said every tick
        accounts.emus[PROD].advance(120)
    assert accounts.targets(PROD, "train")["workers"] == 0  # prod's own stop, by prod's own policy


def test_a_namesake_whose_look_fails_holds_the_other_and_the_tick_says_so(accounts: Accounts) -> None:
    # dev's look is not answered (every call a 500): whether dev's and prod's 'train' are one cluster is
    # not known, so prod's stop waits, and says so, rather than act by a policy that may not be its.
    accounts.create(PROD, "train", slurm_request("train", {"workers": ("ml.c5.xlarge", 4)}, role=ROLE))
    accounts.create(DEV, "train", slurm_request("train", {"workers": ("ml.c5.xlarge", 4)}, role=ROLE))
    accounts.emus[DEV].faults = {"error_rate": 1.0}
    ctx, events = accounts.context(MISSING_FIRST)
    kinds = _tick(ctx)
    assert kinds == {"dev/train": "error", "prod/train": "waiting"}
    assert accounts.targets(PROD, "train")["workers"] == 4
    [said] = [e for e in events.events if e.kind == "waiting"]
    assert "profile 'dev'" in said.message and "config's order" in said.message
    accounts.emus[DEV].faults = {"error_rate": 0.0}  # dev answers again: two accounts, each its own stop
    assert _tick(ctx) == {"dev/train": "sent", "prod/train": "sent"}


def test_plan_before_the_first_look_says_a_namesakes_steps_are_its_only_if_it_governs_the_cluster(
    accounts: Accounts,
) -> None:
    # Before any tick, plan cannot know whether the two targets' 'solo' is one cluster: each namesake's
    # steps say they are that target's only if it governs it; a cluster no other target names says nothing.
    accounts.create(PROD, "solo", p5_request("solo"))
    ctx, _ = accounts.context(
        TWO_CREDENTIALS_NAME_ONE_CLUSTER_DUE.replace("clusters: [solo]\n", "clusters: [solo, other]\n", 1)
    )
    now = accounts.emus[PROD].clock.now()
    steps = plan(ctx.fleet().governed(), now, now + timedelta(days=1))
    mine = [s for s in steps if s.cluster == "solo"]
    assert mine and all(s.why.startswith("if this target governs it (another target names it too): ") for s in mine)
    assert all(not s.why.startswith("if this target") for s in steps if s.cluster == "other")
