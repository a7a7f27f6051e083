"""A live cluster behind a fast real-time emulator, a config and a state file, for the crash tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from hyperpod_scheduler.cli.main import app
from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.store.records import ClusterRecord
from tests.engine.conftest import three_tier_request
from tests.reliability.harness import SIZES, UpdateTally, at_sizes, cli_env, record, wait_for

# A killed runner keeps the cluster's lease until its TTL (900 s, Engine's default; the CLI has no knob
# for it). The recovering tick therefore looks at a later instant with --at, where the lease is stale.
LEASE_TTL = timedelta(seconds=900)
RECOVER_AFTER = LEASE_TTL + timedelta(minutes=2)


@dataclass
class Live:
    emu: Emulator
    tally: UpdateTally
    tmp: Path
    config: Path
    state: Path
    env: dict[str, str]
    start_at: datetime  # when the config's schedule turns the cluster on

    def args(self, *command: str) -> list[str]:
        return [*command, "--config", str(self.config), "--state", str(self.state)]

    def cli(self, *command: str) -> tuple[int, str]:
        """The CLI in this process (fast), with the child's environment."""
        result = CliRunner().invoke(app, self.args(*command), env=self.env)
        return result.exit_code, result.output

    def converge(self, wanted: dict[str, int], at: datetime, limit: int = 80) -> int:
        """Tick (as of ``at``) until the record is settled and the cluster at ``wanted``; the ticks it took."""
        for n in range(1, limit + 1):
            code, out = self.cli("tick", "--at", at.isoformat())
            assert code == 0, out
            rec = _record(self.state)
            if rec is not None and rec.pending is None and at_sizes(self.emu, "c1", wanted):
                return n
            time.sleep(0.02)  # let the emulator's real-time clock move on
        raise AssertionError(f"did not converge to {wanted} in {limit} ticks")


def _record(state: Path) -> ClusterRecord | None:
    return record(state) if state.exists() else None


def live_cluster(tmp: Path, schedule_for: str, seed: int = 7) -> Iterator[Live]:
    """``schedule_for``: 'stop' (the schedule wants it stopped) or 'start' (it turns running later on)."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start_at = now + timedelta(hours=2)
    if schedule_for == "stop":
        schedule = "never"
    else:
        schedule = f"{start_at.isoformat()}/{(start_at + timedelta(days=30)).isoformat()}"
    with running_emulator(speed=3000, seed=seed) as emu:
        tally = UpdateTally(emu)
        emu.backend.dispatch("CreateCluster", three_tier_request("c1"))
        wait_for(lambda: at_sizes(emu, "c1", SIZES), "c1 in service")
        config = tmp / "hyperpod-scheduler.yaml"
        config.write_text(
            "defaults: {poll_seconds: 0.05, settle_timeout_minutes: 600}\n"
            f"targets: [{{region: us-east-1, schedule: '{schedule}', clusters: [c1]}}]\n"
        )
        env = cli_env(emu, tmp)
        yield Live(emu, tally, tmp, config, tmp / "state.sqlite", env, start_at)
