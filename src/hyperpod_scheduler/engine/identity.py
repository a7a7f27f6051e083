"""Which AWS account a cluster belongs to, and the migration of records from before account keys.

A cluster is identified in AWS by (account, region, name); its record is keyed the same way. The
account is read from the cluster's ARN on the first DescribeCluster and remembered per way of reaching
it (profile, region, name: ``Reach``), so later ticks find the record without an API call (and with no
STS, which the emulator does not serve). Every later DescribeCluster checks the ARN against it: a
profile that now reaches another account is refused, never guessed about.

Records written before account keys sit under ``default/REGION/NAME``. One is given to the account
whose cluster it fits (its groups, and whether that cluster is stopped, match the record) unless
another account is known, or configured, to have a cluster of that name there: then it is refused until
the user says whose it is (``hyperpod-scheduler claim``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hyperpod_scheduler.cluster.view import ClusterView, MalformedAnswer
from hyperpod_scheduler.engine import crashpoints
from hyperpod_scheduler.errors import HyperpodSchedulerError
from hyperpod_scheduler.store.errors import ConflictError
from hyperpod_scheduler.store.records import (
    ClusterRecord,
    HistoryEntry,
    Reach,
    account_problem,
    cluster_key,
)

if TYPE_CHECKING:
    from hyperpod_scheduler.engine.runner import ClusterRef
    from hyperpod_scheduler.store.base import StateStore


class IdentityError(HyperpodSchedulerError):
    """The cluster reached is not the one its record belongs to, or whose record it is is unclear."""


# ---- pure ------------------------------------------------------------------------------------------


def arn_account(arn: str) -> str:
    """The account of ``arn:PARTITION:sagemaker:REGION:ACCOUNT:cluster/ID``."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sagemaker" or not parts[5].startswith("cluster/"):
        raise MalformedAnswer(f"DescribeCluster answer: ClusterArn {arn!r} is not a SageMaker cluster ARN")
    if account_problem(parts[4]):
        raise MalformedAnswer(f"DescribeCluster answer: ClusterArn {arn!r} names no 12-digit account")
    return parts[4]


def reach_of(ref: ClusterRef) -> Reach:
    return Reach(ref.profile or "", ref.region or "", ref.name)


def legacy_misfit(record: ClusterRecord, view: ClusterView) -> str | None:
    """Why a record from before account keys cannot be this cluster's, or None if it fits.

    It fits when every group it remembers exists here with the same instance type, and the cluster is
    where the record says it is: at zero (or at its kept counts) if stopped by us, moving if an update
    was in flight, anything otherwise (a running cluster may have been resized by hand)."""
    snapshot = record.snapshot
    for name, size in snapshot.sizes.items() if snapshot is not None else ():
        group = view.group(name)
        if group is None:
            return f"it remembers group '{name}', which this cluster does not have"
        if size.instance_type and group.instance_type and size.instance_type != group.instance_type:
            return f"it remembers group '{name}' as {size.instance_type}, here it is {group.instance_type}"
    targets = view.targets()
    if record.pending is not None:
        if view.busy or all(targets.get(n) == c for n, c in record.pending.targets.items()):
            return None
        if record.pending.phase == "intent":
            return None  # an intent that never went out says nothing about where the cluster is
        return f"its {record.pending.action} in flight is not what this cluster is doing"
    if record.applied_state == "stopped" and snapshot is not None:
        kept = snapshot.kept
        running = [n for n in snapshot.sizes if targets.get(n, 0) not in (0, kept.get(n, 0))]
        if running:
            return f"it says the cluster is stopped, but group '{running[0]}' here is running"
    return None


def ambiguity(
    account: str, bound: Mapping[str, str], namesakes: Iterable[str], ruled_out: Iterable[str] = ()
) -> str | None:
    """Why a record from before account keys might be another account's: another profile is known to
    reach another account's cluster of this name (one whose cluster it was not found to misfit), or the
    config names this cluster under a profile not looked at yet."""
    excluded = set(ruled_out)
    others = sorted({a for a in bound.values() if a != account and a not in excluded})
    if others:
        return f"account {others[0]} also has a cluster of this name here"
    for profile in sorted(set(namesakes)):
        if profile not in bound:
            who = f"profile '{profile}'" if profile else "the default credentials"
            return f"the config also names it under {who}, whose account is not known yet"
    return None


# ---- the store side --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LegacyRead:
    """The record under a key from before account keys, as read once this turn (None: there is none)."""

    record_key: str
    record: ClusterRecord | None


