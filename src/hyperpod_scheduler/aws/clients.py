"""AWS clients built the standard way, so the credential/region chain and AWS_ENDPOINT_URL_* work.

No private endpoint flags: pointing a client at the emulator is done with the standard
``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_<SERVICE>`` variables (or the config file's ``services``
sections), which botocore honours itself.

The clients come from botocore sessions, not boto3's: boto3 adds resources and S3 transfer methods we
never use, and importing it (s3transfer with it) cost a tenth of a second on every command that builds
a client. ``session()`` still hands out a boto3 session for the code that wants one (deploy/).

One rule on top, for every other service (S3, FSx, Pricing, SNS, STS, ...): **loopback stays
loopback**. While SageMaker resolves to a loopback endpoint (the emulator), a service that would go
to AWS's own endpoint is sent to that loopback endpoint too. Clusters that live in an emulator have
no lifecycle bucket or file system in a real account; asking AWS about them could only fail slowly,
or leak their names. A service with its own configured endpoint keeps it.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import botocore.session
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.exceptions import ProfileNotFound
from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url
from botocore.validate import ParamValidationDecorator, ParamValidator, ValidationErrors

from hyperpod_scheduler.aws import answers, deadlines
from hyperpod_scheduler.aws.model import checked_already, share_models
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import args, redact
from hyperpod_scheduler.inputs.text import quoted
from hyperpod_scheduler.inputs.urls import loopback_url

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

# What AWS's own tools fall back to when no region is configured anywhere.
FALLBACK_REGION = "us-east-1"
_REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE")


def default_region(profile: str | None = None) -> str:
    """The region the standard AWS chain gives (AWS_REGION, AWS_DEFAULT_REGION, the profile's config
    file), else us-east-1. A cluster named without a region is looked for there, like the AWS CLI does."""
    return _chain_region(profile, tuple(os.environ.get(k) for k in _REGION_ENV))


@functools.lru_cache(maxsize=64)
def _chain_region(profile: str | None, env: tuple[str | None, ...]) -> str:
    # ``env`` is only the cache key: the chain itself reads the environment and config files. AWS_REGION
    # first, as the AWS CLI and the other SDKs read it: botocore reads only AWS_DEFAULT_REGION.
    from_env = _aws_region_env()
    if from_env is not None:
        return from_env
    try:
        region = botocore.session.Session(profile=profile).get_config_variable("region")
    except ProfileNotFound:
        raise UsageError(f"profile {profile!r}: not found in the AWS config files") from None
    where = "$AWS_DEFAULT_REGION or the profile's region" if profile is None else f"profile {profile!r}'s region"
    # Checked before it keys a record, as --region and the config's are: 'US-EAST-1' from the environment
    # made a second record of one cluster, 'us-east-1/x' botocore's traceback.
    return str(args.region(str(region), where)) if region else FALLBACK_REGION


def _aws_region_env() -> str | None:
    """$AWS_REGION, checked, or None when it is not set: botocore and boto3 read only AWS_DEFAULT_REGION."""
    value = os.environ.get("AWS_REGION")
    return args.region(value, "$AWS_REGION") if value else None


# Adaptive retry backs off on ThrottlingException and 5xx without us writing a retry loop; mutating
# calls are kept from blind retries by ``no_blind_retries`` (applied by ``sagemaker_client`` and the engine).
RETRY_CONFIG = Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=5, read_timeout=30)

# Calls that change a cluster. A retry is only safe when the first attempt surely did not apply.
MUTATING_OPERATIONS = (
    "CreateCluster",
    "UpdateCluster",
    "DeleteCluster",
    "UpdateClusterSoftware",
    "BatchAddClusterNodes",
    "BatchDeleteClusterNodes",
)
_MARK = "_hyperpod_scheduler_no_blind_retries"


def _veto_unknown_outcomes(response: Any = None, caught_exception: Any = None, **_: Any) -> bool | None:
    """A ``needs-retry`` handler for mutating calls: False (do not retry) when the first attempt may
    have been applied; None (let botocore's own retry policy decide) when it surely was not.

    A connection never made (refused, connect timeout) and a refusal such as ThrottlingException did
    not reach or change the cluster, so they may be retried. A 5xx, a read timeout or a connection
    closed mid-answer may follow an applied update: the caller decides from the cluster's target counts.
    """
    if caught_exception is not None:
        return None if isinstance(caught_exception, BotoConnectionError) else False
    if response is not None:
        http = response[0]
        if getattr(http, "status_code", 0) >= 500:
            return False
    return None


def no_blind_retries(client: Any) -> Any:
    """Register the veto on ``client`` (any boto3 SageMaker client; once per client) and return it.

    botocore calls the handlers of the most specific event first and takes the first answer that is not
    None, so a False here wins over the retry handler of standard and adaptive modes alike."""
    meta = getattr(client, "meta", None)
    if meta is None or not hasattr(meta, "events") or getattr(meta, _MARK, False):
        return client  # a test double without botocore's event system has no retries to veto
    service = meta.service_model.service_id.hyphenize()
    for operation in MUTATING_OPERATIONS:
        meta.events.register_first(
            f"needs-retry.{service}.{operation}",
            _veto_unknown_outcomes,
            unique_id=f"hyperpod-scheduler-no-blind-retry-{operation}",
        )
    setattr(meta, _MARK, True)
    return client


class _CheckedOnce(ParamValidator):
    """botocore's own validation of a call's parameters, except for the request ``validate_request`` has
    just passed on this thread (each UpdateCluster: ``engine.update_request`` validates it in full before
    its intent is written): the same ParamValidator over the same dict a second time found nothing new."""

    def validate(self, params: Any, shape: Any) -> ValidationErrors:
        if checked_already(shape, params):
            return ValidationErrors()
        report: ValidationErrors = super().validate(params, shape)
        return report


def _validated_once(client: Any) -> Any:
    serializer = getattr(client, "_serializer", None)
    # Not public API: where a botocore release moves it, botocore validates every call again (time only).
    if isinstance(serializer, ParamValidationDecorator) and hasattr(serializer, "_param_validator"):
        serializer._param_validator = _CheckedOnce()
    return client


def session(profile: str | None = None, region: str | None = None) -> boto3.Session:
    # Every client of this session gets the call deadlines and the answer checks (aws.deadlines), and
    # reads the process's shared service models (aws.model), not a copy of its own.
    import boto3  # imported here: only the callers that want a boto3 session pay for it

    check_endpoint_env(_aws_env())

    # AWS_REGION first, as every client here takes it (boto3 reads only AWS_DEFAULT_REGION, then the
    # profile); no us-east-1 fallback here: a state store with no region says so rather than guess one.
    return boto3.Session(
        profile_name=profile,
        region_name=region or _aws_region_env(),
        botocore_session=share_models(deadlines.BoundedBotocoreSession()),
    )


def sagemaker_client(
    profile: str | None = None, region: str | None = None, endpoint_url: str | None = None, **kw: Any
) -> SageMakerClient:
    # The shared session: its loader has the models read already (a new session reads them again).
    sess = _cached_session(profile, _aws_env())
    config = kw.pop("config", RETRY_CONFIG)
    where = region or default_region(profile)
    client = sess.create_client("sagemaker", region_name=where, endpoint_url=endpoint_url, config=config, **kw)
    # Answers checked before botocore parses them (unknown members kept in sight); mutating calls
    # never retried blind; an update validated as it was built not validated again as it is sent.
    result: SageMakerClient = no_blind_retries(answers.watch(_validated_once(client)))
    return result


def s3_client(profile: str | None = None, region: str | None = None) -> S3Client:
    client: S3Client = aws_client("s3", profile, region)
    return client


# Hosts of AWS's own endpoints: a client resolving to one of these had no endpoint configured for it.
_AWS_HOSTS = (".amazonaws.com", ".amazonaws.com.cn", ".api.aws", ".on.aws")


def is_loopback(url: str | None) -> bool:
    """Whether ``url`` points at this machine (127.0.0.0/8, ::1, localhost), its host compared as an
    address (inputs/urls.py: ``bucket.localhost`` or ``localhost.example.com`` may be anywhere DNS says)."""
    return loopback_url(url)


def _is_aws_default(url: str | None) -> bool:
    host = urlsplit(url or "").hostname or ""
    return host.endswith(_AWS_HOSTS)


def _aws_env() -> tuple[tuple[str, str], ...]:
    """The AWS_* environment: part of every cache key below, so a changed variable means a new session."""
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))


@functools.lru_cache(maxsize=32)
def _cached_session(profile: str | None, env: tuple[tuple[str, str], ...]) -> botocore.session.Session:
    # One session per profile (credentials and config are per profile); every session reads the
    # process's shared service models (aws.model), so a new profile does not decode them again.
    # Bounded: every client of it gets the call deadlines and the answer checks (aws.deadlines).
    check_endpoint_env(env)
    return share_models(deadlines.BoundedBotocoreSession(profile=profile))


def check_endpoint_env(env: Iterable[tuple[str, str]]) -> None:
    """Refuse an ``AWS_ENDPOINT_URL``/``AWS_ENDPOINT_URL_<SERVICE>`` botocore could not use, in one line that
    shows the value without its user name, password or query (botocore's own ValueError echoes it whole,
    password and all, and ended the command as an internal error)."""
    for name, value in env:
        if not (name == "AWS_ENDPOINT_URL" or name.startswith("AWS_ENDPOINT_URL_")) or not value:
            continue  # botocore ignores an empty one
        problem = endpoint_problem(value)
        if problem is not None:
            raise UsageError(f"${name}: {quoted(redact.endpoint(value))} {problem}")


def endpoint_problem(url: str) -> str | None:
    """Why ``url`` is not an endpoint botocore can call, or None."""
    if _UNPRINTABLE.search(url):
        return "contains a space, a control character or bytes that are not UTF-8"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- parsing the port is the check
    except ValueError:
        return "is not a URL (e.g. http://127.0.0.1:8000 or https://sagemaker.us-east-1.amazonaws.com)"
    if parts.scheme.lower() not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.hostname:
        return "names no host"
    if parts.username is not None or parts.password is not None:
        return "must not carry a user name or password (AWS calls are signed; credentials come from the AWS chain)"
    if not (is_valid_endpoint_url(url) or is_valid_ipv6_endpoint_url(url)):
        return "is not a valid endpoint URL (a host name, an IPv4 or a bracketed IPv6 address)"
    return None


_UNPRINTABLE = re.compile("[\x00-\x20\x7f-\x9f\ud800-\udfff]")


def _client(service: str, profile: str | None, region: str | None, endpoint: str | None = None) -> Any:
    sess = _cached_session(profile, _aws_env())
    where = region or default_region(profile)  # the chain's region, AWS_REGION first (botocore skips it)
    return sess.create_client(service, region_name=where, endpoint_url=endpoint, config=RETRY_CONFIG)


def loopback_endpoint(profile: str | None = None, region: str | None = None) -> str | None:
    """SageMaker's endpoint when it is on loopback (an emulator), else None."""
    return _loopback_endpoint(profile, region or default_region(profile), _aws_env())


# Only the endpoint is read from the probe client: unsigned, it resolves no credentials. A client built
# the usual way walks the credential chain, and without credentials that asks the instance metadata
# service (a wait of a second or more off EC2, a call off loopback while an emulator is in use).
_PROBE_CONFIG = Config(signature_version=UNSIGNED)


@functools.lru_cache(maxsize=64)
def _loopback_endpoint(profile: str | None, region: str, env: tuple[tuple[str, str], ...]) -> str | None:
    # ``env`` is only the cache key: the endpoint chain reads the environment and config files itself.
    probe = _cached_session(profile, env).create_client("sagemaker", region_name=region, config=_PROBE_CONFIG)
    url = probe.meta.endpoint_url
    return url if is_loopback(url) else None


def aws_client(service: str, profile: str | None = None, region: str | None = None) -> Any:
    """A client for any service, the standard way, with the loopback rule of this module's doc."""
    made = _client(service, profile, region)
    if not _is_aws_default(made.meta.endpoint_url):
        return made
    local = loopback_endpoint(profile, region)
    return made if local is None else _client(service, profile, region, local)


@functools.lru_cache(maxsize=8)
def _throwaway_session() -> botocore.session.Session:
    made = share_models(deadlines.BoundedBotocoreSession())
    made.set_credentials("emulator", "emulator")
    return made


def plain_client(service: str, endpoint_url: str, region: str = FALLBACK_REGION) -> Any:
    """A client with throwaway credentials against ``endpoint_url`` (the demo's own emulator), on the
    process's shared models: the demo's SageMaker client read its own copy of the 14 MiB model."""
    made = share_models(botocore.session.Session())
    made.set_credentials("demo", "demo")
    return made.create_client(service, region_name=region, endpoint_url=endpoint_url)


@dataclass(frozen=True)
class AwsClients:
    """Where a face's AWS clients come from: the standard chain (with the loopback rule) by default, or
    one fixed endpoint and throwaway credentials (the demo's embedded emulator). Each instance reuses
    its clients per service, profile and region (boto3 clients are thread-safe), so one report builds
    each client once; a new command or dashboard gets new ones."""

    endpoint_url: str | None = None
    _made: dict[tuple[str, str | None, str | None], Any] = field(default_factory=dict, compare=False, repr=False)

    def client(self, service: str, profile: str | None = None, region: str | None = None) -> Any:
        key = (service, profile, region)
        if key not in self._made:
            if self.endpoint_url is None:
                self._made[key] = aws_client(service, profile, region)
            else:
                self._made[key] = _throwaway_session().create_client(
                    service, region_name=region or FALLBACK_REGION, endpoint_url=self.endpoint_url, config=RETRY_CONFIG
                )
        return self._made[key]
