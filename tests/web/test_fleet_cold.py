"""The Fleet page of a dashboard just started (issue 30): its first request answers from the store at
once, with no AWS call, and says so on every cluster; the shared refresh beside it reads the fleet, and
what it read is what later requests show; one cluster AWS does not answer for is said, since when."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlparse

from fastapi.testclient import TestClient

from hyperpod_scheduler.app.looks import REFRESH_THREAD, Looks
from hyperpod_scheduler.app.wording import when
from hyperpod_scheduler.emulator import in_process
from hyperpod_scheduler.store import open_store
from hyperpod_scheduler.web import Dashboard, create_app
from tests.web.fleet import DemoFleet


@contextmanager
def emulator_calls(fleet: DemoFleet) -> Iterator[Counter[str]]:
    """Every AWS call the emulator answers in this process (SageMaker, FSx, S3), by operation."""
    calls: Counter[str] = Counter()
    netloc = urlparse(fleet.emu.endpoint).netloc

    def counted(method: str, path: str, headers: Mapping[str, str], body: bytes) -> Any:
        target = next((v for k, v in headers.items() if k.lower() == "x-amz-target"), None)
        calls[target.rsplit(".", 1)[-1] if target else f"{method} {path.split('?')[0]}"] += 1
        return fleet.emu.answer(method, path, headers, body)

    in_process.answer_at(netloc, counted)
    try:
        yield calls
    finally:
        in_process.answer_at(netloc, fleet.emu.answer)


@contextmanager
def describe_hook(fleet: DemoFleet, hook: Callable[..., Any]) -> Iterator[None]:
    """``hook`` sees (and may answer or break) every DescribeCluster the fleet's client sends meanwhile."""
    events = fleet.client.meta.events
    events.register("before-call.sagemaker.DescribeCluster", hook, unique_id="cold-hook")
    try:
        yield
    finally:
        events.unregister("before-call.sagemaker.DescribeCluster", unique_id="cold-hook")


def _later(fleet: DemoFleet) -> tuple[Dashboard, list[Callable[[], None]]]:
    """A dashboard whose work beside requests waits until the test runs it (no thread, no timing)."""
    pending: list[Callable[[], None]] = []
    return dataclasses.replace(fleet.dashboard(None), looks=Looks(spawn=pending.append, cold_first=True)), pending


def _run(pending: list[Callable[[], None]]) -> None:
    while pending:
        pending.pop(0)()


def _answers_with(down: str, status: int, code: str, message: str) -> Callable[..., Any]:
    """A ``describe_hook`` that answers ``down``'s DescribeCluster with this error, as AWS would send it."""

    def hook(params: Mapping[str, Any], **_: Any) -> Any:
        if json.loads(params["body"]).get("ClusterName") == down:  # the request as it would be sent
            error = {"Error": {"Code": code, "Message": message}}
            return type("Http", (), {"status_code": status, "headers": {}})(), {
                **error, "ResponseMetadata": {"HTTPStatusCode": status}
            }  # fmt: skip
        return None

    return hook


def test_the_first_request_makes_no_aws_call_and_marks_every_row_as_the_stores(fleet: DemoFleet) -> None:
    dash, pending = _later(fleet)
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    try:
        with emulator_calls(fleet) as calls:
            rows = client.get("/api/fleet").json()
            page = client.get("/").text
        assert calls == Counter()  # not one call, per cluster or otherwise: the refresh waits beside
        assert pending  # the shared refresh, started by the first request
        assert sorted(r["cluster"] for r in rows) == sorted(fleet.names)
        with open_store(str(fleet.state)) as store:
            for row in rows:
                record = store.get(row["key"])
                assert record is not None
                known = (record.reads.sizes_as_of if record.reads else None) or record.updated_at
                assert row["freshness"] == {
                    "source": "store",
                    "fresh": False,
                    "as_of": known.isoformat(),
                    "looked_at": None,
                    "reachable": True,
                    "unreachable_since": None,
                    "refreshing": True,
                    "text": f"as of {when(known)} from the store; refreshing now",
                }
                # What a stop keeps is not read inside the request: said as not read, never guessed.
                assert "cannot describe" not in row["tonight"]["why"]
                if "kept" in row["tonight"]["why"]:
                    assert row["tonight"]["why"].endswith("as the last stop kept them (not looked at yet)")
        assert "reading the fleet from AWS now" in page
        assert 'marked "from the store"' in page
        assert page.count("from the store; refreshing now") == len(fleet.names)
    finally:
        _run(pending)
        dash.close()


