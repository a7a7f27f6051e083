"""Which cluster a dashboard address means: its name and, where two targets govern that name (two
accounts' ``train`` in one region, say), the account and region too.

A cluster is (account, region, name) in AWS; the dashboard's addresses stay ``/clusters/NAME`` while the
name is unique, and carry ``?account=ACCOUNT&region=REGION`` (``profile=`` for a cluster whose account
is not known yet) when it is not. A bare name that matches more than one cluster is refused with the
choices, never resolved to the first: an action must reach the cluster its page showed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlencode

from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.store.records import LEGACY_ACCOUNT, account_problem

_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
_PROFILE = re.compile(r"^[A-Za-z0-9_.@+=,-]{1,64}$")

T = TypeVar("T")


class Ambiguous(UsageError):
    """A cluster name that more than one governed or remembered cluster answers to (a 409)."""


@dataclass(frozen=True)
class Place:
    """Where a cluster is: the parts of its identity besides its name (None: not known, or not asked)."""

    account: str | None = None
    region: str | None = None
    profile: str | None = None

    @classmethod
    def of_key(cls, key: str, profile: str | None = None) -> Place:
        """The place a record key ``ACCOUNT/REGION/NAME`` names (``default/...``: account not known)."""
        parts = key.split("/")
        account = parts[0] if len(parts) >= 3 and parts[0] != LEGACY_ACCOUNT else None
        return cls(account, parts[-2] if len(parts) >= 2 else None, profile)

    def within(self, other: Place) -> bool:
        """Whether ``other`` (a cluster's place) is one this address (``self``, what was asked) allows."""
        return (
            (self.account is None or self.account == other.account)
            and (self.region is None or self.region == other.region)
            and (self.profile is None or self.profile == other.profile)
        )

    def query(self) -> str:
        """The address's query (no ``?``) that picks a cluster here: account (else profile) and region."""
        pairs = {"account": self.account} if self.account else {"profile": self.profile} if self.profile else {}
        return urlencode({**pairs, **({"region": self.region} if self.region else {})})

    def text(self) -> str:
        who = f"account {self.account}" if self.account else f"profile {self.profile}" if self.profile else "account ?"
        return f"{who} region {self.region or '?'}"

    @property
    def asked(self) -> bool:
        return any((self.account, self.region, self.profile))


ANYWHERE = Place()


def asked(account: str | None, region: str | None, profile: str | None) -> Place:
    """The place an address names, each part checked (a bad one is a 400 naming the parameter)."""
    account, region, profile = (v.strip() if v else None for v in (account, region, profile))
    if account and account_problem(account):
        raise UsageError(f"account: {account_problem(account)}")
    if region and not _REGION.match(region):
        raise UsageError("region: is not an AWS region name (like us-east-1)")
    if profile and not _PROFILE.match(profile):
        raise UsageError("profile: is not a profile name")
    return Place(account or None, region or None, profile or None)


def one(name: str, asked_for: Place, found: Sequence[tuple[Place, T]], what: str = "cluster") -> T | None:
    """The one of ``found`` (each a cluster named ``name``, with its place) that the address allows;
    None if none does; ``Ambiguous`` naming each choice's address if several do."""
    matching = [(p, x) for p, x in found if asked_for.within(p)]
    if len(matching) > 1:
        choices = "; ".join(f"{p.text()} (/clusters/{name}?{p.query()})" for p, _ in matching)
        raise Ambiguous(
            f"{what}: {len(matching)} clusters have this name: {choices}. Say which with ?account=ACCOUNT&region=REGION"
        )
    return matching[0][1] if matching else None


def queries(places: Iterable[tuple[str, Place]]) -> list[str]:
    """For each (name, place), the query its addresses carry: empty while the name is unique among
    them, account and region when it is not."""
    listed = list(places)
    count: dict[str, int] = {}
    for name, _ in listed:
        count[name] = count.get(name, 0) + 1
    return [p.query() if count[name] > 1 else "" for name, p in listed]
