"""Fuzzed bad input: every case is a clear one-line error or a logged skip, never a traceback, never a
lost size. Covers schedule expressions, the YAML config, cluster specs, CreateCluster JSON and
malformed or unexpected DescribeCluster answers."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.cluster.check import check_request, check_spec
from hyperpod_scheduler.cluster.spec import parse_yaml, spec_from_dict
from hyperpod_scheduler.config.load import parse_config
from hyperpod_scheduler.engine.fleet import Fleet, Governed, ref_for, tick, turn
from hyperpod_scheduler.engine.planner import ScheduleState
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.schedule import resolve
from hyperpod_scheduler.store.memory import MemoryStore
from hyperpod_scheduler.store.records import ClusterRecord, GroupSize, Snapshot
from tests.engine.builders import group
from tests.engine.conftest import three_tier_request

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
T0 = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)
REF = ref_for("c1", "us-east-1", account="123456789012")  # the account FakeClient's ARNs name


def _one_line(exc: HyperpodSchedulerError) -> None:
    text = str(exc)
    assert text.strip(), "an error without a message"
    assert "Traceback" not in text


# ---- schedule expressions ------------------------------------------------------------------------------

TOKENS = [
    "Mon", "Fri", "Sun", "Mon-Fri", "Fri-Mon", "Mon,Wed", "08:00", "18:00", "24:00", "00:00", "25:61", "8:0",
    "08:00-18:00", "22:00-06:00", "09:00-09:00", "UTC", "Europe/Berlin", "Mars/Olympus", "utc", "always",
    "never", ",", "-", "/", "2026-12-24T00:00+01:00", "2026-12-27T00:00Z", "2026-02-30T00:00Z", "office",
    "cron(0 8 * * 1-5)", "*", "@", "\u00e9", "\n", "",
]  # fmt: skip
expressions = st.one_of(
    st.lists(st.sampled_from(TOKENS), max_size=6).map(" ".join),
    st.lists(st.sampled_from(TOKENS), max_size=6).map("".join),
    st.text(max_size=40),
)


@FUZZ
@given(expressions)
def test_schedule_expressions_parse_or_say_why(text: str) -> None:
    try:
        schedule = resolve(text, {})
    except HyperpodSchedulerError as exc:
        _one_line(exc)
        return
    assert schedule.state_at(T0) in ("running", "stopped")
    schedule.transitions(T0, T0 + timedelta(days=8))


# ---- the YAML config ----------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=True),
    st.sampled_from(TOKENS),
    st.text(max_size=8),
)
KEYS = ["state", "defaults", "schedules", "targets", "region", "profile", "schedule", "enforced", "clusters",
        "tag_selector", "name", "poll_seconds", "settle_timeout_minutes", "office", "bogus"]  # fmt: skip
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)),
    max_leaves=12,
)
GOOD_CONFIG: dict[str, Any] = {
    "defaults": {"schedule": "office", "poll_seconds": 5},
    "schedules": {"office": "Mon-Fri 08:00-18:00 UTC"},
    "targets": [{"region": "us-east-1", "clusters": ["c1", {"name": "c2", "schedule": "always"}]}],
}


def _mutate(base: Any, path: list[int], value: Any) -> Any:
    """Replace one node of ``base`` (chosen by ``path``) with ``value``."""
    data = copy.deepcopy(base)
    node: Any = data
    parent: Any = None
    key: Any = None
    for step in path:
        if isinstance(node, dict) and node:
            parent, key = node, sorted(node, key=str)[step % len(node)]
        elif isinstance(node, list) and node:
            parent, key = node, step % len(node)
        else:
            break
        node = parent[key]
    if parent is None:
        return value
    parent[key] = value
    return data


def _config_ok_or_usage_error(data: Any) -> None:
    try:
        config = parse_config(data, "fuzz.yaml")
        Fleet(config, lambda _ref: None).governed()  # type: ignore[arg-type,return-value]
    except HyperpodSchedulerError as exc:
        _one_line(exc)


@FUZZ
@given(trees)
def test_config_trees_load_or_say_why(data: Any) -> None:
    _config_ok_or_usage_error(data)


@FUZZ
@given(st.lists(st.integers(0, 20), max_size=5), trees)
def test_a_good_config_with_one_bad_node_loads_or_says_why(path: list[int], value: Any) -> None:
    _config_ok_or_usage_error(_mutate(GOOD_CONFIG, path, value))


@FUZZ
@given(st.text(max_size=80))
def test_config_text_loads_or_says_why(text: str) -> None:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return  # load_config turns this into "invalid YAML" (tests/engine cover the file path)
    _config_ok_or_usage_error(data)


# ---- cluster specs and CreateCluster JSON -------------------------------------------------------------

GOOD_SPEC = yaml.safe_load(
    """
