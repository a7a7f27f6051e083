"""Where the AMI releases come from on real AWS (issue 32): no HyperPod API lists them, so the config's
``image_releases:`` is the source, and a group whose DescribeCluster status says a newer release exists
that no source knows is said to wait for one, never moved on a guess. The emulator plays AWS here; the
scheduler reads no catalogue of it when the config lists the releases."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hyperpod_scheduler.app.compose import Context, chain_clients
from hyperpod_scheduler.app.releases import release_source
from hyperpod_scheduler.config.load import parse_config
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.engine.images import ImageGap, Release, gap_line, gaps, plan
from hyperpod_scheduler.engine.ref import ImagePolicy
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store.records import ImageState
from tests.engine.conftest import START
from tests.engine.test_images import NAME, Rig, emulated, governed
from tests.engine.test_images_plan import _view

NOW = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


@pytest.fixture
def rig() -> Iterator[Rig]:
    with emulated() as made:
        yield made


def _config(rig: Rig, releases: list[dict[str, Any]]) -> Context:
    document = {
        "defaults": {"policy": {"image": "security", "image_groups": {"cpu": "pinned"}, "image_settle_days": 3}},
        "image_releases": releases,
    }
    return Context(parse_config(document), rig.store, chain_clients(lambda ref: rig.client), rig.emu.clock.now)


def test_the_config_list_is_the_release_source_and_its_date_is_what_settles(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No SageMaker endpoint of the emulator in the environment: the engine reads no catalogue of it.
    monkeypatch.delenv("AWS_ENDPOINT_URL_SAGEMAKER", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    week_ago = (START - timedelta(days=7)).date().isoformat()
    ctx = _config(rig, [{"version": "1.3.0", "released": week_ago, "security": True}])
    ref = governed({"image": "security", "image_groups": {"cpu": "pinned"}, "image_settle_days": 3})
    engine = ctx.engine()
    assert engine.releases is not None
    assert [(r.version, r.security_update) for r in engine.releases(ref)] == [("1.3.0", True)]
    engine.guards_for = rig.engine().guards_for
    engine.sleep = rig.emu.advance
    assert engine.act(ref, "stop", transition_id="evening", wait=True, poll_seconds=60).kind == "settled"
    # AWS publishes 1.3.0 at 23:00 (the emulator's own moment); the team listed it as a week old.
    rig.emu.advance((START.replace(hour=23) - rig.emu.clock.now()).total_seconds())
    rig.emu.backend.release_image("1.3.0", security_update=True)
    rig.emu.advance((START.replace(hour=7) + timedelta(days=1) - rig.emu.clock.now()).total_seconds())
    assert engine.act(ref, "start", transition_id="morning", wait=True, poll_seconds=60).kind == "settled"
    versions = rig.releases_now()
    assert versions["gpu"] == "1.3.0"  # settled by the listed date, three days being long past
    assert versions["cpu"] == "1.2.1" and versions["own"] is None  # pinned; a custom AMI


def test_a_status_that_says_newer_with_no_release_known_is_said_and_the_group_stays_pinned(rig: Rig) -> None:
    ref = governed({"image": "security", "image_settle_days": 0.25})
    engine = rig.engine()
    engine.releases = lambda r: ()  # real AWS with no image_releases listed: nothing lists the releases
    assert engine.act(ref, "stop", transition_id="evening", wait=True, poll_seconds=60).kind == "settled"
    rig.emu.advance(3600)
    rig.emu.backend.release_image("1.3.0", security_update=True)  # DescribeCluster: SecurityUpdateRequired
    rig.emu.advance(14 * 3600)
    assert engine.act(ref, "start", transition_id="morning", wait=True, poll_seconds=60).kind == "settled"
    assert rig.software_updates() == []  # no UpdateClusterSoftware on a guess
    assert rig.releases_now()["gpu"] == "1.2.1"
    notes = [e.message for e in rig.events.events if e.kind == "note" and "AMI releases kept" in e.message]
    assert notes and "gpu: AMI 1.2.1 is SecurityUpdateRequired, but no newer release is known" in notes[0]
    assert "list it in image_releases" in notes[0]


def test_no_release_source_reads_nothing_off_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT_URL_SAGEMAKER", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    opened: list[object] = []
    monkeypatch.setattr("urllib.request.urlopen", lambda *a, **k: opened.append(a))
    source = release_source(Config())
    assert list(source(ref_for(NAME, "eu-west-1"))) == [] and opened == []  # real AWS: no call, no release


def _one(status: str, mode: str = "security") -> Any:
    return _view([{"count": 0, "release": "1.2.1", "status": status, "mode": mode}])


def test_a_known_release_younger_than_the_settling_age_says_when_it_is_taken() -> None:
    young = [Release("1.3.0", NOW - timedelta(days=1), security_update=True)]
    policy = ImagePolicy(default="security")
    view = _one("SecurityUpdateRequired")
    assert plan(view, ImageState(), policy, young, NOW) == []
    (gap,) = gaps(view, ImageState(), policy, young, NOW)
    assert gap == ImageGap("g0", "1.2.1", "SecurityUpdateRequired", "settling", "1.3.0", NOW + timedelta(days=2))
    assert gap_line([gap]) == "g0: AMI 1.3.0 is taken once settled, from 2026-12-03 07:00Z"


def test_security_with_no_known_release_marked_a_security_update_says_so_instead_of_guessing() -> None:
    unmarked = [Release("1.3.0", NOW - timedelta(days=10))]
    view = _one("SecurityUpdateRequired")
    assert plan(view, ImageState(), ImagePolicy(default="security"), unmarked, NOW) == []
    (gap,) = gaps(view, ImageState(), ImagePolicy(default="security"), unmarked, NOW)
    assert gap.why == "unflagged" and "security: true" in gap_line([gap])
    # `latest` needs no flag: it takes the newest settled release.
    (move,) = plan(_one("SecurityUpdateRequired", "latest"), ImageState(), ImagePolicy(default="latest"), unmarked, NOW)
    assert move.to_release == "1.3.0"


@pytest.mark.parametrize("status", ["UpToDate", "UpdateAvailable"])
def test_a_security_group_whose_release_needs_nothing_has_no_gap(status: str) -> None:
    assert gaps(_one(status), ImageState(), ImagePolicy(default="security"), [], NOW) == []


def test_end_of_life_with_nothing_known_is_a_gap_and_pinned_groups_never_have_one() -> None:
    (gap,) = gaps(_one("EndOfLife"), ImageState(), ImagePolicy(default="security"), [], NOW)
    assert gap.why == "unknown" and "is EndOfLife" in gap_line([gap])
    assert gaps(_one("EndOfLife", "pinned"), ImageState(), ImagePolicy(), [], NOW) == []


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"version": "1.3", "released": "2026-12-01"}, "image_releases[0].version: must be MAJOR.MINOR.PATCH"),
        ({"version": "1.3.0", "released": "2026-13-01"}, "image_releases[0].released: not a date"),
        ({"version": "1.3.0", "released": "2026-12-01T10:00"}, "image_releases[0].released: "),
        ({"version": "1.3.0", "released": "soon"}, "image_releases[0].released: "),
        ({"version": "1.3.0", "released": "2026-12-01", "securty": True}, "image_releases[0].securty: "),
        ({"version": "1.3.0"}, "image_releases[0].released: Field required"),
    ],
)
def test_a_bad_release_entry_is_one_line_naming_the_field_and_value(entry: dict[str, Any], said: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_config({"image_releases": [entry]})
    message = str(caught.value)
    assert said in message and "\n" not in message
    field = said.split(".")[1].split(":")[0]
    if field in entry and field in ("version", "released"):
        assert f"(value {entry[field]!r})" in message  # the value itself, quoted


def test_a_release_listed_twice_is_refused() -> None:
    twice = [{"version": "1.3.0", "released": "2026-12-01"}, {"version": "1.3.0", "released": "2026-12-02"}]
    with pytest.raises(UsageError, match=r"image_releases: \[1\]: version 1.3.0 is listed twice"):
        parse_config({"image_releases": twice})