class Accounts:
    """Bindings (profile, region, name) -> account, cached, and the legacy-record migration."""

    def __init__(
        self,
        store: StateStore,
        now: Callable[[], datetime],
        entry: Callable[..., HistoryEntry],
        note: Callable[[ClusterRef, str], None],
    ) -> None:
        self.store = store
        self.now = now
        self._entry = entry
        self._note = note
        self._known: dict[Reach, str] = {}

    def known(self, ref: ClusterRef) -> ClusterRef | None:
        """``ref`` with its account if it is known without an API call (given, or remembered)."""
        if ref.account is not None:
            return ref
        reach = reach_of(ref)
        account = self._known.get(reach)
        if account is None:
            account = self.store.account_for(reach)
            if account is None:
                return None
            self._known[reach] = account
        return ref.with_account(account)

    def check(self, ref: ClusterRef, view: ClusterView) -> None:
        """Refuse an answer from another account than the one ``ref``'s record belongs to."""
        if ref.account is None:
            return
        found = arn_account(view.arn)
        if found == ref.account:
            return
        reach = reach_of(ref)
        self._known.pop(reach, None)  # a `claim` in another process may have rebound it
        if self.store.account_for(reach) == found:
            raise IdentityError(
                f"{reach} was rebound to account {found} while this runner held account {ref.account}; "
                "the next tick uses the new binding"
            )
        raise IdentityError(
            f"{reach} now reaches account {found}, but its record belongs to account {ref.account}: not "
            f"acting on it. If the profile was moved on purpose, run `hyperpod-scheduler claim {ref.name} "
            f"--region {ref.region}" + (f" --profile {ref.profile}`" if ref.profile else "`")
        )

    def learn(self, ref: ClusterRef, view: ClusterView, *, dry_run: bool, replace: bool = False) -> ClusterRef:
        """The account from the ARN, remembered (unless ``dry_run``); raises if a concurrent runner
        bound this reach to another account."""
        account = arn_account(view.arn)
        reach = reach_of(ref)
        if not dry_run:
            bound = self.store.bind_account(reach, account, replace=replace)
            if bound != account:
                raise IdentityError(f"{reach} is remembered as account {bound}, but its answer names {account}")
            self._known[reach] = account
        return ref.with_account(account)

    # ---- records from before account keys ------------------------------------------------------------

    def adopt(
        self,
        ref: ClusterRef,
        view: ClusterView,
        *,
        dry_run: bool,
        force: bool = False,
        legacy: LegacyRead | None = None,
    ) -> ClusterRecord | None:
        """Give the ``default/REGION/NAME`` record to ``ref``'s account if it is that cluster's.

        Returns the record ``ref`` should act on: its own, the adopted one (or, in a dry run, the one it
        would adopt), or None. Raises ``IdentityError`` when the old record could be another account's.
        ``force``: the user said whose it is (``claim``). ``legacy``: that record as the caller read it
        this turn (a stale read costs nothing: moving it is a compare-and-set, and a lost race reads again)."""
        assert ref.account is not None and ref.region is not None
        mine = self.store.get(ref.key)
        if mine is not None:
            return mine
        old_key = cluster_key(ref.name, ref.region)
        old = legacy.record if legacy is not None and legacy.record_key == old_key else self.store.get(old_key)
        if old is None:
            return None
        if old.moved_to is not None:
            if old.moved_to != ref.key:
                return None  # given to another account's key already
            return old.evolve(key=ref.key, moved_to=None) if dry_run else self._finish(ref, old)
        account = ref.account
        misfit = legacy_misfit(old, view)
        if misfit is not None and not force:
            self._note(ref, f"the record kept from before account keys ({old_key}) is not this cluster's: {misfit}")
            if not dry_run and account not in old.misfits:
                # Remembered, so this account no longer makes the record ambiguous for the one it fits.
                with contextlib.suppress(ConflictError):
                    self.store.put(old.evolve(misfits=[*old.misfits, account]), expected_version=old.version)
            return None
        unclear = ambiguity(account, self._others(ref), ref.namesakes, old.misfits)
        if unclear is not None and not force:
            raise IdentityError(
                f"cluster '{ref.name}' in {ref.region}: the record kept from before account keys ({old_key}) "
                f"fits account {account}'s cluster, but {unclear}; not guessing whose sizes it holds: run "
                f"`hyperpod-scheduler claim {ref.name} --region {ref.region}"
                + (f" --profile {ref.profile}" if ref.profile else "")
                + "` with the profile whose cluster it is"
            )
        if dry_run:
            return old.evolve(key=ref.key, moved_to=None)
        # Two writes, in this order: mark the old record (a compare-and-set, so only one runner moves
        # it), then create the new one. A crash between leaves a mark that says where to finish.
        now = self.now()
        line = self._entry(ref, "migrate", "moved", old_key=old_key, to=ref.key)
        try:
            marked = self.store.put(
                old.evolve(moved_to=ref.key, updated_at=now),
                expected_version=old.version,
                history=[line.model_copy(update={"key": old_key})],
            )
        except ConflictError:
            return self.adopt(ref, view, dry_run=dry_run, force=force)  # another runner moved it: look again
        crashpoints.reached("after-mark-moved")
        return self._finish(ref, marked)

    def _finish(self, ref: ClusterRef, old: ClusterRecord) -> ClusterRecord:
        fields: dict[str, Any] = {"key": ref.key, "moved_to": None, "updated_at": self.now()}
        line = self._entry(ref, "migrate", "adopted", old_key=old.key)
        try:
            adopted = self.store.put(old.evolve(**fields), expected_version=None, history=[line])
        except ConflictError:
            found = self.store.get(ref.key)  # finished by a runner racing this one
            assert found is not None
            return found
        self._note(ref, f"the record kept from before account keys ({old.key}) is now {ref.key}")
        return adopted

    def _others(self, ref: ClusterRef) -> dict[str, str]:
        assert ref.region is not None
        return {p: a for p, a in self.store.accounts_named(ref.region, ref.name).items() if p != (ref.profile or "")}
