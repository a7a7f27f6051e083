"""The Fleet page and /api/fleet at fleet scale (issue 30): searched, filtered and paged; no AWS call per
cluster per request (the shared looks); the engine's own looks refresh what the page shows."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.app.compose import Context, chain_clients
from hyperpod_scheduler.app.looks import Looks
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.store.records import ClusterRecord
from hyperpod_scheduler.web import Dashboard, create_app
from hyperpod_scheduler.web.fleet_query import MAX_PER_PAGE, FleetQuery
from tests.web.fleet import DemoFleet


def _rows(n: int) -> list[dict[str, Any]]:
    regions = ("us-east-1", "eu-west-1")
    states = ("running", "stopped", "stopping")
    return [
        {
            "key": f"{111111111111 + i % 3}/{regions[i % 2]}/c-{i:04d}",
            "cluster": f"c-{i:04d}",
            "region": regions[i % 2],
            "state": states[i % 3],
        }
        for i in range(n)
    ]


# ---- the query (pure) ------------------------------------------------------------------------------


@settings(deadline=None)  # no timed assertion: a loaded machine is not a failure
@given(st.integers(0, 300), st.integers(1, 60))
def test_the_pages_of_a_search_hold_every_match_once_in_order(n: int, per_page: int) -> None:
    rows = _rows(n)
    query = FleetQuery.parse(state="stopped", per_page=per_page)
    first = query.select(rows)
    seen = []
    for page in range(1, first["pages"] + 1):
        chosen = dataclasses.replace(query, page=page).select(rows)
        assert len(chosen["rows"]) <= per_page
        seen += chosen["rows"]
    assert seen == [r for r in rows if r["state"] == "stopped"]
    assert first["matched"] == len(seen) and first["total"] == n
    assert dataclasses.replace(query, page=first["pages"] + 1).select(rows)["rows"] == []  # then nothing


def test_search_finds_by_name_account_and_region_and_filters_combine() -> None:
    rows = _rows(30)
    names = lambda q: [r["cluster"] for r in FleetQuery.parse(**q).select(rows)["rows"]]  # noqa: E731
    assert names({"q": "C-0007"}) == ["c-0007"]  # case does not matter
    assert len(names({"q": "111111111112"})) == 10  # the account
    assert len(names({"q": "eu-west-1"})) == 15  # the region
    assert names({"q": "eu-west-1 c-000"}) == ["c-0001", "c-0003", "c-0005", "c-0007", "c-0009"]  # every word
    assert names({"region": "us-east-1", "state": "running", "account": "111111111111"}) == [
        r["cluster"] for r in rows if r["cluster"] in {"c-0000", "c-0006", "c-0012", "c-0018", "c-0024"}
    ]


def test_a_page_past_the_end_is_empty_and_says_so_with_a_way_to_the_last() -> None:
    # It was the last page again: a client paging until an empty page never stopped, and ?page=9 read as
    # the last page.
    chosen = FleetQuery.parse(page="9", per_page="10").select(_rows(25))
    assert (chosen["rows"], chosen["page"], chosen["pages"], chosen["past_last"]) == ([], 9, 3, True)
    assert (chosen["first"], chosen["last"], chosen["next"]) == (0, 0, None)
    assert chosen["previous"] == "?page=3&per_page=10"  # the last page
    last = FleetQuery.parse(page="3", per_page="10").select(_rows(25))
    assert (len(last["rows"]), last["past_last"], last["previous"]) == (5, False, "?page=2&per_page=10")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"state": "asleep"}, "state: 'asleep' is not one of running, stopped, stopping, starting, unknown"),
        ({"page": "two"}, "page: 'two' is not a whole number"),
        # int() read these too: one page had many addresses ("1_0" was page 10).
        ({"page": "１"}, "page: '１' is not a whole number"),
        ({"page": "+1"}, "page: '+1' is not a whole number"),
        ({"per_page": "1_0"}, "per_page: '1_0' is not a whole number"),
        ({"page": "01"}, "page: '01' is not a whole number"),
        ({"page": "0"}, "page: 0 is not between 1 and 1000000"),
        ({"per_page": str(MAX_PER_PAGE + 1)}, f"per_page: {MAX_PER_PAGE + 1} is not between 1 and {MAX_PER_PAGE}"),
        ({"q": "x" * 101}, "q: the search is longer than 100 characters"),
    ],
)
def test_bad_query_input_is_one_line_naming_the_parameter(given: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        FleetQuery.parse(**given)
    assert str(caught.value) == message


# ---- over the demo fleet ---------------------------------------------------------------------------


def _counted(fleet: DemoFleet) -> tuple[dict[str, int], Any]:
    calls: dict[str, int] = {}

    def count(model: Any, **_: Any) -> None:
        calls[model.name] = calls.get(model.name, 0) + 1

    fleet.client.meta.events.register("before-call.sagemaker.*", count, unique_id="scale-count")
    return calls, lambda: fleet.client.meta.events.unregister("before-call.sagemaker.*", unique_id="scale-count")


def _synchronous(fleet: DemoFleet) -> Dashboard:
    # Refreshes run inside the request here, so what a test sees after one is settled.
    return dataclasses.replace(fleet.dashboard(None), looks=Looks(spawn=lambda work: work(), cold_first=False))


def test_page_requests_after_the_first_make_no_aws_call(fleet: DemoFleet) -> None:
    dash = _synchronous(fleet)
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    calls, stop = _counted(fleet)
    try:
        assert client.get("/").status_code == 200
        assert calls.get("DescribeCluster", 0) >= len(fleet.names)  # the first reading: each cluster once
        calls.clear()
        for path in ("/", "/api/fleet", "/?q=g5", "/api/fleet?state=stopped", "/api/fleet/summary"):
            assert client.get(path).status_code == 200, path
        assert calls == {}
    finally:
        stop()
        dash.close()


def test_the_engines_own_look_refreshes_what_the_page_shows(fleet: DemoFleet) -> None:
    dash = _synchronous(fleet)
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    assert client.get("/").status_code == 200
    g = next(g for g in dash.looks.reading(dash.context()).governed if g.ref.name == "g5-dev")
    before = dash.looks.look(g.ref)
    assert before is not None and before.by == "refresh"
    fleet.emu.advance(30)  # within the looks' minute: nothing is read again for the page
    with open_store(str(fleet.state)) as store:
        ctx = Context(load_config(fleet.config), store, chain_clients(lambda ref: fleet.client), fleet.emu.clock.now,
                      notify=False, looks=dash.looks)  # fmt: skip
        ctx.engine().describe(g.ref)  # what a tick's turn does first
    after = dash.looks.look(g.ref)
    assert after is not None and after.by == "engine" and after.at > before.at
    calls, stop = _counted(fleet)
    try:
        page = client.get("/").text
    finally:
        stop()
    assert calls == {}
    # The oldest look is said (the two clusters not looked at again), with how long ago.
    assert f"cluster sizes as of {before.at:%H:%M}Z, 30 s ago" in page
    dash.close()


def test_old_looks_are_read_again_by_one_shared_refresh(fleet: DemoFleet) -> None:
    dash = _synchronous(fleet)
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    assert client.get("/api/fleet").status_code == 200
    refreshes = dash.looks.refreshes
    fleet.emu.advance(120)  # past the looks' minute
    calls, stop = _counted(fleet)
    try:
        assert client.get("/api/fleet").status_code == 200
    finally:
        stop()
    assert dash.looks.refreshes == refreshes + 1
    assert calls.get("DescribeCluster") == len(fleet.names)  # every cluster once, in one refresh
    dash.close()


def test_the_fleet_page_pages_searches_and_says_where_it_is(fleet: DemoFleet) -> None:
    dash = fleet.dashboard(None)
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    first = client.get("/?per_page=1").text
    assert first.count('class="cluster-row') == 1
    assert "Clusters 1–1 of 3" in first and 'rel="next"' in first and "page 1 of 3" in first
    assert '<input type="search" name="q"' in first
    second = client.get("/?per_page=1&page=2").text
    assert second.count('class="cluster-row') == 1 and 'rel="prev"' in second
    found = client.get("/?q=G5").text
    assert found.count('class="cluster-row') == 1 and 'data-cluster="g5-dev"' in found
    assert "matching (of 3)" in found
    none = client.get("/?q=nothing-like-this").text
    assert "No cluster matches this search." in none
    # A fleet that fits one page has no search form: the page stays as it was.
    assert '<input type="search"' not in client.get("/").text
    bad = client.get("/?state=asleep")
    assert bad.status_code == 400 and "state: (value not shown) is not one of" in bad.text
    past = client.get("/?per_page=1&page=99").text
    assert past.count('class="cluster-row') == 0 and 'href="/?page=3&amp;per_page=1"' in past
    assert "There is no page 99: the clusters fill 3 pages" in past and "page 3 of 3" not in past
    assert client.get("/api/fleet?per_page=1&page=99").json() == []
    dash.close()


def test_api_fleet_filters_and_pages_and_says_how_many(fleet: DemoFleet) -> None:
    dash = fleet.dashboard(None)
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    every = client.get("/api/fleet")
    assert len(every.json()) == 3 and every.headers["X-Total-Count"] == "3"
    page = client.get("/api/fleet?per_page=2&page=2")
    assert len(page.json()) == 1 and page.headers["X-Matched-Count"] == "3"
    g5 = client.get("/api/fleet?q=g5-dev")
    assert [r["cluster"] for r in g5.json()] == ["g5-dev"] and g5.headers["X-Matched-Count"] == "1"
    assert client.get("/api/fleet?per_page=0").json() == {"error": "per_page: 0 is not between 1 and 500"}
    dash.close()


# ---- size at 1,000 clusters ------------------------------------------------------------------------


def test_the_fleet_page_of_a_thousand_clusters_is_under_200_kb(tmp_path: Path) -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    state = tmp_path / "state.sqlite"
    config = tmp_path / "config.yaml"
    config.write_text(f"state: {state}\ntargets: []\n", encoding="utf-8")
    with open_store(str(state)) as store:
        for i in range(1000):
            key = f"123456789012/us-east-1/c-{i:04d}"
            record = ClusterRecord.new(key, now - timedelta(hours=1)).evolve(applied_state="stopped")
            store.put(record, 0)
    dash = Dashboard(config_file=str(config), now=lambda: now)
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    page = client.get("/")
    assert page.status_code == 200
    assert len(page.content) < 200 * 1024, len(page.content)
    assert page.text.count('class="cluster-row') == 50 and "Clusters 1–50 of 1,000" in page.text
    assert len(client.get("/api/fleet").json()) == 1000
    dash.close()


def test_a_viewers_zone_on_one_request_is_not_kept_for_the_next(fleet: DemoFleet) -> None:
    # The rows are kept between requests: one page's own changes (the viewer's zone, its buttons) are
    # made in copies, never in the rows the API and the next viewer read.
    dash = _synchronous(fleet)  # the fleet read once, inside the first request: both readings settled
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    before = {r["cluster"]: r for r in client.get("/api/fleet").json()}
    assert client.get("/?tz=Asia/Tokyo").status_code == 200
    after = {r["cluster"]: r for r in client.get("/api/fleet").json()}
    assert after == before
    assert all(isinstance(a, str) for r in after.values() for a in r["actions"])
    dash.close()
