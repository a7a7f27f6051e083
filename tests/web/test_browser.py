"""The dashboard in a real browser: Playwright driving Debian's Chromium (never a downloaded one) over
the demo's own week (``run_demo``, seven virtual days, served as ``demo --dashboard`` serves it), on a
laptop (1440x900) and a phone (390x844). Every page is checked with axe-core (vendored under
tests/web/vendor/) for zero violations, and for Content-Security-Policy violations and console errors.
Screenshots go to test-artifacts/web/ (docs/dashboard.md links them).

When Chromium cannot start these tests fail with the reason under CI=true, and skip locally.
Install it with scripts/browser-ci.sh.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app as cli_app
from tests.web.conftest import TOKEN
from tests.web.demo_week import DemoWeek, demo_week

pytestmark = pytest.mark.browser  # scripts/test.sh runs these in their own stage

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
AXE = Path(__file__).with_name("vendor") / "axe-core" / "axe.min.js"
LAPTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
PAGES = {
    "fleet": "/",
    "cluster-trn1-research": "/clusters/trn1-research",
    "cluster-p5-training": "/clusters/p5-training",
    "confirm-start-g5-dev": "/clusters/g5-dev/actions/start",
    "schedules": "/schedules?tz=UTC",
    "savings": "/savings",
}
# Collects CSP violations in the page itself (the browser reports them as events, not only on the console).
CSP_WATCH = (
    "window.__csp = []; document.addEventListener('securitypolicyviolation',"
    " e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"
)


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
def week(browser: Any) -> Iterator[DemoWeek]:
    with demo_week(TOKEN) as w:
        yield w


class Watched:
    """A page with its console errors and CSP violations recorded."""

    def __init__(self, browser: Any, viewport: dict[str, int], **options: Any) -> None:
        self.context = browser.new_context(viewport=viewport, **options)
        self.context.set_default_timeout(20_000)
        self.context.add_init_script(CSP_WATCH)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def goto(self, url: str) -> Any:
        answer = self.page.goto(url)
        assert answer is not None and answer.status == 200, url
        return self.page

    def clean(self) -> None:
        assert self.page.evaluate("window.__csp") == [], "Content-Security-Policy violations"
        assert self.errors == [], self.errors


@pytest.fixture()
def laptop(browser: Any) -> Iterator[Watched]:
    w = Watched(browser, LAPTOP)
    yield w
    w.context.close()


@pytest.fixture()
def phone(browser: Any) -> Iterator[Watched]:
    w = Watched(browser, PHONE, has_touch=True, is_mobile=True)
    yield w
    w.context.close()


def _shot(page: Any, name: str, full: bool = True) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full)


def _axe(page: Any) -> list[dict[str, Any]]:
    # Evaluated through the DevTools protocol, so the page's CSP (scripts from 'self' only) allows it.
    page.evaluate(AXE.read_text(encoding="utf-8"))
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in result["violations"]
    ]


def _below_the_fold(page: Any, selector: str) -> list[str]:
    """Texts of ``selector`` matches that end below the first screen (or are hidden)."""
    height = page.viewport_size["height"]
    out = []
    for el in page.locator(selector).all():
        box = el.bounding_box()
        if box is None or box["y"] + box["height"] > height:
            out.append(el.inner_text()[:80])
    return out


def _status(week: DemoWeek) -> dict[str, Any]:
    dash = week.dashboard
    args = ["status", "--json", "--config", str(dash.config_file), "--state", str(dash.state)]
    result = CliRunner().invoke(cli_app, args)
    assert result.exit_code == 0, result.output
    return {row["cluster"]: row for row in json.loads(result.output)}


# ---- the Fleet page --------------------------------------------------------------------------------


def test_fleet_page_says_what_bills_tonight_and_why_and_the_weeks_trouble_without_scrolling(
    laptop: Watched, week: DemoWeek
) -> None:
    page = laptop.goto(week.url + "/")
    rows = {r.get_attribute("data-cluster"): r for r in page.locator("tr.cluster-row").all()}
    assert set(rows) == {"p5-training", "g5-dev", "trn1-research"}
    p5 = rows["p5-training"].inner_text()
    # p5-training is "stopped" by its schedule, yet its scarce P5 workers and their Slurm head run on.
    assert "4 × p5.48xlarge" in p5 and "kept" in p5 and "bills $" in p5 and "scarce capacity" in p5
    for name in ("g5-dev", "trn1-research"):
        assert "no instances bill" in rows[name].inner_text()
    events = page.locator("ul.week li").all_inner_texts()
    blocked = [e for e in events if "BLOCKED" in e.upper() and "trn1-research" in e]
    shortfall = [e for e in events if "SHORTFALL" in e.upper() and "g5-dev" in e]
    assert blocked and "Tue 1 Dec 22:00 UTC" in blocked[0] and "instance-local" in blocked[0]
    assert shortfall and "restored" in shortfall[0] and "Wed 2 Dec" in shortfall[0]
    strip = page.locator("ul.strip").inner_text()
    assert "billing now" in strip and "saved this month" in strip and "FSx" in strip
    assert "starts" in page.locator("ul.transitions").inner_text()
    # Everything above on the first screen of a laptop: no scrolling needed.
    assert page.evaluate("window.scrollY") == 0
    assert _below_the_fold(page, "ul.strip, ul.transitions, tr.cluster-row, ul.week li") == []
    _shot(page, "fleet-laptop", full=False)
    laptop.clean()


def test_fleet_page_on_a_phone_keeps_every_label(phone: Watched, week: DemoWeek) -> None:
    page = phone.goto(week.url + "/")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"] + 1
    first = page.locator("tr.cluster-row").first
    labels = first.locator("td").evaluate_all("tds => tds.map(td => getComputedStyle(td, '::before').content)")
    assert all(label.startswith('"') and label.endswith(': "') for label in labels), labels
    assert '"tonight: "' in labels and '"why: "' in labels
    _shot(page, "fleet-phone")
    phone.clean()


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
def test_a_fleet_larger_than_a_page_is_searched_and_paged_at_both_widths(
    browser: Any, week: DemoWeek, viewport: str
) -> None:
    # A page of one row stands in for 1,000 clusters at 50 a page (issue 30): the same form and pager.
    watched = Watched(browser, LAPTOP if viewport == "laptop" else PHONE)
    try:
        page = watched.goto(week.url + "/?per_page=1")
        assert page.locator("tr.cluster-row").count() == 1
        assert "Clusters 1–1 of 3" in page.locator("#shown").inner_text()
        assert (
            page.evaluate("document.documentElement.scrollWidth")
            <= (LAPTOP if viewport == "laptop" else PHONE)["width"] + 1
        )
        assert _axe(page) == []
        first = page.locator("tr.cluster-row").first.get_attribute("data-cluster")
        page.get_by_role("link", name=re.compile("next 1")).click()
        page.wait_for_url("**page=2**")
        assert page.locator("tr.cluster-row").first.get_attribute("data-cluster") != first
        search = page.get_by_role("searchbox", name="Search")
        search.fill("g5")
        search.press("Enter")
        page.wait_for_url("**q=g5**")
        assert [r.get_attribute("data-cluster") for r in page.locator("tr.cluster-row").all()] == ["g5-dev"]
        assert "matching (of 3)" in page.locator("#shown").inner_text()
        assert _axe(page) == []
        _shot(page, f"fleet-search-{viewport}")
        watched.clean()
    finally:
        watched.context.close()


# ---- cluster pages ---------------------------------------------------------------------------------


def test_cluster_page_shows_the_blocked_stop_its_audit_and_readable_history(laptop: Watched, week: DemoWeek) -> None:
    page = laptop.goto(week.url + "/clusters/trn1-research")
    timeline = page.locator("svg.timeline")
    assert timeline.locator("g.group-row").count() == 3
    assert timeline.locator("rect.seg.blocked").count() == 3  # every group ran on through Tuesday night
    assert timeline.locator("path.mark.bad").count() >= 1
    assert "stop blocked: kept running" in page.locator("ul.legend").inner_text()
    audit = page.locator("ul.audits").inner_text()
    assert "checkpoints block" in audit and "4711" in audit and "/opt/dlami/nvme/checkpoints" in audit
    history = page.locator("table.history").inner_text()
    assert "outcomes={" not in history and "stop blocked, the cluster kept running" in history
    assert "started in 20 min: controller-machine restored 1/1" in history
    # The window moves: a week earlier starts seven days before.
    before = page.locator("h2 small").first.inner_text()
    page.get_by_role("link", name="◀ a week earlier").click()
    assert page.locator("h2 small").first.inner_text() != before
    assert "Sun 22 Nov" in page.locator("h2 small").first.inner_text()
    laptop.goto(week.url + "/clusters/trn1-research")
    _shot(page, "cluster-trn1-research-laptop")
    laptop.clean()


def test_a_cluster_that_was_never_stopped_is_not_painted_stopped_or_kept(laptop: Watched, week: DemoWeek) -> None:
    # p5-training: every group with nodes is protected, so every scheduled stop sent nothing. Its
    # working hours are not "kept running while stopped", and its nights ahead are not a plan to stop.
    page = laptop.goto(week.url + "/clusters/p5-training")
    timeline = page.locator("svg.timeline")
    for kind in ("kept", "stopped", "planned-kept", "planned-stopped"):
        assert timeline.locator(f"rect.seg.{kind}").count() == 0, kind
    row = timeline.locator("g.group-row[data-group=p5-workers]")
    assert row.locator("rect.seg.running").count() >= 1
    assert row.locator("rect.seg.planned-running").count() >= 1
    assert "kept running while stopped" not in page.locator("ul.legend").inner_text()
    actions = page.locator("p.actions").inner_text()
    assert "Stop now" in actions and "Release" not in actions  # no hold: nothing to release
    assert "Start now" not in actions  # it never stopped: a start has nothing to restore
    page = laptop.goto(week.url + "/")
    row_actions = page.locator("tr[data-cluster=p5-training] td.row-actions").inner_text()
    assert "Start now" not in row_actions and "Stop now" in row_actions, row_actions
    laptop.clean()


def _smallest_text_px(page: Any, selector: str) -> float:
    """The smallest rendered font size (CSS px) of any text in the SVGs matching ``selector``."""
    return float(
        page.evaluate(
            """sel => Math.min(...[...document.querySelectorAll(sel)].flatMap(svg => {
                const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
                return [...svg.querySelectorAll('text')].map(t => parseFloat(t.getAttribute('font-size')) * scale);
            }))""",
            selector,
        )
    )


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
def test_the_timeline_draws_nothing_before_the_cluster_existed_and_dates_every_tooltip(
    browser: Any, week: DemoWeek, viewport: str
) -> None:
    watched = Watched(browser, LAPTOP if viewport == "laptop" else PHONE)
    try:
        created = week.dashboard.cluster("trn1-research")["timeline"]["created"]
        assert created is not None
        page = watched.goto(week.url + "/clusters/trn1-research")
        page.get_by_role("link", name="◀ a week earlier").click()  # a window that opens before creation
        rects = page.locator("svg.timeline rect.seg")
        assert rects.count() > 0
        starts = rects.evaluate_all("rs => rs.map(r => r.getAttribute('data-from'))")
        assert min(datetime.fromisoformat(x) for x in starts) >= datetime.fromisoformat(created), (starts, created)
        assert page.locator("svg.timeline line.created").count() == 1
        # Every tooltip names the day of the month at both ends ("Sun 29 Nov 05:30 - Sun 6 Dec 05:30").
        titles = page.locator("svg.timeline rect.seg title").all_text_contents()
        dated = re.compile(r": \w{3} \d{1,2} \w{3} \d\d:\d\d - \w{3} \d{1,2} \w{3} \d\d:\d\d ")
        assert titles and all(dated.search(t) for t in titles), titles[:3]
        assert _smallest_text_px(page, "svg.timeline") >= 11
        watched.clean()
    finally:
        watched.context.close()


def test_timeline_stays_readable_on_a_phone(phone: Watched, week: DemoWeek) -> None:
    page = phone.goto(week.url + "/clusters/g5-dev")
    svg = page.locator("svg.timeline")
    assert svg.bounding_box()["width"] >= 700  # it scrolls inside its box rather than shrinking its text
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"] + 1
    assert svg.locator("rect.seg.shortfall").count() >= 1
    # It opens with "now" in view (not on the oldest day of the week), and its labels are 11 px or more.
    wrap, now = page.locator(".timeline-wrap").bounding_box(), svg.locator("line.now").bounding_box()
    assert wrap["x"] <= now["x"] <= wrap["x"] + wrap["width"], (wrap, now)
    assert _smallest_text_px(page, "svg.timeline") >= 11
    _shot(page, "cluster-g5-dev-phone")
    phone.clean()


def test_start_confirm_page_previews_each_group_and_the_cost(laptop: Watched, week: DemoWeek) -> None:
    page = laptop.goto(week.url + "/clusters/g5-dev/actions/start")
    table = page.locator("table.preview").inner_text()
    assert "g5-workers" in table and "back to 6" in table and "back to 1" in table
    assert "Bills $" in page.locator("p.cost").inner_text()
    _shot(page, "confirm-start-g5-dev")
    page = laptop.goto(week.url + "/clusters/g5-dev/actions/stop")
    assert "already stopped: nothing would be sent" in page.locator(".nothing").inner_text()
    assert page.get_by_role("button", name="Confirm stop").is_disabled()
    page = laptop.goto(week.url + "/clusters/p5-training/actions/stop")
    table = page.locator("table.preview").inner_text()
    assert "stays at 4: scarce capacity" in table
    assert "every group with nodes is protected" in page.locator(".nothing").inner_text()
    laptop.clean()


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
def test_one_time_zone_setting_is_kept_for_every_page(browser: Any, week: DemoWeek, viewport: str) -> None:
    watched = Watched(browser, LAPTOP if viewport == "laptop" else PHONE)
    try:
        page = watched.goto(week.url + "/")
        page.locator("header input[name=tz]").fill("Asia/Tokyo")
        page.locator("header form.tz-pick").get_by_role("button", name="Set").click()
        page.wait_for_url("**/?tz=Asia%2FTokyo")
        assert "JST" in page.locator("tr[data-cluster=g5-dev] td[data-label=next]").inner_text()
        assert "JST" in page.locator("ul.transitions").inner_text()
        week_events = page.locator("ul.week").inner_text()
        assert "Tue 1 Dec 22:00 UTC (Wed 2 Dec 07:00 JST)" in week_events, week_events  # UTC, and yours beside it
        # Other pages, reached without ?tz=: the same zone, from the one setting.
        page = watched.goto(week.url + "/clusters/g5-dev")
        assert page.locator("header input[name=tz]").input_value() == "Asia/Tokyo"
        assert "JST" in page.locator("h2 small").first.inner_text()
        titles = page.locator("svg.timeline rect.seg title").all_text_contents()
        assert titles and all(t.rstrip().split(": ")[1].endswith("JST") for t in titles), titles[:3]
        assert "JST" in page.locator("p.facts").inner_text()
        assert "JST" in page.locator("details.markers li").first.text_content()
        page = watched.goto(week.url + "/schedules")
        assert page.locator("#s-training-hours h3").nth(1).inner_text() == "In Asia/Tokyo (yours)"
        assert _axe(page) == []
        watched.clean()
    finally:
        watched.context.close()


# ---- the Savings page -------------------------------------------------------------------------------


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
def test_savings_charts_side_by_side_share_one_scale_and_their_text_is_readable(
    browser: Any, week: DemoWeek, viewport: str
) -> None:
    watched = Watched(browser, LAPTOP if viewport == "laptop" else PHONE)
    try:
        page = watched.goto(week.url + "/savings")
        charts = page.locator("svg.bars")
        assert charts.count() == 4
        # The three per-night charts: one bar height per dollar, whichever chart a bar is in.
        per_dollar = []
        for i in range(3):
            for rect in charts.nth(i).locator("rect:has(title)").all():
                value = float(
                    re.findall(r"\$(-?[\d,.]+)$", rect.locator("title").text_content() or "")[0].replace(",", "")
                )
                if abs(value) >= 100:  # smaller bars are drawn at the 0.5-unit minimum
                    per_dollar.append((i, abs(value), float(rect.get_attribute("height") or 0)))
        assert {i for i, _, _ in per_dollar} == {0, 1, 2}, per_dollar  # every chart has bars worth comparing
        value, height = max((v, h) for _, v, h in per_dollar)
        scale = height / value  # the tallest bar anywhere sets the units; every other bar is drawn in them
        assert all(abs(h - v * scale) <= 0.2 for _, v, h in per_dollar), per_dollar
        assert _smallest_text_px(page, "svg.bars") >= 11
        assert page.evaluate("document.documentElement.scrollWidth") <= watched.page.viewport_size["width"] + 1
        watched.clean()
    finally:
        watched.context.close()


# ---- the schedule editor ---------------------------------------------------------------------------


def _cells(form: Any) -> Any:
    return form.locator("table.grid input[type=checkbox]")


def test_the_grid_by_keyboard_is_one_tab_stop_and_paints_with_arrows(laptop: Watched, week: DemoWeek) -> None:
    page = laptop.goto(week.url + "/schedules?tz=UTC")
    form = page.locator("#s-training-hours form.grid-form")
    assert _cells(form).evaluate_all("bs => bs.filter(b => b.tabIndex === 0).length") == 1
    form.get_by_role("button", name="Copy the day").focus()
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert focused == "Mon 00:00"  # the whole grid is one stop
    presses = 0
    while page.evaluate("document.activeElement.textContent") != "Save training-hours" and presses < 20:
        page.keyboard.press("Tab")
        presses += 1
    assert presses <= 3, presses  # from the grid to Save: the token field, then the button
    page.locator("#s-training-hours input[value='0-0']").focus()
    page.keyboard.press("ArrowDown")  # Tue 00:00
    page.keyboard.press("Space")
    assert page.locator("#s-training-hours input[value='1-0']").is_checked()
    page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("Shift+ArrowRight")
    assert page.locator("#s-training-hours input[value='1-2']").is_checked()
    hours = form.locator(".hours").inner_text()
    assert hours.startswith("running 70.75 h a week"), hours  # 70 h of Mon-Fri 07-21, plus three quarters
    laptop.clean()


def test_presets_copy_a_day_and_the_saving_while_painting(laptop: Watched, week: DemoWeek) -> None:
    page = laptop.goto(week.url + "/schedules?tz=UTC")
    form = page.locator("#s-berlin-office form.grid-form")
    form.get_by_role("button", name="Clear").click()
    assert form.locator(".hours").inner_text().startswith("running 0 h a week, stopped 168 h (100%)")
    form.get_by_role("button", name="Office hours (Mon-Fri 08-19)").click()
    assert form.locator(".hours").inner_text().startswith("running 55 h a week, stopped 113 h (67%)")
    assert "a week not billed" in form.locator(".hours").inner_text()  # g5-dev's sizes, priced
    form.locator("select[name=copy-from]").select_option("0")
    form.locator("select[name=copy-to]").select_option("5")  # Saturday like Monday
    form.get_by_role("button", name="Copy the day").click()
    assert form.locator("input[value='5-40']").is_checked() and not form.locator("input[value='6-40']").is_checked()
    # Berlin's public holidays are overlaid: the schedule stays stopped on them whatever the grid says.
    assert "25 Dec" in page.locator("#s-berlin-office p.holidays").inner_text()
    _shot(page, "schedules-laptop")
    laptop.clean()


def test_the_grid_paints_by_touch(phone: Watched, week: DemoWeek) -> None:
    page = phone.goto(week.url + "/schedules?tz=UTC")
    form = page.locator("#s-research-cron form.grid-form")
    row = [form.locator(f"input[value='6-{s}']") for s in range(40, 46)]  # Sunday 10:00 to 11:30
    assert not any(c.is_checked() for c in row)
    row[0].scroll_into_view_if_needed()
    boxes = [c.bounding_box() for c in (row[0], row[-1])]
    y = boxes[0]["y"] + boxes[0]["height"] / 2
    x0, x1 = boxes[0]["x"] + boxes[0]["width"] / 2, boxes[1]["x"] + boxes[1]["width"] / 2
    cdp = phone.context.new_cdp_session(page)
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x0, "y": y}]})
    for step in range(1, 11):
        x = x0 + (x1 - x0) * step / 10
        cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [{"x": x, "y": y}]})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    assert all(c.is_checked() for c in row), [c.is_checked() for c in row]
    assert not form.locator("input[value='6-46']").is_checked()
    _shot(page, "schedules-phone")
    phone.clean()


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
def test_the_grid_opens_on_the_working_hours_and_a_schedule_that_stops_nothing_is_not_called_stopped(
    browser: Any, week: DemoWeek, viewport: str
) -> None:
    watched = Watched(browser, LAPTOP if viewport == "laptop" else PHONE)
    try:
        page = watched.goto(week.url + "/schedules?tz=UTC")
        article = page.locator("#s-training-hours")  # Mon-Fri 07:00-21:00 Los Angeles, used by p5-training
        wrap = article.locator("form.grid-form .scroll")
        box = wrap.bounding_box()
        head = article.locator("form.grid-form tbody th").first.bounding_box()

        def shown(value: str) -> bool:
            cell = article.locator(f"input[value='{value}']").bounding_box()
            return (
                head["x"] + head["width"] - 1 <= cell["x"] and cell["x"] + cell["width"] <= box["x"] + box["width"] + 1
            )

        first_on = article.locator("form.grid-form input:checked").first.get_attribute("value")
        assert shown(first_on), first_on  # the working day's first quarter is on the first screen
        if viewport == "phone":
            assert not shown("0-0")  # not opened on midnight
        sizes = article.locator("table.grid th").evaluate_all(
            "ths => ths.map(t => parseFloat(getComputedStyle(t).fontSize))"
        )
        assert min(sizes) >= 11, min(sizes)  # the hours and days read at 11 px or more
        # p5-training (its only cluster) stops nothing: every group with nodes is protected.
        hours = article.locator(".hours").inner_text()
        assert "stopped 98 h" not in hours and "p5-training stops nothing" in hours, hours
        assert "p5-training: never stopped" in article.locator("p.never-stopped").inner_text()
        watched.clean()
    finally:
        watched.context.close()


# ---- accessibility, on every page at both widths --------------------------------------------------


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
def test_the_cluster_page_says_each_groups_ami_next_morning_and_the_way_back_for_a_refused_release(
    browser: Any, week: DemoWeek, viewport: str
) -> None:
    """Issue 32: a release refused after its first morning failed is named on its group's row with the
    command that allows it again; every other group says where its AMI stands (a phone shows the label)."""
    from hyperpod_scheduler.store import open_store
    from hyperpod_scheduler.store.records import ImageState

    store = open_store(week.state)
    key = week.dashboard.cluster("p5-training")["key"]
    before = store.get(key)
    assert before is not None
    store.put(before.evolve(images=ImageState(refused={"p5-workers": ["9.0.0"]})), expected_version=before.version)
    watched = Watched(browser, LAPTOP if viewport == "laptop" else PHONE)
    try:
        page = watched.goto(week.url + "/clusters/p5-training")
        cells = page.locator("td[data-label='AMI next morning']")
        texts = [t.strip() for t in cells.all_inner_texts()]
        assert len(texts) == 3 and all(texts), texts  # every group says something
        (refused,) = [t for t in texts if "refused" in t]
        assert "AMI 9.0.0 refused after a first morning failed on it" in refused
        assert "allow-image p5-training p5-workers" in refused
        row = page.locator("tr", has_text="9.0.0 refused")
        assert row.is_visible() and row.bounding_box()["width"] <= page.viewport_size["width"]
        if viewport == "phone":  # the cards layout labels each cell
            label = cells.first.evaluate("e => getComputedStyle(e, '::before').content")
            assert "AMI next morning" in label
        assert _axe(page) == []
        _shot(page, f"cluster-ami-next-morning-{viewport}")
        watched.clean()
    finally:
        watched.context.close()
        now = store.get(key)
        assert now is not None
        store.put(now.evolve(images=before.images), expected_version=now.version)


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
def test_every_page_has_zero_axe_violations(browser: Any, week: DemoWeek, viewport: str) -> None:
    watched = Watched(browser, LAPTOP if viewport == "laptop" else PHONE)
    try:
        found = {}
        for name, path in PAGES.items():
            page = watched.goto(week.url + path)
            violations = _axe(page)
            if violations:
                found[name] = violations
            if name == "savings":
                _shot(page, f"savings-{viewport}")
        assert found == {}, json.dumps(found, indent=1)
        watched.clean()
    finally:
        watched.context.close()


def test_pages_read_fine_without_javascript(browser: Any, week: DemoWeek) -> None:
    context = browser.new_context(viewport=PHONE, java_script_enabled=False)
    page = context.new_page()
    page.goto(week.url + "/clusters/p5-training")
    assert page.locator("svg.timeline").is_visible()
    page.goto(week.url + "/savings")
    assert page.locator("svg.bars").count() == 4
    page.goto(week.url + "/schedules")
    assert page.locator(".tools").first.is_hidden()  # presets need the script; the checkboxes do not
    context.close()


# ---- actions (these change the demo's state: they run last) -------------------------------------


def test_a_wrong_token_is_refused_and_keeps_what_was_typed(laptop: Watched, week: DemoWeek) -> None:
    page = laptop.goto(week.url + "/clusters/g5-dev")
    page.get_by_role("link", name="Start now").click()
    page.fill("input[name=by]", "mallory")
    page.fill("input[name=reason]", "demo at nine")
    page.fill("input[name=token]", "not-the-token")
    page.get_by_role("button", name="Confirm start").click()
    refused = page.locator("p.refused").inner_text()
    assert "Refused" in refused and "token" in refused
    # The same form again, with the name and the reason as typed; the token field empty and focused.
    assert page.input_value("input[name=by]") == "mallory"
    assert page.input_value("input[name=reason]") == "demo at nine"
    assert page.input_value("input[name=token]") == ""
    # Chromium applies autofocus at a rendering step after the load event, not at parse: wait for it
    # (Playwright's expect retries up to its timeout) rather than read the focus once; under load the
    # single read came before that step.
    from playwright.sync_api import expect

    expect(page.locator("input[name=token]")).to_be_focused()
    assert "g5-workers" in page.locator("table.preview").inner_text()
    assert _axe(page) == []
    _shot(page, "action-refused")
    page = laptop.goto(week.url + "/clusters/g5-dev")
    assert "mallory" not in page.locator("table.history").inner_text()


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
def test_the_fleet_page_has_a_skip_link_and_row_actions_a_few_tabs_away(
    browser: Any, week: DemoWeek, viewport: str
) -> None:
    watched = Watched(browser, LAPTOP if viewport == "laptop" else PHONE)
    try:
        page = watched.goto(week.url + "/")
        page.keyboard.press("Tab")
        skip = page.evaluate("[document.activeElement.textContent, document.activeElement.getBoundingClientRect().top]")
        assert skip[0] == "Skip to the clusters" and skip[1] >= 0  # shown when focused
        page.keyboard.press("Enter")
        page.keyboard.press("Tab")
        first = page.locator("tr.cluster-row").first.get_attribute("data-cluster")
        assert page.evaluate("document.activeElement.textContent") == first  # three keys to the first cluster
        # Each row acts for its cluster: a stopped g5-dev offers Start now, a couple of Tabs from its name.
        row = page.locator("tr[data-cluster=g5-dev]")
        row.get_by_role("link", name="g5-dev", exact=True).focus()
        presses = 0
        while page.evaluate("document.activeElement.textContent") != "Start now g5-dev" and presses < 6:
            page.keyboard.press("Tab")
            presses += 1
        assert presses <= 3, presses
        page.keyboard.press("Enter")
        page.wait_for_url("**/clusters/g5-dev/actions/start")
        assert page.locator("h1").inner_text() == "Confirm: start g5-dev"
        assert (
            "Stop now"
            in watched.goto(week.url + "/").locator("tr[data-cluster=p5-training] td.row-actions").inner_text()
        )
        watched.clean()
    finally:
        watched.context.close()


def test_hold_set_through_the_page_shows_in_status_the_flags_and_the_timeline(laptop: Watched, week: DemoWeek) -> None:
    page = laptop.goto(week.url + "/clusters/trn1-research")
    page.get_by_role("link", name="Hold until…").click()
    page.select_option("select[name=state]", "running")
    page.fill("input[name=until]", "2026-12-08T18:00Z")
    page.fill("input[name=by]", "browser-test")
    page.fill("input[name=reason]", "demo day")
    page.fill("input[name=token]", TOKEN)
    _shot(page, "hold-confirm")
    page.get_by_role("button", name="Confirm hold").click()
    assert "held running until 2026-12-08" in page.locator(".message").inner_text()
    assert _status(week)["trn1-research"]["hold"]["state"] == "running"
    page = laptop.goto(week.url + "/clusters/trn1-research")
    assert page.locator("svg.timeline rect.seg.planned-held").count() == 3
    assert "Release the hold" in page.locator("p.actions").inner_text()
    assert "held running until Tue 8 Dec 18:00 UTC: demo day" in page.locator("table.history").inner_text()
    page = laptop.goto(week.url + "/")
    row = page.locator("tr[data-cluster=trn1-research]").inner_text()
    assert "held running until" in row and "by dashboard:browser-test" in row
    _shot(page, "fleet-after-hold", full=False)
    laptop.clean()
    week.dashboard.act("trn1-research", "release", TOKEN, "browser-test")  # leave the week as it was


def test_painting_the_schedule_grid_saves_it(laptop: Watched, week: DemoWeek) -> None:
    page = laptop.goto(week.url + "/schedules?tz=UTC")
    form = page.locator("#s-research-cron form.grid-form")
    sunday_noon = form.locator("input[value='6-48']")
    assert not sunday_noon.is_checked()
    sunday_noon.click()
    assert sunday_noon.is_checked()
    form.locator("input[name=token]").fill(TOKEN)
    form.get_by_role("button", name="Save research-cron").click()
    assert "Saved schedule research-cron" in page.locator(".ok").inner_text()
    assert page.locator("#s-research-cron input[value='6-48']").is_checked()
    assert "Sun 12:00-12:15" in Path(str(week.dashboard.config_file)).read_text()
    laptop.clean()


def _ask_for_approval(week: DemoWeek, token: str, ask_id: str) -> str:
    """A pending release request for p5-training's next scheduled stop, as ``approvals.ask_if_due``
    stores it (the token only as its SHA-256); returns the page's address with the single-use link."""
    from hyperpod_scheduler.engine.approvals import token_hash
    from hyperpod_scheduler.store.records import Approval

    dash = week.dashboard
    ctx = dash.context()
    now = ctx.now()
    g = dash.governed(ctx, "p5-training")
    stop = next(t.at for t in g.schedule.next_transitions(now, 4) if t.state == "stopped")
    key = (ctx.engine().accounts.known(g.ref) or g.ref).key
    record = ctx.store.get(key)
    assert record is not None
    ask = Approval(
        id=ask_id,
        token_sha256=token_hash(token),
        groups=["p5-workers"],
        transition_at=stop,
        asked_at=now,
        expires_at=stop,
    )
    ctx.store.put(record.evolve(approvals=[*record.approvals, ask], updated_at=now), expected_version=record.version)
    return f"{week.url}/clusters/p5-training/approvals/{ask_id}?t={token}"


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
def test_the_approval_page_says_what_is_released_what_it_costs_and_when_in_your_zone(
    browser: Any, week: DemoWeek, viewport: str
) -> None:
    url = _ask_for_approval(week, f"approve-{viewport}-token", f"browser-{viewport}")
    # Tokyo, so the viewer's own time differs from UTC and from the schedule's Los Angeles.
    watched = Watched(browser, LAPTOP if viewport == "laptop" else PHONE, timezone_id="Asia/Tokyo")
    try:
        page = watched.goto(url)
        text = page.locator("main").inner_text()
        assert "4 × p5.48xlarge" in page.locator("strong.nodes").inner_text()
        money = page.locator("ul.money").inner_text()
        assert "saves $3,932.80 that night (10.0 h at $393.28/h)" in money, money
        assert "billing $3,932.80 a night" in money
        assert "05:00 UTC" in text and "14:00 GMT+9, your time" in text, text
        header = page.locator("header").inner_text()
        assert "access token" not in header and "single-use link" in header
        assert page.locator("header form").count() == 0  # a GET form would drop the link's token
        approve = page.get_by_role("button", name="Approve: release 4 × p5.48xlarge")
        refuse = page.get_by_role("button", name="Refuse: keep them running")
        look = "b => [getComputedStyle(b).backgroundColor, getComputedStyle(b).color]"
        assert approve.evaluate(look) != refuse.evaluate(look)
        assert _axe(page) == []
        _shot(page, f"approval-{viewport}")
        page.fill("input[name=by]", "browser-test")
        refuse.click()  # leave the week without a pending release
        assert "refused by browser-test" in page.locator(".message").inner_text()
        watched.clean()
    finally:
        watched.context.close()


def test_after_a_start_the_page_names_the_groups_links_to_progress_and_stop_stays(
    laptop: Watched, phone: Watched, week: DemoWeek
) -> None:
    page = laptop.goto(week.url + "/clusters/g5-dev/actions/start")
    page.fill("input[name=by]", "browser-test")
    page.fill("input[name=token]", TOKEN)
    page.get_by_role("button", name="Confirm start").click()
    assert page.locator("h1").inner_text() == "start g5-dev: sent"
    changes = page.locator("ul.changes").inner_text()
    assert "g5-workers: 0 → 6" in changes and "controller: 0 → 1" in changes, changes
    _shot(page, "action-done")
    page.get_by_role("link", name="Follow the start on g5-dev's page (timeline and history)").click()
    page.wait_for_url("**/clusters/g5-dev")
    actions = page.locator("p.actions").inner_text()
    assert "starting" in page.locator(".facts .state").inner_text()
    assert "Stop now" in actions and "Start now" not in actions, actions  # a start sent by mistake is stoppable
    page = phone.goto(week.url + "/")
    assert "Stop now" in page.locator("tr[data-cluster=g5-dev] td.row-actions").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"] + 1
    laptop.clean()
    phone.clean()
