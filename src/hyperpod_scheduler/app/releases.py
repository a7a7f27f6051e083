"""Where the HyperPod AMI releases a group may move to come from (``engine.images``): the release source.

No HyperPod API lists the AMI releases or when each was published (docs/scheduler.md, "Where the
releases come from"). DescribeCluster says per group whether a newer release exists
(``ImageVersionStatus``), never which one nor since when, so the version and its publication moment
must come from elsewhere:

- the config's ``image_releases:`` (version, date, security flag, as AWS's release notes list them):
  when set, it is the one source, for every cluster, on AWS and on the emulator alike;
- otherwise, while SageMaker resolves to a loopback endpoint (the emulator), its catalogue
  (``GET /_emulator/images``);
- otherwise none: no group changes release, and a group whose status says a newer release exists is
  said to be waiting for one to be listed (``engine.images.gaps``), never moved on a guess. A release
  refused after a failed first morning is still rolled back.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_scheduler.aws.clients import is_loopback, loopback_endpoint
from hyperpod_scheduler.engine.images import Release, Releases
from hyperpod_scheduler.engine.ref import ClusterRef
from hyperpod_scheduler.errors import HyperpodSchedulerError

if TYPE_CHECKING:
    from hyperpod_scheduler.config.model import Config, ImageReleaseEntry

# Built-in releases carry no publication moment: they are old enough for any settling age.
_LONG_AGO = datetime.fromisoformat("2000-01-01T00:00:00+00:00")


def release_source(config: Config) -> Releases:
    """The release source the config asks for (the module's docstring says which, in what order)."""
    if config.image_releases:
        listed = listed_releases(config.image_releases)
        return lambda ref: listed
    return releases_for


def listed_releases(entries: Sequence[ImageReleaseEntry]) -> tuple[Release, ...]:
    """The config's ``image_releases`` as releases (the config model has checked each entry)."""
    return tuple(Release(e.version, e.released, e.security) for e in entries)


def releases_for(ref: ClusterRef) -> Sequence[Release]:
    """The emulator's catalogue while the cluster's SageMaker endpoint is a loopback; nothing elsewhere."""
    endpoint = loopback_endpoint(ref.profile, ref.region)
    if endpoint is None or not is_loopback(endpoint):
        return ()
    url = endpoint.rstrip("/") + "/_emulator/images"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:  # loopback only, checked above
            listed = json.loads(answer.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise HyperpodSchedulerError(f"AMI releases: cannot read {url}: {exc}") from exc
    return parse_releases(listed)


def parse_releases(listed: object) -> list[Release]:
    """The catalogue as the emulator's control API answers it; an entry of the wrong shape is skipped."""
    images = listed.get("images") if isinstance(listed, dict) else None
    out: list[Release] = []
    for r in images if isinstance(images, list) else []:
        if not isinstance(r, dict) or not r.get("released") or not isinstance(r.get("version"), str):
            continue
        at = r.get("released_at")
        try:
            published = datetime.fromisoformat(at) if isinstance(at, str) else _LONG_AGO
        except ValueError:
            continue
        out.append(Release(r["version"], published, bool(r.get("security_update"))))
    return out
