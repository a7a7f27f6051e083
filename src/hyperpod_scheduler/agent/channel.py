"""Channels both sides can reach: the state store, or an S3 prefix.

Store channel: records under ``agent/<cluster key>/intent`` and ``.../verdict`` in any StateStore, the
message kept in the record's ``message`` field (records keep fields they do not know). S3 channel:
objects ``<prefix>/<cluster key>/intent.json`` and ``verdict.json``. The scheduler writes intents and
reads verdicts; the agent does the reverse; neither ever writes the other's object.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import ValidationError

from hyperpod_scheduler.agent.messages import AgentVerdict, Intent
from hyperpod_scheduler.aws.pages import Pages
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError
from hyperpod_scheduler.inputs import bounded
from hyperpod_scheduler.store import ClusterRecord, StateStore, open_store, update

KEY_PREFIX = "agent/"


class ChannelError(HyperpodSchedulerError):
    """A message on the channel could not be read or written."""


class Channel(Protocol):
    def post_intent(self, intent: Intent) -> None: ...

    def read_intent(self, cluster: str) -> Intent | None: ...

    def post_verdict(self, cluster: str, verdict: AgentVerdict) -> None: ...

    def read_verdict(self, cluster: str) -> AgentVerdict | None: ...

    def clusters(self) -> list[str]:
        """The clusters that have an intent on the channel."""
        ...


def _key(cluster: str, kind: str) -> str:
    return f"{KEY_PREFIX}{cluster}/{kind}"


def _parse(model: type[Intent] | type[AgentVerdict], data: Any, where: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ChannelError(f"{where}: {'.'.join(map(str, err['loc'])) or 'body'}: {err['msg']}") from None


class StoreChannel:
    def __init__(self, store: StateStore) -> None:
        self.store = store

    def __repr__(self) -> str:
        return f"StoreChannel({self.store!r})"

    def _put(self, key: str, message: Intent | AgentVerdict) -> None:
        body = message.model_dump(mode="json")
        now = datetime.now(UTC)

        def write(current: ClusterRecord | None) -> ClusterRecord:
            base = current or ClusterRecord.new(key, now)
            return base.evolve(message=body, updated_at=now)

        update(self.store, key, write)

    def _get(self, key: str, model: type[Intent] | type[AgentVerdict]) -> Any:
        record = self.store.get(key)
        body = None if record is None else (record.model_extra or {}).get("message")
        return None if body is None else _parse(model, body, key)

    def post_intent(self, intent: Intent) -> None:
        self._put(_key(intent.cluster, "intent"), intent)

    def read_intent(self, cluster: str) -> Intent | None:
        found: Intent | None = self._get(_key(cluster, "intent"), Intent)
        return found

    def post_verdict(self, cluster: str, verdict: AgentVerdict) -> None:
        self._put(_key(cluster, "verdict"), verdict)

    def read_verdict(self, cluster: str) -> AgentVerdict | None:
        found: AgentVerdict | None = self._get(_key(cluster, "verdict"), AgentVerdict)
        return found

    def clusters(self) -> list[str]:
        suffix = "/intent"
        return [
            k[len(KEY_PREFIX) : -len(suffix)]
            for k in self.store.list_keys()
            if k.startswith(KEY_PREFIX) and k.endswith(suffix)
        ]


class S3Channel:
    def __init__(self, bucket: str, prefix: str, client: Any) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = client

    def __repr__(self) -> str:
        return f"S3Channel('s3://{self.bucket}/{self.prefix}')"

    def _object(self, cluster: str, kind: str) -> str:
        return f"{self.prefix}/{cluster}/{kind}.json" if self.prefix else f"{cluster}/{kind}.json"

    def _put(self, key: str, message: Intent | AgentVerdict) -> None:
        try:
            self.client.put_object(
                Bucket=self.bucket, Key=key, Body=message.model_dump_json().encode(), ContentType="application/json"
            )
        except Exception as exc:
            raise ChannelError(f"s3://{self.bucket}/{key}: cannot write: {exc}") from None

    def _get(self, key: str, model: type[Intent] | type[AgentVerdict]) -> Any:
        try:
            body = bounded.read_stream(self.client.get_object(Bucket=self.bucket, Key=key)["Body"], key)
        except self.client.exceptions.NoSuchKey:
            return None
        except Exception as exc:
            raise ChannelError(f"s3://{self.bucket}/{key}: cannot read: {exc}") from None
        try:
            data = bounded.load_json(body, f"s3://{self.bucket}/{key}")
        except bounded.BadDocument as exc:
            raise ChannelError(str(exc)) from None
        return _parse(model, data, f"s3://{self.bucket}/{key}")

    def post_intent(self, intent: Intent) -> None:
        self._put(self._object(intent.cluster, "intent"), intent)

    def read_intent(self, cluster: str) -> Intent | None:
        found: Intent | None = self._get(self._object(cluster, "intent"), Intent)
        return found

    def post_verdict(self, cluster: str, verdict: AgentVerdict) -> None:
        self._put(self._object(cluster, "verdict"), verdict)

    def read_verdict(self, cluster: str) -> AgentVerdict | None:
        found: AgentVerdict | None = self._get(self._object(cluster, "verdict"), AgentVerdict)
        return found

    def clusters(self) -> list[str]:
        base = f"{self.prefix}/" if self.prefix else ""
        out = []
        listed = Pages(
            lambda **kw: self.client.list_objects_v2(**kw),
            "ListObjectsV2",
            "Contents",
            token="ContinuationToken",
            next_token="NextContinuationToken",
            Bucket=self.bucket,
            Prefix=base,
        )
        try:
            for obj in listed:
                key = obj["Key"]
                if key.endswith("/intent.json"):
                    out.append(key[len(base) : -len("/intent.json")])
        except Exception as exc:
            raise ChannelError(f"s3://{self.bucket}/{base}: cannot list: {exc}") from None
        if listed.cut:  # a partial list of clusters is not one to act on
            raise ChannelError(f"s3://{self.bucket}/{base}: cannot list: {listed.cut}")
        return sorted(out)


def open_channel(url: str, s3_client: Any = None) -> Channel:
    """``s3://bucket/prefix`` -> S3Channel; anything else names a state store (``sqlite:///...``, a path)."""
    if not url:
        raise UsageError("--channel: empty; give s3://bucket/prefix, sqlite:///path or a store path")
    if url.startswith("s3://"):
        bucket, _, prefix = url[5:].partition("/")
        if not bucket:
            raise UsageError(f"--channel: '{url}' names no bucket")
        if s3_client is None:
            from hyperpod_scheduler.aws.clients import session  # bounded: deadlines and answer checks

            s3_client = session().client("s3")
        return S3Channel(bucket, prefix, s3_client)
    return StoreChannel(open_store(url))
