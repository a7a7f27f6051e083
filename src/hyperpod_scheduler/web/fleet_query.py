"""Which Fleet rows a request asks for: searched, filtered and one page of them (issue 30).

A fleet of 1,000 clusters is one page of ``per_page`` rows at a time (the page stays well under 200 KB),
found by a search over name, account and region and by state, region and account filters. The counts,
the money and the next 24 hours at the top stay the whole fleet's: a filter narrows the table, never
what the fleet bills. Bad input is a one-line error naming the parameter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs.text import digits

PER_PAGE = 50
MAX_PER_PAGE = 500
MAX_SEARCH = 100
STATES = ("running", "stopped", "stopping", "starting", "unknown")
# Lists at the top of the page shown up to this many, then "and N more" (a fleet of 1,000 stops at 19:00).
LISTED = 12


def account_of(key: str) -> str | None:
    """``account/region/name`` -> the account (None for a key from before account keys)."""
    parts = key.split("/")
    return parts[0] if len(parts) >= 3 else None


@dataclass(frozen=True)
class FleetQuery:
    q: str = ""
    state: str = ""
    region: str = ""
    account: str = ""
    page: int = 1
    per_page: int = PER_PAGE

    @classmethod
    def parse(
        cls,
        q: str | None = None,
        state: str | None = None,
        region: str | None = None,
        account: str | None = None,
        page: str | int | None = None,
        per_page: str | int | None = None,
    ) -> FleetQuery:
        text = " ".join((q or "").split())
        if len(text) > MAX_SEARCH:
            raise UsageError(f"q: the search is longer than {MAX_SEARCH} characters")
        wanted = (state or "").strip()
        if wanted and wanted not in STATES:
            raise UsageError(f"state: {wanted!r} is not one of {', '.join(STATES)}")
        return cls(
            q=text,
            state=wanted,
            region=(region or "").strip()[:64],
            account=(account or "").strip()[:64],
            page=_number("page", page, 1, 1, 1_000_000),
            per_page=_number("per_page", per_page, PER_PAGE, 1, MAX_PER_PAGE),
        )

    @property
    def filtered(self) -> bool:
        return bool(self.q or self.state or self.region or self.account)

    def matches(self, row: Mapping[str, Any]) -> bool:
        key = str(row.get("key") or "")
        if self.state and row.get("state") != self.state:
            return False
        if self.region and (row.get("region") or "") != self.region:
            return False
        if self.account and (account_of(key) or "") != self.account:
            return False
        if self.q:
            hay = f"{row.get('cluster', '')} {key} {row.get('region') or ''}".lower()
            return all(word in hay for word in self.q.lower().split())
        return True

    def select(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The page of matching rows, and where it sits (``first``..``last`` of ``matched``)."""
        found = [r for r in rows if self.matches(r)]
        pages = max(1, -(-len(found) // self.per_page))
        # A page past the last is empty, and says so: given the last one again, a client paging until an
        # empty page never stopped, and ?page=99 read as the last page.
        page = self.page
        start = (page - 1) * self.per_page
        shown = found[start : start + self.per_page]
        return {
            "rows": shown,
            "total": len(rows),
            "matched": len(found),
            "page": page,
            "pages": pages,
            "past_last": page > pages,
            "per_page": self.per_page,
            "first": start + 1 if shown else 0,
            "last": start + len(shown) if shown else 0,
            "previous": self.link(min(page - 1, pages)) if page > 1 else None,
            "next": self.link(page + 1) if page < pages else None,
            "query": {"q": self.q, "state": self.state, "region": self.region, "account": self.account},
            "filtered": self.filtered,
        }

    def link(self, page: int) -> str:
        params = {"q": self.q, "state": self.state, "region": self.region, "account": self.account}
        kept = {k: v for k, v in params.items() if v}
        if page > 1:
            kept["page"] = str(page)
        if self.per_page != PER_PAGE:
            kept["per_page"] = str(self.per_page)
        return "?" + urlencode(kept) if kept else "?"


def facets(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The values the filters offer: the states, regions and accounts the fleet has."""
    return {
        "states": [s for s in STATES if any(r.get("state") == s for r in rows)],
        "regions": sorted({str(r["region"]) for r in rows if r.get("region")}),
        "accounts": sorted({a for r in rows if (a := account_of(str(r.get("key") or ""))) is not None}),
    }


def listed(items: Sequence[Any], limit: int = LISTED) -> dict[str, Any]:
    """The first ``limit`` of a list the page shows, and how many more there are."""
    return {"items": list(items[:limit]), "more": max(len(items) - limit, 0)}


def _number(field: str, value: str | int | None, default: int, low: int, high: int) -> int:
    if value is None or value == "":
        return default
    # ASCII digits only: int() also read "１", "+1" and "1_0" (as 10), so one page had many addresses.
    written = value if isinstance(value, str) else ""
    if isinstance(value, bool) or not (
        isinstance(value, int) or (digits(written) and written == str(int(written)))
    ):  # "01" too: one page, one address
        raise UsageError(f"{field}: {value!r} is not a whole number")
    number = int(value)
    if not low <= number <= high:
        raise UsageError(f"{field}: {number} is not between {low} and {high}")
    return number


__all__ = ["MAX_PER_PAGE", "PER_PAGE", "STATES", "FleetQuery", "account_of", "facets", "listed"]
