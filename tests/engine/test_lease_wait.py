"""A manual stop or start meets a cluster whose lease another runner holds (a `run` loop mid-pass, a
tick): without --wait it is refused at once and says --wait would wait; with --wait it waits for the
lease to be given back, and gives up after one lease TTL (a lease lapses by then even if its holder died)."""

from __future__ import annotations

from hyperpod_scheduler.emulator import Emulator
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.engine.runner import Engine
from hyperpod_scheduler.store.memory import MemoryStore
from tests.engine.conftest import CountingClient, settle, three_tier_request


def _held(emu: Emulator, counting: CountingClient, store: MemoryStore, sleep: object) -> tuple[Engine, str]:
    counting.client.create_cluster(**three_tier_request())
    settle(emu, counting.client, "c1")
    engine = Engine(store, lambda ref: counting.client, emu.clock.now, sleep=sleep, lease_ttl_s=5.0)  # type: ignore[arg-type]
    ref, _ = engine.identify(ref_for("c1", "us-east-1"))
    assert store.acquire_lease(ref.key, "a-run-loop", 900, emu.clock.now())
    return engine, ref.key


def test_without_wait_a_held_lease_refuses_at_once(emu: Emulator, counting: CountingClient) -> None:
    store = MemoryStore()
    naps: list[float] = []
    engine, _ = _held(emu, counting, store, naps.append)
    result = engine.act(ref_for("c1", "us-east-1"), "stop", transition_id="manual-stop")
    assert (result.kind, naps) == ("skip", [])
    assert "another runner holds" in result.message
    assert counting.calls["UpdateCluster"] == 0


def test_with_wait_the_stop_goes_out_once_the_lease_is_given_back(emu: Emulator, counting: CountingClient) -> None:
    store = MemoryStore()
    naps: list[float] = []
    key = ""

    def nap(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 3:  # the other runner's pass ends
            assert store.release_lease(key, "a-run-loop")
        emu.advance(seconds)

    engine, key = _held(emu, counting, store, nap)
    result = engine.act(ref_for("c1", "us-east-1"), "stop", transition_id="manual-stop", wait=True, poll_seconds=1)
    assert result.kind in ("settled", "sent", "in-progress"), result
    assert counting.calls["UpdateCluster"] == 1
    assert len(naps) >= 3


def test_with_wait_a_lease_never_given_back_is_left_after_one_ttl(emu: Emulator, counting: CountingClient) -> None:
    store = MemoryStore()
    naps: list[float] = []
    engine, _ = _held(emu, counting, store, naps.append)  # the clock stands still: bounded by count too
    result = engine.act(ref_for("c1", "us-east-1"), "stop", transition_id="manual-stop", wait=True, poll_seconds=1)
    assert result.kind == "skip" and "another runner holds" in result.message
    assert sum(naps) == 5.0  # one TTL of the engine's lease (5 s), a second at a time
    assert counting.calls["UpdateCluster"] == 0
