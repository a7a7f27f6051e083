"""Shared pieces of the reliability tests: an UpdateCluster tally kept at the emulator, the CLI run as a
child process (as a user or cron runs it), and small readers for the cluster and the state file."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hyperpod_scheduler.cluster.samples import slurm_request
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.emulator.errors import EmulatorError
from hyperpod_scheduler.emulator.protocol import DEFAULT_ACCOUNT
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.store.records import ClusterRecord
from hyperpod_scheduler.store.sqlite import SqliteStore

ACCOUNT = DEFAULT_ACCOUNT  # the account a single emulator's clusters belong to (their ARNs name it)
SIZES = {"controller": 1, "dev": 2, "train": 3}  # the three-tier cluster of tests/engine/conftest.py
STOPPED = {name: 0 for name in SIZES}
CLI = [sys.executable, "-m", "hyperpod_scheduler.cli.main"]


class UpdateTally:
    """Every UpdateCluster that reached the emulator's model, by cluster, accepted or refused.

    Injected faults (throttling, 500s) are drawn before the model sees a request, so ``sent`` counts
    the calls that could have changed a cluster: the thing that must happen once per transition.
    """

    def __init__(self, emu: Emulator) -> None:
        self.sent: Counter[str] = Counter()
        self.accepted: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        original = emu.backend.dispatch

        def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
            if operation != "UpdateCluster":
                return original(operation, params, **kw)
            name = str(params.get("ClusterName", "")).rsplit("/", 1)[-1]
            self.sent[name] += 1
            try:
                result = original(operation, params, **kw)
            except EmulatorError:
                self.refused[name] += 1
                raise
            self.accepted[name] += 1
            return result

        emu.backend.dispatch = dispatch  # type: ignore[method-assign]

    def reset(self) -> None:
        self.sent.clear()
        self.accepted.clear()
        self.refused.clear()


def counts(emu: Emulator, name: str) -> tuple[str, dict[str, tuple[int, int]]]:
    """The cluster's status and each group's (current, target), read straight from the model."""
    d = emu.backend.dispatch("DescribeCluster", {"ClusterName": name})
    groups = {
        g["InstanceGroupName"]: (g["CurrentCount"], g.get("TargetCount", g["CurrentCount"]))
        for g in d["InstanceGroups"]
    }
    return d["ClusterStatus"], groups


def at_sizes(emu: Emulator, name: str, sizes: Mapping[str, int]) -> bool:
    status, groups = counts(emu, name)
    return status == "InService" and groups == {n: (c, c) for n, c in sizes.items()}


def wait_for(check: Callable[[], bool], what: str, tries: int = 400, pause: float = 0.02) -> None:
    """Poll a fast emulator until ``check`` holds (bounded by tries, never by elapsed time)."""
    for _ in range(tries):
        if check():
            return
        time.sleep(pause)
    raise AssertionError(f"never reached: {what}")


def record(state: Path, name: str = "c1") -> ClusterRecord | None:
    with SqliteStore(state) as store:
        return store.get(ref_for(name, "us-east-1", account=ACCOUNT).key)


def settled_lines(state: Path, action: str, name: str = "c1") -> int:
    """How many history lines say ``action`` settled (the savings report counts nights from them)."""
    with SqliteStore(state) as store:
        entries = store.history(ref_for(name, "us-east-1", account=ACCOUNT).key)
        return sum(1 for e in entries if (e.action, e.outcome) == (action, "ok"))


def recorded_sizes(state: Path, name: str = "c1") -> dict[str, int]:
    rec = record(state, name)
    if rec is None or rec.snapshot is None:
        return {}
    return {n: s.count for n, s in rec.snapshot.sizes.items()}


def cli_env(emu: Emulator, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a CLI child: the emulator as its SageMaker endpoint and fake credentials only."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HYPERPOD_SCHEDULER_"))}
    return {
        **keep,
        "HOME": str(home),
        "AWS_ENDPOINT_URL_SAGEMAKER": emu.endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(home / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
        "NO_COLOR": "1",
        "COLUMNS": "200",
        **extra,
    }


def run_cli(args: list[str], env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=dict(env), cwd=cwd, capture_output=True, text=True, timeout=120)


def cli_here(args: list[str], env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``run_cli``'s answer from the CLI in this process (``cli_inproc.completed``): for the tests whose
    subject is what the CLI does, not the process it runs in (a child costs about a second here)."""
    from tests.reliability.cli_inproc import completed

    return completed(args, env, cwd)


def spawn_cli(args: list[str], env: Mapping[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *args], env=dict(env), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def small_request(name: str, cpu: int = 2) -> dict[str, Any]:
    """A two-group Slurm cluster: a controller and ``cpu`` compute nodes."""
    return slurm_request(name, {"cpu": ("ml.c5.xlarge", cpu)}, role="arn:aws:iam::123456789012:role/reliability")


@contextmanager
def account_emulator(account: str, **kwargs: Any) -> Iterator[Emulator]:
    """An emulator whose clusters belong to ``account``: their ARNs name it, as AWS's do.

    The emulator serves one account per process; multi-account tests run one per account. Its wire
    layer answers for ``AwsJsonApi.account``, and direct calls on its backend default to it too."""
    with running_emulator(**kwargs) as emu:
        api = emu._api  # the served account is a setting of the wire layer, set before any request
        assert isinstance(api.account, str)
        api.account = account
        original = emu.backend.dispatch

        def dispatch(operation: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
            kw.setdefault("account", account)
            return original(operation, params, **kw)

        emu.backend.dispatch = dispatch  # type: ignore[method-assign]
        yield emu
