"""Where the HyperPod AMI releases a group may move to come from (``engine.images``).

No HyperPod API lists the AMI releases or when each was published. While SageMaker resolves to a
loopback endpoint (the emulator), its catalogue is read from the emulator's control API
(``GET /_emulator/images``); anywhere else no release is known, so no group changes release (a
release refused after a failed first morning is still rolled back). docs/scheduler.md, "AMI releases".
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import datetime

from hyperpod_scheduler.aws.clients import is_loopback, loopback_endpoint
from hyperpod_scheduler.engine.images import Release
from hyperpod_scheduler.engine.ref import ClusterRef
from hyperpod_scheduler.errors import HyperpodSchedulerError

# Built-in releases carry no publication moment: they are old enough for any settling age.
_LONG_AGO = datetime.fromisoformat("2000-01-01T00:00:00+00:00")


def releases_for(ref: ClusterRef) -> Sequence[Release]:
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
