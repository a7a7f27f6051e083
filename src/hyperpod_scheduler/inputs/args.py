"""Values typed on a command line, a form or a query string, checked before anything uses them.

Each check raises ``UsageError`` naming the argument and the value (cut short, control characters
escaped by the printer), so every face (CLI, dashboard, Lambda event) says the same thing about the
same mistake.
"""

from __future__ import annotations

import functools
import math
import re
from datetime import UTC, datetime

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs.text import quoted

# Instants a schedule, a report or a hold can use: far enough either way for any real plan, and clear of
# datetime's year 1 and 9999, where adding a 30-day window or a DST offset overflows.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2999, 12, 31, tzinfo=UTC)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def instant(text: str, option: str) -> datetime:
    """ISO 8601 (``Z`` allowed; without an offset it means UTC), between 1970 and 2999."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{option}: {quoted(text)} is not an ISO 8601 date-time (e.g. 2026-12-01T08:00+01:00)"
        ) from None
    try:
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        in_range = EARLIEST <= value <= LATEST
    except OverflowError:  # an offset that pushes year 1 or 9999 out of range
        in_range = False
    if not in_range:
        raise UsageError(f"{option}: {quoted(text)} is outside the years 1970 to 2999")
    return value


def seconds(value: float, option: str, *, maximum: float = 7 * 24 * 3600.0, zero: bool = False) -> float:
    """A finite number of seconds above 0 (or at least 0 with ``zero``) and at most ``maximum``."""
    low_ok = value >= 0 if zero else value > 0
    if not math.isfinite(value) or not low_ok or value > maximum:
        low = "0 or more" if zero else "more than 0"
        raise UsageError(f"{option}: {value!r} is not a number of seconds {low} and at most {maximum:g}")
    return value


def location(text: str, option: str) -> str:
    """A path or URL without NUL or control characters (the OS or SQLite would refuse it halfway)."""
    if _CONTROL.search(text):
        raise UsageError(f"{option}: {quoted(text)} contains a control character (NUL, newline, ...)")
    return text


@functools.cache
def _name_pattern(shape_name: str) -> tuple[re.Pattern[str], int]:
    # Imported here: the commands that take no cluster name (`schedule check`) start without botocore.
    from botocore.model import StringShape

    from hyperpod_scheduler.aws.model import service_model

    shape = service_model().shape_for(shape_name)
    assert isinstance(shape, StringShape)
    return re.compile(shape.metadata["pattern"]), int(shape.metadata.get("max", 256))


def cluster_name(name: str, option: str = "cluster") -> str:
    """A cluster name or ARN as DescribeCluster accepts it (the API's own pattern, from the botocore
    model), checked before the name is looked up, stored or used as a key."""
    pattern, longest = _name_pattern("ClusterNameOrArn")
    if not name or len(name) > longest or not pattern.fullmatch(name):
        raise UsageError(
            f"{option}: {quoted(name)} is not a cluster name (1-63 letters, digits and hyphens, starting with "
            "a letter or digit) or a cluster ARN"
        )
    return name


# An AWS region's shape: us-east-1, ap-southeast-3, us-gov-west-1, cn-north-1, eu-central-2.
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}")


def region_problem(region: str) -> str | None:
    """Why ``region`` is not an AWS region's name, or None. Checked before it keys a record: a region of
    'us-east-1/x' made a key with a slash too many, 'US-EAST-1' a second record of one cluster."""
    if len(region) > 32 or not _REGION.fullmatch(region):
        return f"{quoted(region)} is not an AWS region (lower case, e.g. us-east-1 or ap-southeast-3)"
    return None


def region(value: str | None, option: str = "--region") -> str | None:
    problem = None if value is None else region_problem(value)
    if problem is not None:
        raise UsageError(f"{option}: {problem}")
    return value
