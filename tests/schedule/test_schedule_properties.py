"""Hypothesis properties: parsing is total (UsageError or a schedule) and transitions describe is_running."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta, timezone
from unittest.mock import patch
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule import Schedule, load_schedules, resolve
from hyperpod_scheduler.schedule.terms import DAY_NAMES

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago"]
SECOND = timedelta(seconds=1)

days_item = st.one_of(
    st.sampled_from(DAY_NAMES),
    st.tuples(st.sampled_from(DAY_NAMES), st.sampled_from(DAY_NAMES)).map("-".join),
)
days = st.lists(days_item, min_size=1, max_size=3).map(",".join)
minute_of_day = st.integers(0, 1439)


@st.composite
def windows(draw: st.DrawFn) -> str:
    start = draw(minute_of_day)
    end = draw(st.integers(0, 1440).filter(lambda e: e != start))
    when = f"{start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d}"
    prefix = draw(st.one_of(st.just(""), days.map(lambda d: d + " ")))
    return f"{prefix}{when} {draw(st.sampled_from(ZONES))}"


instants = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2032, 1, 1), timezones=st.just(UTC)).map(
    lambda d: d.replace(microsecond=0)
)


@st.composite
def absolute(draw: st.DrawFn) -> str:
    start = draw(instants)
    length = draw(st.integers(60, 40 * 86400))
    offset = draw(st.sampled_from(["Z", "+01:00", "-05:00", "+05:30"]))
    tz = datetime.fromisoformat("2020-01-01T00:00" + offset).tzinfo
    end = start + timedelta(seconds=length)
    return f"{start.astimezone(tz).isoformat()}-{end.astimezone(tz).isoformat()}"


terms = st.one_of(windows(), windows(), windows(), absolute(), st.sampled_from(["always", "never"]))
expressions = st.lists(terms, min_size=1, max_size=3).map(", ".join)


@settings(max_examples=150, deadline=None)
@given(expressions)
def test_valid_expressions_parse(expr: str) -> None:
    schedule = resolve(expr)
    assert isinstance(schedule, Schedule)


GRAMMAR_ALPHABET = st.sampled_from(
    [*list("MonTueWedFriSatSun0123456789:-,+/ TZ"), "UTC", "Europe/Berlin", "always", "never", "24:00"]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=40), st.lists(GRAMMAR_ALPHABET, max_size=25).map("".join)))
def test_parser_raises_only_usage_error(text: str) -> None:
    with contextlib.suppress(UsageError):
        resolve(text).is_running(datetime(2026, 11, 30, tzinfo=UTC))


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["windows", "start", "stop", "timezone", "mode", "skip_dates", "holidays", "ready_by", "x"]),
        st.one_of(st.text(max_size=12), st.integers(), st.none(), st.lists(st.text(max_size=8))),
    )
)
def test_named_loader_raises_only_usage_error(entry: dict[str, object]) -> None:
    with contextlib.suppress(UsageError):
        load_schedules({"s": entry})


def _check_transitions(schedule: Schedule, after: datetime, data: st.DataObject) -> None:
    found = schedule.next_transitions(after, 8)
    state = schedule.is_running(after)
    previous = after
    for t in found:
        assert t.at > previous  # strictly increasing
        assert (t.state == "running") != state  # alternating, starting from the state at ``after``
        assert schedule.is_running(t.at) == (t.state == "running")
        assert schedule.is_running(t.at - SECOND) == state
        # constant between transitions
        span = int((t.at - previous).total_seconds())
        if span > 1:
            probe = previous + timedelta(seconds=data.draw(st.integers(1, span - 1)))
            assert schedule.is_running(probe) == state
        last = schedule.last_transition(t.at)
        assert last == t
        previous, state = t.at, t.state == "running"
    if found:
        assert schedule.transitions(after + SECOND, found[-1].at + SECOND) == found


@settings(max_examples=150, deadline=None)
@given(expressions, instants, st.data())
def test_next_transitions_agree_with_is_running(expr: str, after: datetime, data: st.DataObject) -> None:
    _check_transitions(resolve(expr), after, data)


cron_minute = st.integers(0, 59).map(str)
cron_hour = st.integers(0, 23).map(str)
cron_dow = st.one_of(st.just("*"), st.sampled_from(["1-5", "0,6", "1", "3-4", "5"]))


@st.composite
def cron_schedules(draw: st.DrawFn) -> Schedule:
    def entry() -> str:
        return f"{draw(cron_minute)} {draw(cron_hour)} * * {draw(cron_dow)}"

    return load_schedules(
        {
            "c": {
                "start": [entry() for _ in range(draw(st.integers(1, 2)))],
                "stop": [entry() for _ in range(draw(st.integers(1, 2)))],
                "timezone": draw(st.sampled_from(ZONES)),
                "holidays": draw(st.sampled_from([[], ["US-CA"]])),
            }
        }
    )["c"]


@settings(max_examples=40, deadline=None)
@given(cron_schedules(), instants, st.data())
def test_cron_transitions_agree_with_is_running(schedule: Schedule, after: datetime, data: st.DataObject) -> None:
    _check_transitions(schedule, after, data)


# Independent oracles in UTC (no DST): the compiled, week-by-week answer must match a direct computation.
window_parts = st.tuples(st.sets(st.integers(0, 6), min_size=1), minute_of_day, st.integers(1, 1440)).filter(
    lambda w: w[1] != w[2]
)


def _window_text(days: set[int], start: int, end: int) -> str:
    names = ",".join(DAY_NAMES[d] for d in sorted(days))
    return f"{names} {start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d} UTC"


def _oracle_window(parts: list[tuple[set[int], int, int]], t: datetime) -> bool:
    for days, start, end in parts:
        for back in (0, 1):
            day = (t - timedelta(days=back)).replace(hour=0, minute=0, second=0)
            if day.weekday() not in days:
                continue
            begin = day + timedelta(minutes=start)
            finish = day + timedelta(minutes=end + (1440 if end <= start else 0))
            if begin <= t < finish:
                return True
    return False


@settings(max_examples=150, deadline=None)
@given(st.lists(window_parts, min_size=1, max_size=3), st.lists(instants, min_size=1, max_size=20))
def test_utc_windows_match_a_direct_computation(parts: list[tuple[set[int], int, int]], times: list[datetime]) -> None:
    schedule = resolve(", ".join(_window_text(*p) for p in parts))
    for t in times:
        assert schedule.is_running(t) == _oracle_window(parts, t), t
    for t in schedule.next_transitions(times[0], 6):
        assert _oracle_window(parts, t.at) == (t.state == "running")
        assert _oracle_window(parts, t.at - SECOND) != (t.state == "running")


def _oracle_cron(starts: list[str], stops: list[str], t: datetime) -> bool:
    from croniter import croniter

    naive = t.replace(tzinfo=None) + SECOND
    latest: tuple[datetime, int] | None = None
    for exprs, priority in ((starts, 0), (stops, 1)):
        for expr in exprs:
            fired = (croniter(expr, naive).get_prev(datetime), priority)
            latest = fired if latest is None or fired > latest else latest
    return latest is not None and latest[1] == 0


cron_entry = st.tuples(cron_minute, cron_hour, cron_dow).map(lambda e: f"{e[0]} {e[1]} * * {e[2]}")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(cron_entry, min_size=1, max_size=2),
    st.lists(cron_entry, min_size=1, max_size=2),
    st.lists(instants, min_size=1, max_size=15),
)
def test_utc_cron_matches_a_direct_computation(starts: list[str], stops: list[str], times: list[datetime]) -> None:
    schedule = load_schedules({"c": {"start": starts, "stop": stops, "timezone": "UTC"}})["c"]
    for t in times:
        assert schedule.is_running(t) == _oracle_cron(starts, stops, t), t
    for t in schedule.next_transitions(times[0], 6):
        assert _oracle_cron(starts, stops, t.at) == (t.state == "running")


skip_days = st.lists(
    st.dates(min_value=datetime(2025, 12, 1).date(), max_value=datetime(2026, 3, 1).date()), max_size=6
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(windows(), st.just("always"), absolute()), min_size=1, max_size=2),
    st.sampled_from(ZONES),
    skip_days,
    st.datetimes(min_value=datetime(2025, 11, 20), max_value=datetime(2026, 3, 5), timezones=st.just(UTC)),
    st.data(),
)
def test_skip_dates_keep_transitions_consistent(
    terms_: list[str], tz: str, skips: list[object], after: datetime, data: st.DataObject
) -> None:
    schedule = load_schedules({"s": {"windows": terms_, "timezone": tz, "skip_dates": skips}})["s"]
    _check_transitions(schedule, after.replace(microsecond=0), data)
    for day in skips:
        noon = datetime.fromisoformat(f"{day}T12:00").replace(tzinfo=schedule.timezone)
        assert not schedule.is_running(noon)


# The fast path (issue 30): is_running reads one flat list of edges per cached week, with a shortcut for
# UTC instants; _running_by_definition compiles the week anew and tries each interval. They must agree
# for every kind of schedule, every kind of aware instant (UTC, fixed offsets, a zone with fold), on the
# edges themselves, and after the week cache has dropped and recompiled weeks.
aware_instants = st.one_of(
    instants,
    instants.map(lambda d: d.astimezone(timezone(timedelta(hours=-5)))),
    st.tuples(instants, st.sampled_from(ZONES), st.booleans()).map(
        lambda p: p[0].astimezone(ZoneInfo(p[1])).replace(fold=int(p[2]))
    ),
    instants.map(lambda d: d + timedelta(microseconds=999_999)),
)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(expressions.map(resolve), cron_schedules()),
    st.lists(aware_instants, min_size=1, max_size=12),
    st.integers(1, 3),
)
def test_fast_is_running_equals_the_definition(schedule: Schedule, times: list[datetime], cache: int) -> None:
    probes = list(times)
    for t in schedule.next_transitions(times[0], 4):  # the edges, and either side of them
        probes += [t.at, t.at - SECOND, t.at + SECOND, t.at - timedelta(microseconds=1)]
    with patch("hyperpod_scheduler.schedule.timeline._CACHE_PERIODS", cache):
        for t in probes * 2:  # twice: the second pass reads the cached (or dropped and rebuilt) weeks
            assert schedule.is_running(t) == schedule._running_by_definition(t), t
    assert set(schedule._edges) <= set(schedule._cache)  # the two caches drop the same weeks