def test_after_the_refresh_the_page_shows_what_it_read(fleet: DemoFleet) -> None:
    dash, pending = _later(fleet)
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    try:
        assert all(r["freshness"]["source"] == "store" for r in client.get("/api/fleet").json())
        with emulator_calls(fleet) as calls:
            _run(pending)  # the refresh, then the rows built again for the next viewer
        assert calls["DescribeCluster"] == len(fleet.names)  # each cluster once, in the one refresh
        with emulator_calls(fleet) as calls:
            rows = client.get("/api/fleet").json()
            page = client.get("/").text
        assert calls == Counter()
        assert not pending  # nothing stale: no second refresh
        for row in rows:
            look = dash.looks.look(next(g.ref for g in dash.looks.reading(dash.context()).governed
                                        if g.ref.key == row["key"]))  # fmt: skip
            assert look is not None and not look.failed
            assert row["freshness"]["source"] == "aws" and row["freshness"]["fresh"] is True
            assert row["freshness"]["looked_at"] == look.at.isoformat()
            assert row["freshness"]["text"] == f"read from AWS at {when(look.at)}"
            assert row["freshness"]["refreshing"] is False
        assert "from the store" not in page and "reading the fleet from AWS now" not in page
        assert client.get("/api/fleet/summary").json()["summary"]["fsx_per_month_text"] != "not read yet"
    finally:
        dash.close()


def test_one_cluster_aws_does_not_answer_for_is_unreachable_since_then_and_the_others_are_read(
    fleet: DemoFleet,
) -> None:
    down = "g5-dev"
    refuse = _answers_with(down, 503, "ServiceUnavailable", "the endpoint is down")
    dash, pending = _later(fleet)
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    try:
        with describe_hook(fleet, refuse):
            client.get("/api/fleet")
            started = dash.now()
            _run(pending)
            fleet.emu.advance(30)  # a later request, within the minute: nothing read again
            rows = {r["cluster"]: r for r in client.get("/api/fleet").json()}
            page = client.get("/").text
    finally:
        dash.close()
    bad = rows.pop(down)
    assert all(r["freshness"]["source"] == "aws" for r in rows.values())  # the others were read
    since = bad["freshness"]["unreachable_since"]
    assert since is not None and since >= started.isoformat()
    assert bad["freshness"]["source"] == "store" and bad["freshness"]["reachable"] is False
    assert bad["freshness"]["text"].startswith(f"AWS unreachable since {when(dash.looks.look(_ref(dash, down)).at)}")
    assert bad["aws"]["reachable"] is False and bad["aws"]["failing_since"] == since
    assert bad["flags"][0]["kind"] == "stale" and bad["flags"][0]["text"] == bad["aws"]["text"]
    assert f'data-cluster="{down}"' in page and bad["aws"]["text"] in page


def _after_one_refresh(fleet: DemoFleet, hook: Callable[..., Any]) -> tuple[Dashboard, dict[str, dict[str, Any]], str]:
    """A first request, the refresh it starts (with ``hook`` on every DescribeCluster), then the rows by
    cluster and the Fleet page as the next viewer gets them."""
    dash, pending = _later(fleet)
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))
    try:
        with describe_hook(fleet, hook):
            client.get("/api/fleet")
            _run(pending)
            rows = {r["cluster"]: r for r in client.get("/api/fleet").json()}
            page = client.get("/").text
    finally:
        dash.close()
    return dash, rows, page


def _ref(dash: Dashboard, name: str) -> Any:
    return next(g.ref for g in dash.looks.reading(dash.context()).governed if g.ref.name == name)


def test_a_look_that_fails_with_something_unforeseen_is_that_clusters_and_the_refresh_reads_the_others(
    fleet: DemoFleet,
) -> None:
    # One cluster's look raises what no AWS answer would (a bug met on its data, a client factory that
    # breaks): that look is the failure, and the one refresh still reads every other cluster. A cluster
    # of its own: the module's store keeps what an earlier test's looks found (g5-dev unreachable).
    down = next(n for n in fleet.names if n.startswith("trn1"))

    def broken(params: Mapping[str, Any], **_: Any) -> Any:
        if json.loads(params["body"]).get("ClusterName") == down:
            raise RuntimeError("met a bug on this cluster's data")
        return None

    dash, rows, _page = _after_one_refresh(fleet, broken)  # before: the RuntimeError ended the whole refresh
    bad = rows.pop(down)
    assert all(r["freshness"]["source"] == "aws" for r in rows.values())
    assert bad["freshness"]["source"] == "store"
    look = dash.looks.look(_ref(dash, down))
    assert look is not None and look.failed and "met a bug" in str(look.answer)
    # Ours, not AWS's: the row says which error, never "AWS unreachable".
    _says_the_failed_look(bad, look.at, "met a bug on this cluster's data")


