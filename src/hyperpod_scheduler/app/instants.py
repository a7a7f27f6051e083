"""Instants typed by a person (``--at``, ``--until``, a form field), read the same way by every face."""

from __future__ import annotations

from datetime import datetime

from hyperpod_scheduler.inputs import args


def parse_instant(text: str, field: str) -> datetime:
    """ISO 8601; a missing offset means UTC; years 1970 to 2999 (``inputs.args.instant``)."""
    return args.instant(text, field)
