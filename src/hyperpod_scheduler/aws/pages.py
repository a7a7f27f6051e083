"""Every paginated AWS read, bounded: a page cap and an item cap per call, and a token seen before ends it.

A service (or anything answering in its place) can hand out a new ``NextToken`` with every page for
ever: botocore's paginators follow it without end and keep every page, so ``status`` was still paging
after 40 s and ``prices update`` held 1.1 GB. Here each read is one :class:`Pages`: iterate it for the
items, one page in memory at a time; when a bound or a repeated token ended the read early, ``cut``
is one line naming the operation and the bound, which the caller says (a note, a warning, a skip).

The figures are in :data:`BOUNDS`, one per operation, far above what the documented quotas allow
(docs/reliability.md lists them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Bounds:
    """At most ``pages`` calls and ``items`` items for one paginated read."""

    pages: int
    items: int


BOUNDS: dict[str, Bounds] = {
    # HyperPod clusters per account and region are a quota of tens: 100 pages of up to 100 is far past it.
    "ListClusters": Bounds(pages=100, items=10_000),
    # A resource carries at most 50 tags (AWS's documented limit).
    "ListTags": Bounds(pages=10, items=1_000),
    # A cluster has at most 100 instance groups; 5,000 nodes is past any cluster's quota.
    "ListClusterNodes": Bounds(pages=50, items=5_000),
    "ListClusterEvents": Bounds(pages=50, items=5_000),
    # A region's SageMaker price list is a few thousand products; each page is parsed and dropped.
    "GetProducts": Bounds(pages=1_000, items=100_000),
    # FSx file systems per account and region are a quota of about a hundred.
    "DescribeFileSystems": Bounds(pages=100, items=10_000),
    # Up to 1,000 keys a page: a checkpoint folder of 200,000 objects (the finder's local-folder bound).
    "ListObjectsV2": Bounds(pages=200, items=200_000),
}


class Pages:
    """The items under ``key`` of every page of ``call(**params)``, following ``token`` (the request's
    member) from ``next_token`` (the answer's; the same name unless given), within ``bounds``.

    Iterate once. Afterwards ``cut`` is None when the service said it was done, else one line saying
    which bound ended the read (the items already yielded are still good ones)."""

    def __init__(
        self,
        call: Callable[..., Mapping[str, Any]],
        operation: str,
        key: str,
        *,
        bounds: Bounds | None = None,
        token: str = "NextToken",
        next_token: str | None = None,
        **params: Any,
    ) -> None:
        self.call = call
        self.operation = operation
        self.key = key
        self.bounds = bounds or BOUNDS[operation]
        self.token = token
        self.next_token = next_token or token
        self.params = params
        self.cut: str | None = None
        self.pages = 0
        self.items = 0

    def __iter__(self) -> Iterator[Any]:
        seen: set[str] = set()
        token: str | None = None
        while True:
            if self.pages >= self.bounds.pages:
                return self._stop(f"stopped after {self.pages:,} pages (the bound is {self.bounds.pages:,})")
            answer = self.call(**self.params, **({self.token: token} if token else {}))
            self.pages += 1
            found = answer.get(self.key) or []
            for item in found if isinstance(found, list) else []:
                if self.items >= self.bounds.items:
                    return self._stop(f"stopped at {self.items:,} items (the bound is {self.bounds.items:,})")
                self.items += 1
                yield item
            token = answer.get(self.next_token)
            if not token or not isinstance(token, str):
                return None
            if token in seen:
                return self._stop(f"the same {self.next_token} came back after {self.pages:,} pages: stopped")
            seen.add(token)

    def _stop(self, why: str) -> None:
        self.cut = f"{self.operation}: {why}; {self.items:,} read, the rest left unread"

    def all(self) -> list[Any]:
        """Every item, as a list (for reads whose items are kept anyway)."""
        return list(self)


__all__ = ["BOUNDS", "Bounds", "Pages"]
