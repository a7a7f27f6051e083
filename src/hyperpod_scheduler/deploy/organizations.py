"""The accounts of an AWS Organizations OU (or root), for the fleet config's ``organization`` block.

The orchestrator asks at every tick (ListAccountsForParent and ListOrganizationalUnitsForParent, free
read calls), so registration follows the organisation: an account that joins an OU is governed from
the next tick, one that leaves it, or is suspended or closed, no longer is (its records and history
stay; nothing is deleted). The hub account must be the organisation's management account or a
delegated administrator for AWS Organizations, and the hub deployed with UsingAWSOrganizations=Yes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.errors import AwsError

MAX_DEPTH = 5  # Organizations nests OUs at most five levels below the root


def member_accounts(client: Any, parents: Sequence[str]) -> list[str]:
    """Every ACTIVE account under ``parents``, nested OUs included, each once, in a stable order."""
    found: dict[str, None] = {}
    for parent in parents:
        for account in _under(client, parent, 0):
            found.setdefault(account, None)
    return list(found)


def _under(client: Any, parent: str, depth: int) -> Iterator[str]:
    for page in _pages(client, "list_accounts_for_parent", parent):
        for account in page.get("Accounts", []):
            if account.get("Status", "ACTIVE") == "ACTIVE":
                yield str(account["Id"])
    if depth >= MAX_DEPTH:
        return
    for page in _pages(client, "list_organizational_units_for_parent", parent):
        for ou in page.get("OrganizationalUnits", []):
            yield from _under(client, str(ou["Id"]), depth + 1)


def _pages(client: Any, operation: str, parent: str) -> Iterator[dict[str, Any]]:
    try:
        yield from client.get_paginator(operation).paginate(ParentId=parent)
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise AwsError(
            f"organization: {parent}: cannot list: {err.get('Code', 'Error')}: {err.get('Message', '')} (is the hub "
            "the management account or a delegated administrator, deployed with UsingAWSOrganizations=Yes?)"
        ) from None
    except BotoCoreError as exc:
        raise AwsError(f"organization: {parent}: cannot list: {exc}") from None
