"""Server-rendered SVG: the week timeline and the savings bar charts. Pure string building; every
label is escaped. Sizes are in viewBox units so the charts scale to the page (laptop or phone)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from html import escape

from hyperpod_scheduler.web.timeline import LABELS, GroupRow, Marker

LABEL_W = 150
CHART_W = 1000
ROW_H = 26
MARK_H = 14  # the band of event markers above the rows
COLORS = {
    "running": "#2f855a",
    "stopped": "#cbd5e0",
    "kept": "#b7791f",
    "blocked": "#c05621",
    "held": "#6b46c1",
    "starting": "#d69e2e",
    "shortfall": "#c53030",
    "planned-running": "#9ae6b4",
    "planned-stopped": "#edf2f7",
    "planned-kept": "#f6e05e",
    "planned-held": "#d6bcfa",
}
MARK_COLORS = {"ok": "#2f855a", "info": "#2b6cb0", "warn": "#b7791f", "bad": "#c53030"}


def _x(at: datetime, start: datetime, end: datetime) -> float:
    span = (end - start).total_seconds() or 1.0
    return LABEL_W + (CHART_W - LABEL_W) * (at - start).total_seconds() / span


def _stamp(at: datetime, zone: tzinfo) -> str:
    local = at.astimezone(zone)
    return f"{local:%a} {local.day} {local:%b %H:%M}"


def timeline_svg(
    rows: Sequence[GroupRow],
    start: datetime,
    end: datetime,
    now: datetime,
    marks: Sequence[Marker] = (),
    zone: tzinfo | None = None,
    since: datetime | None = None,
) -> str:
    """One row per instance group, a line at each midnight (in ``zone``, default UTC), history markers
    above the rows and a line at ``now``. Every segment and marker carries a ``<title>`` (hover, screen
    readers) with full dates and a class naming its kind; ``since`` (the cluster's creation, when in
    the window) gets a line of its own, with nothing drawn before it."""
    zone = zone or UTC
    top = 20 + MARK_H
    height = top + ROW_H * len(rows) + 8
    label = f"timeline per instance group, {start.astimezone(zone):%a %d %b} to {end.astimezone(zone):%a %d %b}"
    out = [
        f'<svg class="timeline" viewBox="0 0 {CHART_W} {height}" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
    ]
    local = start.astimezone(zone)
    day = (local + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    while day < end:
        x = _x(day, start, end)
        out.append(f'<line x1="{x:.1f}" y1="14" x2="{x:.1f}" y2="{height}" stroke="#a0aec0"/>')
        out.append(f'<text x="{x + 3:.1f}" y="12" font-size="12" fill="#2d3748">{day:%a %d}</text>')
        day = (day + timedelta(days=1, hours=2)).replace(hour=0)  # one local day on, across DST too
    for m in marks:
        if not (start <= m.at <= end):
            continue
        x = _x(m.at, start, end)
        colour = MARK_COLORS.get(m.kind, "#4a5568")
        out.append(
            f'<path class="mark {m.kind}" d="M{x - 5:.1f} 17 L{x + 5:.1f} 17 L{x:.1f} {17 + MARK_H - 3}Z" '
            f'fill="{colour}"><title>{escape(f"{m.at.astimezone(zone):%a %d %b %H:%M %Z}: {m.label}")}</title></path>'
        )
    for i, row in enumerate(rows):
        y = top + i * ROW_H
        out.append(f'<g class="group-row" data-group="{escape(row.group)}">')
        out.append(f'<text x="4" y="{y + 17}" font-size="13" fill="#1a202c">{escape(row.group)}</text>')
        for s in row.segments:
            x1, x2 = _x(max(s.start, start), start, end), _x(min(s.end, end), start, end)
            what = LABELS.get(s.kind, s.kind)
            # Dates in every tooltip: a week-long segment must not read "Sun 05:30 - Sun 05:30".
            title = f"{what}: {_stamp(s.start, zone)} - {_stamp(s.end, zone)} {s.end.astimezone(zone):%Z}"
            title += f": {s.note}" if s.note else ""
            out.append(
                f'<rect class="seg {s.kind}" data-from="{s.start.isoformat()}" data-to="{s.end.isoformat()}" '
                f'x="{x1:.1f}" y="{y + 3}" width="{max(x2 - x1, 0.5):.1f}" '
                f'height="{ROW_H - 8}" fill="{COLORS.get(s.kind, "#718096")}"><title>{escape(title)}</title></rect>'
            )
        out.append("</g>")
    if since is not None and start < since <= end:
        x = _x(since, start, end)
        said = escape(f"cluster created {_stamp(since, zone)} {since.astimezone(zone):%Z}")
        out.append(
            f'<line class="created" x1="{x:.1f}" y1="14" x2="{x:.1f}" y2="{height}" stroke="#4a5568" '
            f'stroke-dasharray="4 3"><title>{said}</title></line>'
        )
        if x - 60 > LABEL_W:
            out.append(
                f'<text x="{x - 4:.1f}" y="{height - 1}" font-size="11" text-anchor="end" fill="#4a5568">created</text>'
            )
    if start <= now <= end:
        x = _x(now, start, end)
        out.append(
            f'<line class="now" x1="{x:.1f}" y1="14" x2="{x:.1f}" y2="{height}" stroke="#1a365d" stroke-width="2"/>'
        )
        out.append(f'<text x="{x + 3:.1f}" y="{height - 1}" font-size="11" fill="#1a365d">now</text>')
    out.append("</svg>")
    return "".join(out)


def bars_svg(
    labels: Sequence[str],
    series: Sequence[tuple[str, str, Sequence[float]]],
    title: str,
    scale: tuple[float, float] | None = None,
) -> str:
    """Grouped bars: one group per label, one bar per series (name, colour, values), in USD.
    Negative values (a night whose protected groups cost more than was saved) hang below the zero line.
    ``scale`` (high, low): the value range of the axis, shared by charts shown side by side so equal
    heights mean equal money; by default the chart's own values."""
    n, k = len(labels), max(len(series), 1)
    # Text sizes in viewBox units: two charts side by side on a laptop draw at ~0.7 px a unit, so 18
    # units read as ~12.5 px (issue 27 item 9); on a phone the chart scrolls at 620 px (style.css).
    height, top, bottom, left = 290, 34, 62, 120
    values_all = [v for _, _, values in series for v in values]
    high, low = max([*values_all, 0.0]), min([*values_all, 0.0])
    if scale is not None:
        high, low = max(high, scale[0]), min(low, scale[1])
    span = (high - low) or 1.0
    width = CHART_W
    slot = (width - left - 10) / max(n, 1)
    bar = max(min(slot / (k + 1), 60.0), 1.0)
    plot_h = height - top - bottom

    def y_of(value: float) -> float:
        return top + plot_h * (high - value) / span

    out = [
        f'<svg class="bars" viewBox="0 0 {width} {height}" data-high="{high:.2f}" data-low="{low:.2f}" role="img" '
        f'aria-label="{escape(title)}" '
        'xmlns="http://www.w3.org/2000/svg">',
        f'<text x="{left}" y="22" font-size="20" font-weight="bold">{escape(title)}</text>',
    ]
    for value in sorted({high, low, 0.0}):
        y = y_of(value)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#cbd5e0"/>')
        out.append(f'<text x="{left - 6}" y="{y + 6:.1f}" font-size="18" text-anchor="end">${value:,.0f}</text>')
    zero = y_of(0.0)
    for i, label in enumerate(labels):
        x0 = left + i * slot + (slot - bar * k) / 2
        for j, (name, colour, values) in enumerate(series):
            value = values[i] if i < len(values) else 0.0
            y1, y2 = sorted((y_of(value), zero))
            out.append(
                f'<rect x="{x0 + j * bar:.1f}" y="{y1:.1f}" width="{bar * 0.9:.1f}" height="{max(y2 - y1, 0.5):.1f}" '
                f'fill="{colour}"><title>{escape(f"{label} {name}: ${value:,.2f}")}</title></rect>'
            )
        if n <= 8 or i % -(-n // 8) == 0:  # at most about eight labels: they must not overlap at 18 units
            out.append(
                f'<text x="{left + i * slot + slot / 2:.1f}" y="{height - bottom + 24}" font-size="18" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
    for j, (name, colour, _) in enumerate(series):
        x = left + j * 420
        out.append(f'<rect x="{x}" y="{height - 22}" width="18" height="18" fill="{colour}"/>')
        out.append(f'<text x="{x + 24}" y="{height - 7}" font-size="18">{escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)
