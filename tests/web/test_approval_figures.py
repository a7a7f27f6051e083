"""The approval page's figures (issue 27 item 3) for groups the AWS guide allows but a simple sample
does not show: a flexible group (InstanceRequirements, no InstanceType)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from hyperpod_scheduler.cluster.tiers import Tier
from hyperpod_scheduler.cluster.view import GroupView
from hyperpod_scheduler.cost.prices import bundled
from hyperpod_scheduler.web.approval_view import figures

STOP = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)


def _group(name: str, itype: str | None, itypes: tuple[str, ...], count: int) -> GroupView:
    return GroupView(name, count, count, None, itype, "InService", "Compute", None, Tier.AMI, {}, instance_types=itypes)


def test_a_flexible_group_is_named_by_its_types_not_a_question_mark() -> None:
    """A release of a flexible group says which types it hands back ('4 × flexible p5.48xlarge|...'),
    as the rest of the dashboard names it, not '4 × ?'; its price is the dearest type's, as an upper
    bound (issue 26, case 4: it was 'not known' before prices read every type)."""
    flexible = _group("gpu", None, ("ml.p5.48xlarge", "ml.p4d.24xlarge"), 4)
    view = SimpleNamespace(group=lambda name: flexible if name == "gpu" else None)
    shown = figures(["gpu"], view, bundled(), None, STOP)
    assert shown["nodes_text"] == "4 × flexible p5.48xlarge|p4d.24xlarge"
    p5 = bundled().instance("ml.p5.48xlarge")
    assert "?" not in shown["nodes_text"] and p5 is not None
    assert shown["usd_per_hour"] == round(p5.usd * 4, 2) and shown["price_is_upper_bound"] is True
    assert shown["rows"][0]["price_is_upper_bound"] is True


def test_a_flexible_group_with_an_unpriced_type_is_not_priced() -> None:
    """One type with no price (g6.48xlarge is not in the bundled table): the price is not known, not
    the known types' maximum (the unpriced one may be the dearest) and not $0."""
    flexible = _group("gpu", None, ("ml.p5.48xlarge", "ml.g6.48xlarge"), 4)
    view = SimpleNamespace(group=lambda name: flexible if name == "gpu" else None)
    shown = figures(["gpu"], view, bundled(), None, STOP)
    assert shown["usd_per_hour"] is None and shown["rows"][0]["usd_per_hour"] is None


def test_a_fixed_group_keeps_its_figures() -> None:
    fixed = _group("gpu", "ml.p5.48xlarge", ("ml.p5.48xlarge",), 2)
    view = SimpleNamespace(group=lambda name: fixed if name == "gpu" else None)
    shown = figures(["gpu"], view, bundled(), None, STOP)
    price = bundled().instance("ml.p5.48xlarge")
    assert shown["nodes_text"] == "2 × p5.48xlarge"
    assert price is not None and shown["usd_per_hour"] == round(price.usd * 2, 2)
