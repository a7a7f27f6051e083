"""The fleet's effective pause as the orchestrator last saw it: one item in the state table.

The pause switch has two settings: the hub stack's ``SchedulingActive`` parameter (which only the
Lambda functions see, in their environment) and the fleet config's ``hub.paused`` (in the config
item). An operator on a laptop reads the table, not the stack, so the orchestrator records which of
them held at its tick in ``pk=pause, sk=fleet``, with the instant it first saw that: one GetItem a
tick, and a PutItem only when the set of settings changes (a quiet fleet writes nothing more).

The record is the orchestrator's word: it is as fresh as its last tick that changed it, so a face says
"recorded by the orchestrator" beside it, and reads ``hub.paused`` from the config item itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.errors import AwsError

PK = "pause"
SK = "fleet"
Setting = Literal["SchedulingActive=No", "hub.paused"]
STACK: Setting = "SchedulingActive=No"
CONFIG: Setting = "hub.paused"
_KNOWN: tuple[Setting, ...] = (STACK, CONFIG)


@dataclass(frozen=True)
class Recorded:
    """Which pause settings held (empty: scheduling active) and since when the orchestrator saw them."""

    settings: tuple[Setting, ...]
    since: datetime

    @property
    def by_stack(self) -> bool:
        return STACK in self.settings


def _key() -> dict[str, Any]:
    return {"pk": {"S": PK}, "sk": {"S": SK}}


def read(client: Any, table: str) -> Recorded | None:
    """The record, or None when no orchestrator has recorded a pause yet (one that never paused
    writes none). An item of another shape is treated as absent: it is display, never acted on."""
    try:
        item = client.get_item(TableName=table, Key=_key(), ConsistentRead=True).get("Item")
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise AwsError(
            f"pause record in {table}: cannot read: {err.get('Code', 'Error')}: {err.get('Message', '')}"
        ) from None
    except BotoCoreError as exc:
        raise AwsError(f"pause record in {table}: cannot read: {exc}") from None
    if item is None:
        return None
    try:
        named = [str(v["S"]) for v in item["settings"]["L"]]
        since = datetime.fromisoformat(str(item["since"]["S"]))
    except (KeyError, TypeError, ValueError):
        return None
    return Recorded(tuple(s for s in _KNOWN if s in named), since)


def record(client: Any, table: str, settings: tuple[Setting, ...], now: datetime) -> Recorded:
    """Record ``settings`` unless the table already says so; returns what the table says after."""
    settings = tuple(s for s in _KNOWN if s in settings)
    held = read(client, table)
    if held is not None and held.settings == settings:
        return held
    if held is None and not settings:
        return Recorded((), now)  # never paused: nothing to record
    try:
        client.put_item(
            TableName=table,
            Item={**_key(), "settings": {"L": [{"S": s} for s in settings]}, "since": {"S": now.isoformat()}},
        )
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise AwsError(
            f"pause record in {table}: cannot write: {err.get('Code', 'Error')}: {err.get('Message', '')}"
        ) from None
    except BotoCoreError as exc:
        raise AwsError(f"pause record in {table}: cannot write: {exc}") from None
    return Recorded(settings, now)
