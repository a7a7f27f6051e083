"""Where the fleet config lives in AWS: an item in the state table, or an S3 object.

Locations: ``dynamodb://TABLE[?region=R]`` (item ``pk=config, sk=fleet``) or ``s3://BUCKET/KEY``.
The YAML text is stored as written, comments included, so ``config pull`` gives back what was pushed.
A push is validated first: a broken config never reaches the workers.

Every push also counts up the config's *version* (the item's ``version`` attribute; the object's
``hps-config-version`` metadata). Each job carries the version it was built from, so a message built
from an older config than the current one can be recognised and superseded (see ``deploy/markers``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.deploy.fleet_config import FleetConfig, parse_fleet_yaml
from hyperpod_scheduler.errors import AwsError, UsageError
from hyperpod_scheduler.inputs import bounded

CONFIG_PK = "config"
CONFIG_SK = "fleet"
VERSION_ATTRIBUTE = "version"
PUSHED_AT_ATTRIBUTE = "pushed_at"  # ISO instant of the push: what `status` says a pause is on since
VERSION_METADATA = "hps-config-version"  # S3 user metadata (sent as x-amz-meta-hps-config-version)

ClientFactory = Callable[[str, str | None], Any]  # (service, region) -> boto3 client


def boto3_client(service: str, region: str | None) -> Any:
    from hyperpod_scheduler.aws.clients import session  # bounded: deadlines and answer checks

    return session(region=region).client(service)  # type: ignore[call-overload]


@dataclass(frozen=True)
class Location:
    scheme: str  # dynamodb | s3
    name: str  # table or bucket
    key: str = ""  # S3 object key
    region: str | None = None

    def __str__(self) -> str:
        if self.scheme == "s3":
            return f"s3://{self.name}/{self.key}"
        return f"dynamodb://{self.name}" + (f"?region={self.region}" if self.region else "")


def parse_location(text: str) -> Location:
    parts = urlsplit(text)
    region = parse_qs(parts.query).get("region", [None])[-1]
    if parts.scheme == "dynamodb" and parts.netloc:
        return Location("dynamodb", parts.netloc, region=region)
    if parts.scheme == "s3" and parts.netloc and parts.path.strip("/"):
        return Location("s3", parts.netloc, parts.path.lstrip("/"), region=region)
    raise UsageError(f"config location '{text}': use dynamodb://TABLE[?region=R] or s3://BUCKET/KEY")


def read_text(location: Location, client_for: ClientFactory = boto3_client) -> str:
    return read_versioned(location, client_for)[0]


def read_versioned(location: Location, client_for: ClientFactory = boto3_client) -> tuple[str, int]:
    """The stored YAML and its version (0 for a config pushed before versions were counted)."""
    text, version, _ = read_stamped(location, client_for)
    return text, version


def read_stamped(location: Location, client_for: ClientFactory = boto3_client) -> tuple[str, int, datetime | None]:
    """The stored YAML, its version and when it was pushed (None: pushed before pushes were stamped)."""
    try:
        if location.scheme == "s3":
            s3 = client_for("s3", location.region)
            answer = s3.get_object(Bucket=location.name, Key=location.key)
            # Bounded and strict UTF-8, as a file is: an object of other bytes is one line naming it.
            where = f"fleet config {location}"
            text = bounded.decode(bounded.read_stream(answer["Body"], where), where)
            modified = answer.get("LastModified")
            pushed = modified if isinstance(modified, datetime) else None
            return text, _version(answer.get("Metadata", {}).get(VERSION_METADATA)), pushed
        table = client_for("dynamodb", location.region)
        item = table.get_item(
            TableName=location.name,
            Key={"pk": {"S": CONFIG_PK}, "sk": {"S": CONFIG_SK}},
            ConsistentRead=True,
        ).get("Item")
    except ClientError as exc:
        raise _aws_error(location, "read", exc) from None
    except BotoCoreError as exc:
        raise AwsError(f"fleet config {location}: cannot read: {exc}") from None
    if item is None:
        raise UsageError(f"fleet config {location}: nothing stored yet (run `hyperpod-scheduler config push`)")
    return str(item["yaml"]["S"]), _version(item.get(VERSION_ATTRIBUTE, {}).get("N")), _stamp(item)


def _stamp(item: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(item[PUSHED_AT_ATTRIBUTE]["S"]))
    except (KeyError, TypeError, ValueError):
        return None


def _version(text: object) -> int:
    try:
        return max(0, int(str(text)))
    except ValueError:
        return 0


def write_text(
    location: Location,
    text: str,
    client_for: ClientFactory = boto3_client,
    check: Callable[[FleetConfig], None] | None = None,
) -> FleetConfig:
    """Validate ``text`` as a fleet config, then store it; returns the parsed config. A config whose
    messages cannot be sent (one over SQS's size limit) is refused here, not at the next tick, and so
    is one ``check`` refuses (UsageError)."""
    from hyperpod_scheduler.deploy.jobs import jobs_for

    fleet = parse_fleet_yaml(text, "fleet config")
    if check is not None:
        check(fleet)
    for unqueued in jobs_for(fleet, datetime.now(UTC)).unqueued:
        raise UsageError(f"fleet config: {unqueued.why}")
    try:
        if location.scheme == "s3":
            s3 = client_for("s3", location.region)
            version = _s3_version(s3, location) + 1
            s3.put_object(
                Bucket=location.name, Key=location.key, Body=text.encode("utf-8"), ContentType="application/yaml",
                Metadata={VERSION_METADATA: str(version)},
            )  # fmt: skip
        else:
            # One write: the text and the next version together (ADD counts up atomically).
            client_for("dynamodb", location.region).update_item(
                TableName=location.name,
                Key={"pk": {"S": CONFIG_PK}, "sk": {"S": CONFIG_SK}},
                UpdateExpression="SET #y = :y, #p = :p ADD #v :one",
                ExpressionAttributeNames={"#y": "yaml", "#v": VERSION_ATTRIBUTE, "#p": PUSHED_AT_ATTRIBUTE},
                ExpressionAttributeValues={
                    ":y": {"S": text},
                    ":one": {"N": "1"},
                    ":p": {"S": datetime.now(UTC).isoformat()},
                },
            )
    except ClientError as exc:
        raise _aws_error(location, "write", exc) from None
    except BotoCoreError as exc:
        raise AwsError(f"fleet config {location}: cannot write: {exc}") from None
    return fleet


def _s3_version(s3: Any, location: Location) -> int:
    """The stored object's version, 0 if there is none yet (a push is an operator's, one at a time)."""
    try:
        head = s3.head_object(Bucket=location.name, Key=location.key)
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code", "")) in ("404", "NoSuchKey", "NotFound"):
            return 0
        raise
    return _version(head.get("Metadata", {}).get(VERSION_METADATA))


def load(location: Location, client_for: ClientFactory = boto3_client) -> FleetConfig:
    return load_versioned(location, client_for)[0]


def load_versioned(location: Location, client_for: ClientFactory = boto3_client) -> tuple[FleetConfig, int]:
    text, version = read_versioned(location, client_for)
    return parse_fleet_yaml(text, f"fleet config {location}"), version


def _aws_error(location: Location, verb: str, exc: ClientError) -> AwsError:
    err = exc.response.get("Error", {})
    code = err.get("Code", "Error")
    if code in ("NoSuchKey", "404"):
        return AwsError(f"fleet config {location}: no such object (run `hyperpod-scheduler config push`)")
    return AwsError(f"fleet config {location}: cannot {verb}: {code}: {err.get('Message', '')}")
