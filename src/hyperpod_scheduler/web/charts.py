"""The Savings page's charts, from the report document's nightly rows.

The three per-night charts (saving, FSx still billing while stopped, kept running) are read side by
side, so they share one axis: a $2,684 night and a $12,834 night must not draw bars of one height
(issue 27 item 9). The cumulative saving is another quantity (a running total) and keeps its own
axis, said in its title.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hyperpod_scheduler.web.svg import bars_svg

PER_NIGHT: tuple[tuple[str, str, str, str], ...] = (
    # (chart key, document field, series name and colour, title)
    ("saving", "saving", "saving (instance cost avoided)|#2f855a", "saving per night"),
    (
        "fsx",
        "fsx_while_stopped",
        "FSx still billing while stopped|#c05621",
        "FSx still billing while stopped, per night",
    ),
    ("kept", "kept_cost", "kept (not saved)|#718096", "kept running (not saved), per night"),
)


def savings_charts(nights: Sequence[Mapping[str, Any]], cumulative: Sequence[float]) -> dict[str, str]:
    labels = [str(n["night"]) for n in nights]
    values = {field: [float(n[field]) for n in nights] for _, field, _, _ in PER_NIGHT}
    every = [v for vs in values.values() for v in vs]
    shared = (max([*every, 0.0]), min([*every, 0.0]))
    charts: dict[str, str] = {}
    for key, field, series, title in PER_NIGHT:
        name, colour = series.split("|")
        charts[key] = bars_svg(
            labels, [(name, colour, values[field])], title + " (one scale with the charts beside it)", shared
        )
    charts["cumulative"] = bars_svg(
        labels, [("cumulative saving", "#2b6cb0", list(cumulative))], "cumulative saving (its own scale)"
    )
    charts["per_night"] = charts["saving"]
    return charts


__all__ = ["savings_charts"]
