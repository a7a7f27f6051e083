"""After a deploy: do the hub's functions run the artefact that was built?

Lambda reports each function's ``CodeSha256``, the base64 SHA-256 of its deployment package. A stack
update that kept an older code key (a parameter's previous value) leaves the old digest there, so
``deploy verify`` compares both functions' digests with the zip's and names any that differ.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_scheduler.errors import AwsError, UsageError

FUNCTIONS = ("orchestrator", "worker")  # the hub template's FunctionName suffixes


def code_sha256(data: bytes) -> str:
    """The digest as Lambda reports it (``CodeSha256``)."""
    return base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")


def from_hex(hexdigest: str) -> str:
    """A hex SHA-256 (``deploy package``'s) as Lambda writes it."""
    return base64.b64encode(bytes.fromhex(hexdigest)).decode("ascii")


def zip_sha256(path: Path) -> str:
    try:
        return code_sha256(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class Running:
    function: str
    code_sha256: str
    last_modified: str


def running(client: Any, stack: str) -> list[Running]:
    found = []
    for suffix in FUNCTIONS:
        name = f"{stack}-{suffix}"
        try:
            config = client.get_function_configuration(FunctionName=name)
        except ClientError as exc:
            err = exc.response.get("Error", {})
            why = f"{err.get('Code', 'Error')}: {err.get('Message', '')}"
            raise AwsError(f"function {name}: cannot read: {why}") from None
        except BotoCoreError as exc:
            raise AwsError(f"function {name}: cannot read: {exc}") from None
        found.append(Running(name, str(config.get("CodeSha256", "")), str(config.get("LastModified", ""))))
    return found


def verify(client: Any, stack: str, expected: str) -> list[Running]:
    """Both functions' code, or one UsageError naming each function that runs something else."""
    found = running(client, stack)
    stale = [f for f in found if f.code_sha256 != expected]
    if stale:
        named = ", ".join(f"{f.function} runs {f.code_sha256}" for f in stale)
        raise UsageError(
            f"stack {stack}: {named}, not the artefact's {expected} (was the new CodeKey deployed? render the "
            "template with -p CodeKey=<the key `deploy package` printed> and deploy it)"
        )
    return found
