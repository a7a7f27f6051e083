"""A schedule's counts are bounded at parse, each refusal one line naming the field and the count (issue 28,
item 14)."""

from __future__ import annotations

import pytest

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule import load_schedules, resolve
from hyperpod_scheduler.schedule.build import MAX_SKIP_DATES, MAX_WINDOWS


def test_too_many_windows_in_a_named_schedule_is_one_line_naming_the_field() -> None:
    windows = [f"Mon {h % 24:02d}:00-{h % 24:02d}:30" for h in range(3_000)]
    with pytest.raises(UsageError) as err:
        load_schedules({"x": {"windows": windows, "timezone": "UTC"}})
    message = str(err.value)
    assert message.startswith("schedule 'x': windows: 3,000 weekly windows") and "at most 200" in message
    assert "\n" not in message


def test_too_many_windows_inline_is_refused() -> None:
    with pytest.raises(UsageError, match="3,000 weekly windows"):
        resolve(", ".join(f"Mon {h % 24:02d}:00-{h % 24:02d}:30 UTC" for h in range(3_000)))


def test_the_bound_itself_is_allowed_and_skip_dates_are_bounded() -> None:
    windows = [f"Mon {h % 24:02d}:00-{h % 24:02d}:30" for h in range(MAX_WINDOWS)]
    assert load_schedules({"x": {"windows": windows, "timezone": "UTC"}})["x"]
    dates = [f"{2026 + i // 300}-01-01" for i in range(MAX_SKIP_DATES + 1)]
    with pytest.raises(UsageError, match="skip_dates: 1,001 dates"):
        load_schedules({"x": {"windows": "Mon 08:00-09:00", "timezone": "UTC", "skip_dates": dates}})
