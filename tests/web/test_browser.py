"""The dashboard in a real browser: Playwright driving Debian's Chromium (never a downloaded one)
against the dashboard served over the emulator's demo fleet. Screenshots go to test-artifacts/web/.

When Chromium cannot start these tests fail with the reason under CI=true, and skip locally.
Install it with scripts/browser-ci.sh.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app as cli_app
from tests.web.conftest import TOKEN
from tests.web.fleet import DemoFleet, serving

CHROMIUM = os.environ.get("HYPERPOD_SCHEDULER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "web"
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def _unavailable(reason: str) -> None:
    message = (
        f"browser tests need Chromium at {CHROMIUM} ({reason}); run scripts/browser-ci.sh as root "
        "(apt-get install chromium) or set HYPERPOD_SCHEDULER_CHROMIUM"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError as exc:
        _unavailable(f"the playwright package is missing: {exc}")
    if not Path(CHROMIUM).exists():
        _unavailable("not installed")
    with sync_playwright() as p:
        try:
            launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=30_000)
        except Error as exc:
            _unavailable(f"it did not start: {str(exc).splitlines()[0]}")
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def base_url(fleet: DemoFleet) -> Iterator[str]:
    with serving(fleet.dashboard(TOKEN)) as url:
        yield url


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=LAPTOP)
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _status(fleet: DemoFleet) -> dict[str, Any]:
    result = CliRunner().invoke(
        cli_app, ["status", "--json", "--config", str(fleet.config), "--state", str(fleet.state)]
    )
    assert result.exit_code == 0, result.output
    return {row["cluster"]: row for row in json.loads(result.output)}


def test_fleet_page_lists_the_demo_clusters_at_laptop_and_phone_width(
    page: Any, base_url: str, fleet: DemoFleet
) -> None:
    page.goto(base_url + "/")
    rows = page.locator("tr.cluster-row")
    assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.cluster)")) == sorted(fleet.names)
    _shot(page, "fleet-laptop")
    page.set_viewport_size(PHONE)
    page.reload()
    assert page.locator("tr.cluster-row").first.is_visible()
    # On a phone the table turns into stacked cards: nothing wider than the screen but the grids.
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"] + 1
    _shot(page, "fleet-phone")


def test_pages_read_fine_without_javascript(browser: Any, base_url: str, fleet: DemoFleet) -> None:
    context = browser.new_context(viewport=PHONE, java_script_enabled=False)
    page = context.new_page()
    page.goto(base_url + "/clusters/p5-training")
    assert page.locator("svg.timeline").is_visible()
    page.goto(base_url + "/savings")
    assert page.locator("svg.bars").count() == 2
    _shot(page, "savings-phone-nojs")
    context.close()


def test_timeline_has_one_row_per_instance_group(page: Any, base_url: str, fleet: DemoFleet) -> None:
    for name in fleet.names:
        page.goto(f"{base_url}/clusters/{name}")
        assert page.locator("svg.timeline g.group-row").count() == fleet.group_counts[name]
        _shot(page, f"cluster-{name}")


def test_action_without_the_token_is_refused(page: Any, base_url: str, fleet: DemoFleet) -> None:
    before = fleet.client.describe_cluster(ClusterName="g5-dev")["InstanceGroups"]
    page.goto(base_url + "/clusters/g5-dev")
    page.get_by_role("link", name="Stop now").click()
    page.fill("input[name=by]", "mallory")
    page.get_by_role("button", name="Confirm stop").click()
    assert page.locator("h1").inner_text() == "Refused"
    assert "token" in page.locator(".message").inner_text()
    _shot(page, "action-refused")
    assert fleet.client.describe_cluster(ClusterName="g5-dev")["InstanceGroups"] == before
    page.goto(base_url + "/clusters/g5-dev")
    assert "mallory" not in page.locator("table.history").inner_text()


def test_hold_set_through_the_page_shows_in_status(page: Any, base_url: str, fleet: DemoFleet) -> None:
    page.goto(base_url + "/clusters/trn1-research")
    page.get_by_role("link", name="Hold until…").click()
    page.select_option("select[name=state]", "running")
    page.fill("input[name=until]", "2027-12-31T18:00Z")
    page.fill("input[name=by]", "browser-test")
    page.fill("input[name=reason]", "demo day")
    page.fill("input[name=token]", TOKEN)
    _shot(page, "hold-confirm")
    page.get_by_role("button", name="Confirm hold").click()
    assert "held running until 2027-12-31" in page.locator(".message").inner_text()
    row = _status(fleet)["trn1-research"]
    assert row["hold"]["state"] == "running"
    page.goto(base_url + "/")
    assert "by dashboard:browser-test" in page.locator("tr[data-cluster=trn1-research]").inner_text()
    _shot(page, "fleet-after-hold")


def test_painting_the_schedule_grid_saves_it(page: Any, base_url: str, fleet: DemoFleet) -> None:
    page.goto(base_url + "/schedules?tz=UTC")
    form = page.locator("#s-research-cron form.grid-form")
    sunday_noon = form.locator("input[value='6-48']")
    assert not sunday_noon.is_checked()
    sunday_noon.click()
    assert sunday_noon.is_checked()
    form.locator("input[name=token]").fill(TOKEN)
    _shot(page, "schedules")
    form.get_by_role("button", name="Save research-cron").click()
    assert "Saved schedule research-cron" in page.locator(".ok").inner_text()
    assert page.locator("#s-research-cron input[value='6-48']").is_checked()
    assert "Sun 12:00-12:15" in fleet.config.read_text()
