"""The pause record's "since" is per setting: the stack's SchedulingActive=No is paused since it was
first seen, whatever hub.paused did after (the record's one "since" moved to each change of either, so
the laptop said "paused by SchedulingActive=No since 14:05" of a stack paused at 10:00)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hyperpod_scheduler.deploy import pause_record
from hyperpod_scheduler.deploy.pause_record import CONFIG, STACK


class Table:
    """A DynamoDB table of one item, enough for GetItem and PutItem."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}

    def get_item(self, TableName: str, Key: dict[str, Any], ConsistentRead: bool) -> dict[str, Any]:
        item = self.items.get((Key["pk"]["S"], Key["sk"]["S"]))
        return {"Item": item} if item is not None else {}

    def put_item(self, TableName: str, Item: dict[str, Any]) -> dict[str, Any]:
        self.items[(Item["pk"]["S"], Item["sk"]["S"])] = Item
        return {}


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, 2, hour, minute, tzinfo=UTC)


def test_the_stacks_pause_keeps_its_since_while_hub_paused_comes_and_goes() -> None:
    table = Table()
    pause_record.record(table, "hps", (STACK,), at(10))
    pause_record.record(table, "hps", (STACK, CONFIG), at(12, 5))
    pause_record.record(table, "hps", (STACK,), at(14, 5))
    held = pause_record.read(table, "hps")
    assert held is not None and held.settings == (STACK,)
    assert held.since_of(STACK) == at(10)


def test_scheduling_active_again_is_since_the_stack_said_so_not_since_hub_paused_changed() -> None:
    table = Table()
    pause_record.record(table, "hps", (STACK,), at(10))
    pause_record.record(table, "hps", (), at(11))  # the stack updated with SchedulingActive=Yes
    pause_record.record(table, "hps", (CONFIG,), at(13))
    held = pause_record.read(table, "hps")
    assert held is not None and not held.by_stack and held.since_of(STACK) == at(11)
    assert held.since_of(CONFIG) == at(13)


def test_a_record_written_before_per_setting_instants_reads_its_one_since() -> None:
    table = Table()
    table.items[("pause", "fleet")] = {
        "pk": {"S": "pause"},
        "sk": {"S": "fleet"},
        "settings": {"L": [{"S": STACK}]},
        "since": {"S": at(9).isoformat()},
    }
    held = pause_record.read(table, "hps")
    assert held is not None and held.since_of(STACK) == at(9)
    pause_record.record(table, "hps", (STACK, CONFIG), at(12))
    after = pause_record.read(table, "hps")
    assert after is not None and after.since_of(STACK) == at(9) and after.since_of(CONFIG) == at(12)
