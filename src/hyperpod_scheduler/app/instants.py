"""Instants typed by a person (``--at``, ``--until``, a form field), read the same way by every face."""

from __future__ import annotations

from datetime import UTC, datetime

from hyperpod_scheduler.errors import UsageError


def parse_instant(text: str, field: str) -> datetime:
    """ISO 8601; a missing offset means UTC."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{field}: {text!r} is not an ISO 8601 date-time (e.g. 2026-12-01T08:00+01:00)") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)