name: fuzz
orchestrator: slurm
defaults: {execution_role: "arn:aws:iam::123456789012:role/x"}
instance_groups:
  - {name: controller, type: ml.m5.xlarge, count: 1, slurm: controller}
  - {name: gpu, type: ml.g5.xlarge, count: 2, slurm: compute}
"""
)


def _spec_ok_or_spec_error(data: Any) -> None:
    try:
        check_spec(spec_from_dict(data, "fuzz.yaml"))
    except HyperpodSchedulerError as exc:
        _one_line(exc)


@FUZZ
@given(st.lists(st.integers(0, 20), max_size=5), trees)
def test_cluster_spec_with_one_bad_node_checks_or_says_why(path: list[int], value: Any) -> None:
    _spec_ok_or_spec_error(_mutate(GOOD_SPEC, path, value))


@FUZZ
@given(st.text(max_size=80))
def test_cluster_spec_text_parses_or_says_why(text: str) -> None:
    try:
        _spec_ok_or_spec_error(parse_yaml(text, "fuzz.yaml"))
    except HyperpodSchedulerError as exc:
        _one_line(exc)


@FUZZ
@given(st.lists(st.integers(0, 30), max_size=6), trees)
def test_create_cluster_json_with_one_bad_node_is_reported(path: list[int], value: Any) -> None:
    request = _mutate(three_tier_request("fuzz"), path, value)
    if not isinstance(request, dict):
        return  # the loader only hands mappings to check_request
    report = check_request(request)  # problems are data: no exception for a bad request
    for problem in report.problems:
        assert problem.field and problem.message


# ---- malformed DescribeCluster answers ----------------------------------------------------------------


def _answer(status: str = "InService", stopped: bool = False) -> dict[str, Any]:
    n = (lambda c: 0) if stopped else (lambda c: c)
    return {
        "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghij12",
        "ClusterName": "c1",
        "ClusterStatus": status,
        "InstanceGroups": [
            group("controller", n(1), node_type="Controller", itype="ml.m5.xlarge"),
            group("dev", n(2), tier="ami+extension"),
            group("train", n(3), tier="custom", itype="ml.trn1.32xlarge"),
        ],
    }


RECORDED = {"controller": 1, "dev": 2, "train": 3}
JUNK = st.one_of(
    st.none(), st.integers(-3, 3), st.text(max_size=6), st.sampled_from(["Hibernating", "InService", "Updating", ""]),
    st.just([]), st.just({}), st.floats(allow_nan=True),
)  # fmt: skip


class FakeClient:
    """Answers DescribeCluster with a (mutated) answer; accepts any UpdateCluster and keeps it."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.updates: list[dict[str, Any]] = []

    def describe_cluster(self, **_: Any) -> Any:
        return copy.deepcopy(self.answer)

    def update_cluster(self, **request: Any) -> dict[str, Any]:
        self.updates.append(request)
        return {"ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghij12"}


def _stopped_record() -> ClusterRecord:
    sizes = {n: GroupSize(count=c, min_count=None, instance_type=None) for n, c in RECORDED.items()}
    snap = Snapshot(taken_at=T0 - timedelta(hours=2), sizes=sizes, transition_id="stop@x", reason="stop")
    return ClusterRecord.new(REF.key, T0).evolve(
        snapshot=snap, applied_state="stopped", applied_transition_at=T0 - timedelta(hours=2)
    )


