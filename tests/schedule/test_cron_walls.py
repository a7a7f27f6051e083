"""The cron form's firings listed directly ("M H * * DOW") equal croniter's own, step for step."""

from __future__ import annotations

import itertools
from datetime import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.schedule.cron import _croniter_walls, _daily_fields, walls_after, walls_before

field_minute = st.sampled_from(["0", "5", "59", "*", "*/15", "0,30", "10-12", "7-59/13"])
field_hour = st.sampled_from(["0", "8", "23", "*", "1-3", "9,17", "*/6"])
field_dow = st.sampled_from(["*", "?", "1-5", "0,6", "7", "sun", "mon-fri", "0", "3-4", "5,7", "sat,sun"])
daily = st.tuples(field_minute, field_hour, field_dow).map(lambda f: f"{f[0]} {f[1]} * * {f[2]}")
# any instant, with seconds (walls of zones whose offset had seconds, before 1937 in Amsterdam) or on a firing
starts = st.one_of(
    st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(8999, 12, 30)),
    st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(8999, 12, 30)).map(
        lambda d: d.replace(second=0, microsecond=0)
    ),
)


@settings(max_examples=200, deadline=None)
@given(daily, starts)
def test_daily_firings_are_croniters(expr: str, start: datetime) -> None:
    assert _daily_fields(expr) is not None
    after = list(itertools.islice(walls_after(expr, start), 40))
    assert after == list(itertools.islice(_croniter_walls(expr, start, forward=True), 40))
    before = list(itertools.islice(walls_before(expr, start), 40))
    assert before == list(itertools.islice(_croniter_walls(expr, start, forward=False), 40))


def test_other_forms_are_left_to_croniter() -> None:
    # a day of the month, a month, the nth weekday or the last one: croniter's own rules, not the day walk
    for expr in ("0 8 1 * *", "0 8 * 2 *", "0 8 * * 5#2", "0 8 * * L5", "0 8 L * *", "0 8 1 * 1"):
        assert _daily_fields(expr) is None, expr