def _says_the_failed_look(bad: dict[str, Any], at: Any, error: str) -> None:
    fresh = bad["freshness"]
    assert fresh["source"] == "store" and fresh["fresh"] is False
    assert fresh["reachable"] is True and fresh["unreachable_since"] is None
    assert fresh["text"].startswith(f"the look at {when(at)} failed (") and error in fresh["text"]
    assert "figures as of " in fresh["text"] or "no figures read from AWS yet" in fresh["text"]
    assert "unreachable" not in fresh["text"]
    assert bad["aws"]["reachable"] is True
    assert bad["flags"][0] == {"kind": "stale", "text": fresh["text"]}


def test_a_look_aws_answers_with_an_error_says_that_error_not_unreachable(fleet: DemoFleet) -> None:
    # AccessDenied is an answer: AWS is there, the role may not read this cluster. Calling it
    # "unreachable" would send a team to chase the network instead of the policy.
    down = next(n for n in fleet.names if n.startswith("p5"))
    deny = _answers_with(down, 400, "AccessDeniedException", "not authorized to DescribeCluster")
    dash, rows, page = _after_one_refresh(fleet, deny)
    bad = rows.pop(down)
    assert all(r["freshness"]["source"] == "aws" for r in rows.values())
    look = dash.looks.look(_ref(dash, down))
    assert look is not None and look.failed and not look.unanswered
    _says_the_failed_look(bad, look.at, "AccessDenied")
    assert "not authorized to DescribeCluster" in bad["freshness"]["text"]
    assert f'data-cluster="{down}"' in page and "AWS unreachable" not in page
    # Said once on its row, in the attention flag; the state cell only says its figures are the last known.
    row = page.split(f'data-cluster="{down}"', 1)[1].split("</tr>", 1)[0]
    assert row.count("not authorized to DescribeCluster") == 1 and "(last known: the look failed)" in row


def test_a_server_shutting_down_ends_its_refresh_and_leaves_no_thread_reading_behind(fleet: DemoFleet) -> None:
    # The refresh the server starts (lifespan) went on reading every cluster after the server had
    # stopped: in tests, past the end of moto's mock, it asked real AWS endpoints for a fleet's table.
    in_first, calls = threading.Event(), Counter[str]()

    def slow(params: Mapping[str, Any], **_: Any) -> Any:
        calls[json.loads(params["body"])["ClusterName"]] += 1
        in_first.set()
        time.sleep(0.2)  # the first look still in flight as the server shuts down
        return None

    dash = dataclasses.replace(fleet.dashboard(None), looks=Looks(concurrency=1, cold_first=True))
    try:
        with describe_hook(fleet, slow):
            with TestClient(create_app(dash, allowed_hosts=["testserver"])):
                assert in_first.wait(10)  # the server's own refresh is reading the first cluster
            # Shut down: the look in flight ended, and no other was sent.
            assert sum(calls.values()) == 1, calls
            assert not [t for t in threading.enumerate() if t.name == REFRESH_THREAD and t.is_alive()]
    finally:
        dash.close()


def test_a_refresh_still_in_a_call_when_close_gives_up_waiting_sends_nothing_after_it(fleet: DemoFleet) -> None:
    # close() waits within its timeout; a look still in flight then must not go on to the next cluster
    # (before: the wait gave up, the flag was cleared, and the refresh read the whole fleet after all).
    calls, go = Counter[str](), threading.Event()

    def held(params: Mapping[str, Any], **_: Any) -> Any:
        calls[json.loads(params["body"])["ClusterName"]] += 1
        go.wait(10)  # in flight until the test lets it end, after close() has returned
        return None

    dash = dataclasses.replace(fleet.dashboard(None), looks=Looks(concurrency=1, cold_first=True))
    client = TestClient(create_app(dash, allowed_hosts=["testserver"]))  # no lifespan: closed by hand below
    try:
        with describe_hook(fleet, held):
            client.get("/api/fleet")  # starts the refresh beside the request
            deadline = time.monotonic() + 10
            while not calls and time.monotonic() < deadline:
                time.sleep(0.01)
            dash.looks.close(timeout_s=0.05)  # gives up waiting: the first look is still in its call
            go.set()
            time.sleep(0.3)  # room for the refresh to go on to the next clusters, if it would
            dash.looks.close(timeout_s=10)  # now the thread ends
            assert sum(calls.values()) == 1, calls
            assert not [t for t in threading.enumerate() if t.name == REFRESH_THREAD and t.is_alive()]
        # Still usable: the next request's refresh reads every cluster.
        client.get("/api/fleet")
        deadline = time.monotonic() + 30
        while dash.looks.refreshes == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert dash.looks.refreshes == 1 and dash.looks.failure is None
    finally:
        dash.close()
