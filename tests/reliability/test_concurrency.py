"""Several `tick` processes on one SQLite state file at once: each transition is sent exactly once."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.reliability.harness import (
    UpdateTally,
    at_sizes,
    cli_env,
    record,
    recorded_sizes,
    small_request,
    spawn_cli,
    wait_for,
)

NAMES = [f"team-{i}" for i in range(6)]
SIZES = {"controller": 1, "cpu": 2}
STOPPED = {"controller": 0, "cpu": 0}


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[Emulator, UpdateTally, Path, datetime]]:
    on_at = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(hours=1)
    window = f"{on_at.isoformat()}/{(on_at + timedelta(days=1)).isoformat()}"
    with running_emulator(speed=3000, seed=11) as emu:
        tally = UpdateTally(emu)
        for name in NAMES:
            emu.backend.dispatch("CreateCluster", small_request(name))
        wait_for(lambda: all(at_sizes(emu, n, SIZES) for n in NAMES), "fleet in service")
        (tmp_path / "hyperpod-scheduler.yaml").write_text(
            "defaults: {poll_seconds: 0.05}\n"
            f"targets: [{{region: us-east-1, schedule: '{window}', clusters: [{', '.join(NAMES)}]}}]\n"
        )
        yield emu, tally, tmp_path, on_at


def _racing_ticks(emu: Emulator, tmp: Path, at: datetime, processes: int) -> list[str]:
    args = [
        "tick",
        "--at",
        at.isoformat(),
        "--config",
        str(tmp / "hyperpod-scheduler.yaml"),
        "--state",
        str(tmp / "s.db"),
    ]
    children = [spawn_cli(args, cli_env(emu, tmp), tmp) for _ in range(processes)]
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, out + err
        outputs.append(out)
    return outputs


def _converge(emu: Emulator, tmp: Path, at: datetime, wanted: dict[str, int], processes: int) -> None:
    for _ in range(30):
        _racing_ticks(emu, tmp, at, processes)
        recs = [record(tmp / "s.db", n) for n in NAMES]
        if all(r is not None and r.pending is None for r in recs) and all(at_sizes(emu, n, wanted) for n in NAMES):
            return
    raise AssertionError(f"the fleet did not reach {wanted}")


@pytest.mark.parametrize("processes", [3])
def test_racing_ticks_send_each_transition_once(
    fleet: tuple[Emulator, UpdateTally, Path, datetime], processes: int
) -> None:
    emu, tally, tmp, on_at = fleet
    _converge(emu, tmp, on_at - timedelta(minutes=30), STOPPED, processes)
    assert dict(tally.sent) == {n: 1 for n in NAMES}
    assert all(recorded_sizes(tmp / "s.db", n) == SIZES for n in NAMES)

    tally.reset()
    _converge(emu, tmp, on_at + timedelta(minutes=1), SIZES, processes)
    assert dict(tally.sent) == {n: 1 for n in NAMES}
    assert all(recorded_sizes(tmp / "s.db", n) == SIZES for n in NAMES)


@pytest.mark.slow
def test_five_racing_ticks_over_many_transitions(fleet: tuple[Emulator, UpdateTally, Path, datetime]) -> None:
    emu, tally, tmp, on_at = fleet
    _converge(emu, tmp, on_at - timedelta(minutes=30), STOPPED, 5)
    _converge(emu, tmp, on_at + timedelta(minutes=1), SIZES, 5)
    _converge(emu, tmp, on_at + timedelta(days=1, minutes=1), STOPPED, 5)
    assert dict(tally.sent) == {n: 3 for n in NAMES}
