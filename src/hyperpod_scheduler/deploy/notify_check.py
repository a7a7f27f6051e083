"""``config push --hub-stack``: a fleet's SNS notifications must go to the hub's own alarm topic.

The worker's role may publish only to the hub's ``AlarmTopic``; a config naming another topic would
be accepted and every notification would end as one WARNING line in the worker's log (AccessDenied).
So the push reads the hub stack's ``AlarmTopicArn`` output and refuses any other topic.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.deploy.fleet_config import FleetConfig
from hyperpod_scheduler.errors import AwsError, UsageError

OUTPUT = "AlarmTopicArn"


def hub_topic(cloudformation: Any, stack: str) -> str:
    try:
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise AwsError(
            f"--hub-stack {stack}: cannot read: {err.get('Code', 'Error')}: {err.get('Message', '')}"
        ) from None
    except BotoCoreError as exc:
        raise AwsError(f"--hub-stack {stack}: cannot read: {exc}") from None
    outputs = {o.get("OutputKey"): o.get("OutputValue") for s in stacks for o in s.get("Outputs", [])}
    topic = outputs.get(OUTPUT)
    if not topic:
        raise UsageError(f"--hub-stack {stack}: no {OUTPUT} output (is it a hyperpod-scheduler hub stack?)")
    return str(topic)


def check_topic(hub: str | None, fleet: FleetConfig) -> None:
    """Refuse an SNS topic the workers may not publish to (nothing to compare against: no check)."""
    topic = fleet.notifications.sns_topic_arn
    if hub is None or topic is None or topic == hub:
        return
    raise UsageError(
        f"fleet config: notifications.sns_topic_arn: '{topic}' is not the hub's alarm topic {hub}; the "
        "workers may publish only there (subscribe other endpoints to that topic)"
    )
