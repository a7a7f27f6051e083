"""The dashboard as an ASGI app: server-rendered pages, a JSON API under /api, an OpenAPI document.

Reading needs nothing; every change (hold, release, stop, start, schedule edit) needs the access token
the dashboard was started with, sent as ``Authorization: Bearer`` (API) or typed into the confirm form.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from botocore.exceptions import BotoCoreError, ClientError
from fastapi import Body, Depends, FastAPI, Form, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from markupsafe import Markup
from pydantic import BaseModel, Field, StrictBool
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from hyperpod_scheduler import __version__
from hyperpod_scheduler.app import wording
from hyperpod_scheduler.app.actions import MAX_REASON
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.inputs.redact import scrub
from hyperpod_scheduler.inputs.text import clean, unsafe_in_line
from hyperpod_scheduler.web import acting, places, zones
from hyperpod_scheduler.web import grid as grids
from hyperpod_scheduler.web.edge import Edge, HostAllowList
from hyperpod_scheduler.web.fleet_query import FleetQuery
from hyperpod_scheduler.web.service import ACTIONS, Dashboard, NotFound, Refused

HERE = Path(__file__).parent
# How long a server shutting down waits for its refresh's calls in flight (each is bounded by its own
# deadlines too; the refresh's threads are daemons, so the process ends after this either way).
SHUTDOWN_S = 10.0
_MAX_MESSAGE = 300
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Bad input (one line naming the field and value)"},
    404: {"description": "Unknown cluster or schedule"},
    409: {"description": "Several clusters have this name: the message names each; say which with account and region"},
    421: {"description": "The Host header names a host this dashboard does not answer for"},
    502: {"description": "An AWS call failed (e.g. tag discovery without credentials)"},
}
WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    401: {"description": "Access token missing or wrong"},
    403: {"description": "Read-only dashboard (no token configured)"},
    413: {"description": "Request body too large (refused before it is read)"},
}


class HoldBody(BaseModel):
    state: str = Field("running", description="Keep the cluster 'running' or 'stopped'.")
    until: str | None = Field(None, description="ISO 8601 instant the hold ends; none: until released.")
    reason: str = ""
    by: str = Field("", description="Who asks (recorded in the history).")


class ActBody(BaseModel):
    reason: str = ""
    by: str = Field("", description="Who asks (recorded in the history).")


class GridBody(BaseModel):
    # Strict: true or false only. Lax, "on", "yes" and 1 were taken as true (the schema says booleans).
    grid: list[list[StrictBool]] = Field(
        description="7 rows (Mon..Sun) of 96 15-minute cells, in the schedule's timezone."
    )


def _bearer(authorization: str | None) -> str | None:
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return None


def _status(exc: Exception) -> int:
    if isinstance(exc, Refused):
        return exc.status
    if isinstance(exc, places.Ambiguous):
        return 409
    return 404 if isinstance(exc, NotFound) else 400


# A quoted value, or one ``quoted`` cut short (its closing quote cut off with the rest: ``'xxxx...``).
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|'[^'\n]*?\.\.\.|\"[^\"\n]*?\.\.\.")


def _shown(exc: Exception) -> str:
    # One line, control characters escaped, and no value from the request echoed back: an error says
    # which field and what is wrong, the person who sent it knows what they sent.
    text = _QUOTED.sub("(value not shown)", scrub(clean(str(exc), one_line=True)))
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def _typed_back(value: str) -> str:
    """``value`` to fill a form with again, or "" when no field would take it (``check_reason``'s rules)."""
    return "" if len(value) > MAX_REASON or unsafe_in_line(value) else value


def _texts(form: Any, field: str) -> list[str]:
    """A form's values of ``field`` as text; a file sent in its place is refused (``str`` of an upload
    gave its headers, garbled into the error that followed)."""
    values = form.getlist(field)
    if any(not isinstance(v, str) for v in values):
        raise HyperpodSchedulerError(f"{field}: a file was sent where the form's text was expected")
    return [str(v) for v in values]


def _text(form: Any, field: str) -> str:
    """A form's one value of ``field`` as text ("" when absent), as ``_texts`` checks it."""
    values = _texts(form, field)
    return values[0] if values else ""


def _all_of(query: FleetQuery) -> FleetQuery:
    """A search or filter without ``per_page``: every match, on one page (the API's rows as before)."""
    return dataclasses.replace(query, page=1, per_page=1_000_000)


def _place(
    account: Annotated[str | None, Query(description="The cluster's account, when several have its name")] = None,
    region: Annotated[str | None, Query(description="The cluster's region, when several have its name")] = None,
    profile: Annotated[str | None, Query(description="The profile reaching it, when its account is not known")] = None,
) -> places.Place:
    """Which of several same-named clusters an address means (none given: the only one of the name)."""
    return places.asked(account, region, profile)


Where = Annotated[places.Place, Depends(_place)]


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "request"


def create_app(dash: Dashboard, *, allowed_hosts: Iterable[str] = ()) -> FastAPI:
    """The dashboard app. It answers for loopback names, IP addresses and ``allowed_hosts`` only. Served,
    it starts reading the fleet from AWS as it starts (``Dashboard.warm``): the first viewer seldom meets
    rows not read yet, and is answered from the store at once when they do."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        dash.warm()  # starts the refresh beside the server and returns: the server is up at once
        yield
        # Shutting down: the refresh sends nothing more, and the calls in flight are waited for (within
        # SHUTDOWN_S in all), in a thread of its own so the event loop is not held while they end.
        await run_in_threadpool(dash.looks.close, timeout_s=SHUTDOWN_S)

    if dash.prewarm not in dash.looks.after:
        dash.looks.after.append(dash.prewarm)  # a refresh that ends builds the rows again for the next viewer
    app = FastAPI(
        lifespan=lifespan,
        title="hyperpod-scheduler dashboard",
        version=__version__,
        description="Which clusters sleep tonight, what comes back when, what it saved. JSON under /api.",
        # The interactive docs pages load scripts from a CDN; the document itself is enough.
        docs_url=None,
        redoc_url=None,
        # A path with a slash at its end is a path no route has: a 404 in the API's error shape, not
        # Starlette's 307 to the path without it (undocumented, and a `%2F` at the end of a cluster's
        # action was decoded to that slash and redirected to another action's address).
        redirect_slashes=False,
    )
    app.add_middleware(
        Edge,
        hosts=HostAllowList(allowed_hosts),
        token_ok=dash.token_matches,
        read_only=lambda: dash.read_only,
    )

    @app.middleware("http")
    async def first_to_viewers(request: Request, call_next: Any) -> Response:
        # While a request is answered, the fleet's refresh sends no new call (app.looks: on a small
        # machine its answers, parsed beside a page, would make the viewer wait for the CPU).
        with dash.looks.serving():
            response: Response = await call_next(request)
        return response

    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals["hours"] = wording.hours  # the CLI's way of writing hours, on the pages too
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    def zone_of(request: Request) -> ZoneInfo | None:
        return zones.chosen(request.query_params.get("tz"), request.cookies.get(zones.COOKIE))

    def page(request: Request, name: str, status: int = 200, **values: Any) -> Response:
        try:
            zone = zone_of(request)
        except HyperpodSchedulerError:
            zone = None  # the page itself reports the bad ?tz= (the schedules page names the field)
        values.update(
            read_only=dash.read_only, version=__version__, standalone=False, Markup=Markup, tz=zone.key if zone else ""
        )
        values.setdefault("local", zones.local_text(zone))
        response = templates.TemplateResponse(request, name, values, status_code=status)
        if zone is not None and request.query_params.get("tz"):
            # One setting for every page: a zone picked on one page is the zone of all of them.
            response.set_cookie(zones.COOKIE, zone.key, max_age=zones.MAX_AGE, samesite="lax", httponly=True)
        return response

    @app.exception_handler(HyperpodSchedulerError)
    async def _problem(request: Request, exc: HyperpodSchedulerError) -> Response:
        status = _status(exc)
        if request.url.path.startswith("/api"):
            return JSONResponse({"error": _shown(exc)}, status_code=status)
        return page(
            request, "message.html", status, title="Refused" if status in (401, 403) else "Error", message=_shown(exc)
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        # No route for the path (a cluster name with a slash) or the method: the same one-line shape as
        # every other error, not Starlette's {"detail": ...}.
        message = _shown(ValueError(str(exc.detail)))
        if request.url.path.startswith("/api"):
            return JSONResponse({"error": message}, status_code=exc.status_code, headers=exc.headers)
        return page(request, "message.html", exc.status_code, title="Error", message=message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        # FastAPI's own answer quotes every input back (a 50 MiB text body came back whole): say where
        # and what, never the value.
        problems = "; ".join(f"{_field(tuple(e.get('loc', ())))}: {e.get('msg', 'invalid')}" for e in exc.errors())
        message = _shown(ValueError(problems or "invalid request"))
        if request.url.path.startswith("/api"):
            return JSONResponse({"error": message}, status_code=422)
        return page(request, "message.html", 422, title="Error", message=message)

    @app.exception_handler(ClientError)
    @app.exception_handler(BotoCoreError)
    async def _aws(request: Request, exc: Exception) -> Response:
        if isinstance(exc, ClientError):
            err = exc.response.get("Error", {})
            message = f"AWS {exc.operation_name} failed: {err.get('Code', 'Error')}: {err.get('Message', '')}"
        else:
            message = f"AWS: {exc}"
        message = _shown(ValueError(message))
        if request.url.path.startswith("/api"):
            return JSONResponse({"error": message}, status_code=502)
        return page(request, "message.html", 502, title="AWS error", message=message)

    # ---- JSON API ---------------------------------------------------------------------------------
    @app.get("/api/fleet", tags=["read"], responses=ERRORS, response_model=list[dict[str, Any]])
    def api_fleet(
        q: Annotated[str | None, Query(description="Search: words found in the name, account or region")] = None,
        state: Annotated[str | None, Query(description="Only clusters in this state (running, stopped, ...)")] = None,
        region: Annotated[str | None, Query(description="Only clusters in this region")] = None,
        account: Annotated[str | None, Query(description="Only clusters in this account")] = None,
        page: Annotated[str | None, Query(description="Page number (with per_page; from 1)")] = None,
        per_page: Annotated[str | None, Query(description="Rows a page (1 to 500); none: every row")] = None,
    ) -> Response:
        """Every cluster (governed first): schedule, state, hold, next transition, protected groups, month's
        net saving. With a search, a filter or ``per_page``: the matching rows, a page at a time; the
        headers ``X-Total-Count`` (every cluster) and ``X-Matched-Count`` (those that match) say how many."""
        asked = any(v not in (None, "") for v in (q, state, region, account, page, per_page))
        query = FleetQuery.parse(q, state, region, account, page, per_page) if asked else None
        if query is not None and not per_page and not page:
            query = _all_of(query)  # a search or a filter alone: every match, as the rows were before
        body, total, matched = dash.fleet_json(query)
        headers = {"X-Total-Count": str(total), "X-Matched-Count": str(matched)}
        return Response(body, media_type="application/json", headers=headers)

    @app.get("/api/fleet/summary", tags=["read"], responses=ERRORS)
    def api_fleet_summary() -> dict[str, Any]:
        """The Fleet page's strip (counts, $ an hour now, the next 24 hours, the month's saving, FSx) and
        the week's events worth a flag (blocked stops, shortfalls and how they ended, refusals)."""
        page = dash.fleet_page()
        return {"as_of": page["as_of"], "summary": page["summary"], "week": page["week"], "paused": page["paused"]}

    @app.get("/api/clusters/{name}", tags=["read"], responses=ERRORS)
    def api_cluster(
        name: str,
        where: Where,
        from_: Annotated[str | None, Query(alias="from", description="ISO start of the timeline window")] = None,
    ) -> dict[str, Any]:
        """One cluster: groups, timeline (a week back, two days ahead, or from ``from``), history as
        sentences, checkpoint audits, ready-by lead."""
        return dash.cluster(name, from_ or None, place=where)

    @app.get("/api/clusters/{name}/preview/{action}", tags=["read"], responses=ERRORS)
    def api_preview(name: str, action: str, where: Where) -> dict[str, Any]:
        """What a stop or start would do per group, and its cost per hour (nothing is sent)."""
        if action not in ("stop", "start"):
            raise NotFound(f"action: {action!r} has no preview (stop or start)")
        return dash.preview(name, action, where)

    @app.get("/api/savings", tags=["read"], responses=ERRORS)
    def api_savings(
        since: Annotated[str | None, Query(description="ISO start (default: 30 days before until)")] = None,
        until: Annotated[str | None, Query(description="ISO end (default: now)")] = None,
    ) -> dict[str, Any]:
        """The cost report, per night and cumulative, with the charts as SVG."""
        return dash.savings(since, until)

    @app.get("/api/schedules", tags=["read"], responses=ERRORS)
    def api_schedules(tz: Annotated[str | None, Query(description="Viewer's IANA timezone")] = None) -> dict[str, Any]:
        """Each schedule as a 7x96 grid in its own timezone and in the viewer's."""
        return dash.schedules(tz)

    @app.put("/api/schedules/{name}", tags=["write"], responses=WRITE_ERRORS)
    def api_save_schedule(
        name: str, body: GridBody, authorization: Annotated[str | None, Header()] = None
    ) -> dict[str, Any]:
        """Replace a schedule's windows with a painted grid and write the config file."""
        return dash.save_schedule(name, body.grid, _bearer(authorization))

    @app.post("/api/clusters/{name}/hold", tags=["write"], responses=WRITE_ERRORS)
    def api_hold(
        name: str,
        body: Annotated[HoldBody, Body()],
        where: Where,
        authorization: Annotated[str | None, Header()] = None,
    ) -> dict[str, Any]:
        """Keep a cluster running (or stopped) until a time or until released."""
        return dash.act(name, "hold", _bearer(authorization), body.by, body.until, body.state, body.reason, where)

    @app.post("/api/clusters/{name}/release", tags=["write"], responses=WRITE_ERRORS)
    def api_release(
        name: str,
        body: Annotated[ActBody, Body()],
        where: Where,
        authorization: Annotated[str | None, Header()] = None,
    ) -> dict[str, Any]:
        """End a hold; the next tick applies the schedule."""
        return dash.act(name, "release", _bearer(authorization), body.by, reason=body.reason, place=where)

    @app.post("/api/clusters/{name}/stop", tags=["write"], responses=WRITE_ERRORS)
    def api_stop(
        name: str,
        body: Annotated[ActBody, Body()],
        where: Where,
        authorization: Annotated[str | None, Header()] = None,
    ) -> dict[str, Any]:
        """Stop now (sizes recorded, protected groups kept)."""
        return dash.act(name, "stop", _bearer(authorization), body.by, reason=body.reason, place=where)

    @app.post("/api/clusters/{name}/start", tags=["write"], responses=WRITE_ERRORS)
    def api_start(
        name: str,
        body: Annotated[ActBody, Body()],
        where: Where,
        authorization: Annotated[str | None, Header()] = None,
    ) -> dict[str, Any]:
        """Start now (recorded sizes restored)."""
        return dash.act(name, "start", _bearer(authorization), body.by, reason=body.reason, place=where)

    # ---- pages --------------------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def fleet_page(request: Request) -> Response:
        p = request.query_params
        query = FleetQuery.parse(p.get("q"), p.get("state"), p.get("region"), p.get("account"), p.get("page"),
                                 p.get("per_page"))  # fmt: skip
        shown = zones.fleet_in(dash.fleet_page(query), zone_of(request))
        return page(request, "fleet.html", f=shown)

    @app.get("/clusters/{name}", response_class=HTMLResponse, include_in_schema=False)
    def cluster_page(
        request: Request, name: str, where: Where, from_: Annotated[str | None, Query(alias="from")] = None
    ) -> Response:
        zone = zone_of(request)
        shown = dash.cluster(name, from_ or None, zone, where)
        zones.next_in(shown, zone, datetime.fromisoformat(shown["timeline"]["now"]))
        return page(request, "cluster.html", c=shown)

    @app.get("/savings", response_class=HTMLResponse, include_in_schema=False)
    def savings_page(request: Request, since: str | None = None, until: str | None = None) -> Response:
        return page(request, "savings.html", s=dash.savings(since or None, until or None))

    @app.get("/schedules", response_class=HTMLResponse, include_in_schema=False)
    def schedules_page(request: Request, tz: str | None = None, saved: str | None = None) -> Response:
        zone = zone_of(request)
        shown = dash.schedules(zone.key if zone else None)
        return page(request, "schedules.html", g=shown, saved=saved, slots=grids.SLOTS, tz_chosen=zone is not None)

    @app.post("/schedules/{name}", response_class=HTMLResponse, include_in_schema=False)
    async def save_schedule_page(request: Request, name: str) -> Response:
        form = await request.form()
        cells = _texts(form, "cell")
        token = _text(form, "token")
        tz = _text(form, "tz").strip()
        # Every field checked before anything is saved: a bad tz refused after the save left it saved.
        query = {"saved": name, **({"tz": grids.viewer_zone(tz).key} if tz else {})}  # checked, then encoded
        dash.save_schedule(name, grids.grid_from_cells(cells), token)
        return RedirectResponse(f"/schedules?{urlencode(query)}", status_code=303)

    @app.get("/clusters/{name}/actions/{action}", response_class=HTMLResponse, include_in_schema=False)
    def confirm_page(request: Request, name: str, action: str, where: Where) -> Response:
        if action not in ACTIONS:
            raise NotFound(f"action: {action!r} is not one of {', '.join(ACTIONS)}")
        preview = dash.preview(name, action, where) if action in ("stop", "start") else None
        zone = zone_of(request)
        shown = dash.cluster(name, None, zone, where)
        zones.next_in(shown, zone, datetime.fromisoformat(shown["timeline"]["now"]))
        return page(request, "confirm.html", c=shown, action=action, p=preview)

    @app.post("/clusters/{name}/actions/{action}", response_class=HTMLResponse, include_in_schema=False)
    def do_action(
        request: Request,
        name: str,
        action: str,
        where: Where,
        token: Annotated[str, Form()] = "",
        by: Annotated[str, Form()] = "",
        until: Annotated[str, Form()] = "",
        state: Annotated[str, Form()] = "running",
        reason: Annotated[str, Form()] = "",
    ) -> Response:
        if action not in ACTIONS:
            raise NotFound(f"action: {action!r} is not one of {', '.join(ACTIONS)}")
        # Taken before the action is sent: the result page names the groups it changes.
        preview = dash.preview(name, action, where) if action in ("stop", "start") else None
        try:
            result = dash.act(name, action, token, by, until or None, state, reason, where)
        except Refused as exc:
            # A wrong or missing token: the same form again, with what was typed (never the token).
            # Only what the form could have taken: a value with a control character or past the longest a
            # field takes is not typed back (it came back whole, escape codes and 100,000 characters).
            typed = {k: _typed_back(v) for k, v in {"by": by, "reason": reason, "until": until, "state": state}.items()}
            return page(
                request,
                "confirm.html",
                exc.status,
                c=dash.cluster(name, place=where),
                action=action,
                p=preview,
                typed=typed,
                refused=_shown(exc),
            )
        return page(request, "done.html", r=acting.result_view(name, action, result, preview, where.query()))

    @app.get("/clusters/{name}/approvals/{approval_id}", response_class=HTMLResponse, include_in_schema=False)
    def approval_page(request: Request, name: str, approval_id: str, where: Where, t: str = "") -> Response:
        shown = dash.approval(name, approval_id, t, where)
        response = page(request, "approval.html", a=shown, token=t if not shown["problem"] else "")
        response.headers["Referrer-Policy"] = "no-referrer"  # the token is in this page's address
        response.headers["Cache-Control"] = "no-store"
        return response

    @app.post("/clusters/{name}/approvals/{approval_id}", response_class=HTMLResponse, include_in_schema=False)
    def answer_approval(
        request: Request,
        name: str,
        approval_id: str,
        where: Where,
        t: Annotated[str, Form()] = "",
        by: Annotated[str, Form()] = "",
        decision: Annotated[str, Form()] = "",
    ) -> Response:
        if decision not in ("approve", "refuse"):
            raise HyperpodSchedulerError(f"decision: {decision!r} is not one of approve, refuse")
        result = dash.answer_approval(name, approval_id, t, decision == "approve", by, where)
        return page(
            request,
            "message.html",
            title=f"{name}: release {result['state']}",
            message=result["message"],
            back=f"/clusters/{name}" + (f"?{result['where']}" if result["where"] else ""),
        )

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok", "time": datetime.now().astimezone().isoformat()}

    return app