def _break(answer: dict[str, Any], where: int, how: str, junk: Any) -> Any:
    groups = answer["InstanceGroups"]
    g = groups[where % len(groups)]
    if how == "drop-top":
        answer.pop(sorted(answer)[where % len(answer)])
    elif how == "drop-group-field":
        g.pop(sorted(g)[where % len(g)])
    elif how == "junk-top":
        answer[sorted(answer)[where % len(answer)]] = junk
    elif how == "junk-group-field":
        g[sorted(g)[where % len(g)]] = junk
    elif how == "vanished-group":
        groups.remove(g)
    elif how == "unknown-field":
        g["SomethingNew"] = junk
        answer["AlsoNew"] = junk
    return answer


RESULT_KINDS = {"skip", "noop", "sent", "error", "quiet", "in-progress", "settled", "failed"}


@FUZZ
@given(
    st.sampled_from(["stop", "start"]),
    st.integers(0, 50),
    st.sampled_from(
        ["drop-top", "drop-group-field", "junk-top", "junk-group-field", "vanished-group", "unknown-field"]
    ),
    JUNK,
)
def test_malformed_answers_give_an_error_or_skip_and_keep_sizes(action: str, where: int, how: str, junk: Any) -> None:
    store = MemoryStore()
    before = None
    if action == "start":
        before = store.put(_stopped_record(), expected_version=None)
    answer = _break(_answer(stopped=action == "start"), where, how, junk)
    client = FakeClient(answer)
    engine = Engine(store, lambda _r: client, lambda: T0)  # type: ignore[arg-type,return-value]
    desired = "stopped" if action == "stop" else "running"
    sched = ScheduleState(desired=desired, last_transition_at=T0 - timedelta(minutes=5))  # type: ignore[arg-type]
    result = turn(engine, REF, sched)  # never raises: a bad answer is an error result
    assert result.kind in RESULT_KINDS
    assert "\n" not in result.message and "Traceback" not in result.message
    after = store.get(REF.key)
    if before is not None:
        assert after is not None and after.snapshot == before.snapshot, "a recorded size was lost"
    if client.updates and action == "stop":
        assert after is not None and after.snapshot is not None
        zeroed = {g["InstanceGroupName"] for g in client.updates[0]["InstanceGroups"]}
        assert zeroed <= set(after.snapshot.sizes), "a group was zeroed without its size recorded"
        for name in zeroed:
            assert after.snapshot.sizes[name].count >= 0
    if client.updates and action == "start":
        seen = {g.get("InstanceGroupName"): g.get("TargetCount") for g in answer["InstanceGroups"]}
        for g in client.updates[0]["InstanceGroups"]:
            name = g["InstanceGroupName"]
            # Restored to its recorded size, or re-sent as it stands (a group with no recorded size).
            assert g["InstanceCount"] in (RECORDED.get(name), seen.get(name)), (
                f"{name}: started to a size never recorded"
            )


def test_tick_goes_on_past_an_answer_it_cannot_send() -> None:
    """A group without ExecutionRole cannot be re-sent: that cluster is an error, the next one still stops."""
    broken = _answer()
    del broken["InstanceGroups"][1]["ExecutionRole"]
    clients = {"c1": FakeClient(broken), "c2": FakeClient({**_answer(), "ClusterName": "c2"})}
    engine = Engine(MemoryStore(), lambda r: clients[r.name], lambda: T0)  # type: ignore[arg-type,return-value]
    office = resolve("Mon-Fri 08:00-18:00 UTC", {})
    governed = [Governed(ref_for(n, "us-east-1"), "office", office, False) for n in ("c1", "c2")]
    results = tick(engine, governed, T0)
    assert [r.kind for r in results] == ["error", "sent"]
    assert clients["c2"].updates and not clients["c1"].updates
