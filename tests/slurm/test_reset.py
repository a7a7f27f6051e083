"""The real-Slurm tests' reset under load: a node may leave DOWN by itself (its slurmd registers)
between the reset's look and its resume, and Slurm then refuses the resume."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pytest

from hyperpod_scheduler.slurm.commands import SlurmError, SubprocessSlurm
from hyperpod_scheduler.slurm.model import SlurmJob, SlurmNode

from .real import INVALID_STATE, NODES, ensure_slurm, exclusive, node_states, reset


def _node(name: str, state: str, reason: str = "") -> SlurmNode:
    return SlurmNode(name, state, "", reason, ("gpu",))


@dataclass
class RegisteringSlurm:
    """Slurm as a loaded machine shows it: node1 reads DOWN, but by the time a resume arrives its
    freshly started slurmd has registered and brought it back (ReturnToService=2). A resume of a node
    that is not down or drained is refused as Slurm refuses it, for the whole list of names."""

    nodes_: dict[str, SlurmNode] = field(
        default_factory=lambda: {
            "node1": _node("node1", "down", "emulator: instance terminated"),
            "node2": _node("node2", "drained", "hyperpod-scheduler: scheduled stop"),
            "node3": _node("node3", "idle"),
        }
    )
    resumes: list[tuple[str, ...]] = field(default_factory=list)

    def jobs(self) -> list[SlurmJob]:
        return []

    def nodes(self) -> list[SlurmNode]:
        shown = list(self.nodes_.values())
        self.nodes_["node1"] = replace(self.nodes_["node1"], state="idle", reason="")  # it registers
        return shown

    def resume(self, names: Sequence[str]) -> None:
        self.resumes.append(tuple(names))
        refused = [n for n in names if not (self.nodes_[n].draining or self.nodes_[n].state in ("down", "drained"))]
        for n in names:
            if n not in refused:
                self.nodes_[n] = replace(self.nodes_[n], state="idle", reason="")
        if refused:
            shown = f"scontrol update nodename={','.join(names)} state=resume"
            raise SlurmError(f"`{shown}` failed (exit 1): slurm_update error: {INVALID_STATE}")

    def signal(self, job_id: str, signal: str, batch_only: bool) -> None:
        raise AssertionError("reset signals nothing")

    def requeue(self, job_id: str) -> None:
        raise AssertionError("reset requeues nothing")

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        raise AssertionError("reset drains nothing")


class Daemons:
    def __init__(self) -> None:
        self.started: list[str] = []

    def start(self, name: str) -> None:
        self.started.append(name)

    def stop(self, name: str) -> None:
        raise AssertionError("reset stops no slurmd")


def test_a_node_that_registers_between_the_look_and_the_resume_does_not_fail_the_reset() -> None:
    slurm, daemons = RegisteringSlurm(), Daemons()
    reset(slurm, daemons)
    assert daemons.started == list(NODES)
    assert {n.name: n.state for n in slurm.nodes()} == {"node1": "idle", "node2": "idle", "node3": "idle"}
    assert ("node2",) in slurm.resumes  # the drained node was resumed on its own


def test_any_other_slurm_failure_still_fails_the_reset() -> None:
    slurm = RegisteringSlurm()

    def broken(names: Sequence[str]) -> None:
        raise SlurmError("`scontrol update` did not answer within 30s (is slurmctld up?)")

    slurm.resume = broken  # type: ignore[method-assign]
    with pytest.raises(SlurmError, match="did not answer"):
        reset(slurm, Daemons())


class StaleFirstLook:
    """The real Slurm, except that the first look still shows node1 DOWN (as it was a moment ago)."""

    def __init__(self) -> None:
        self.real = SubprocessSlurm()
        self.looks = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)

    def nodes(self) -> list[SlurmNode]:
        self.looks += 1
        found = self.real.nodes()
        if self.looks > 1:
            return found
        return [replace(n, state="down", reason="stale look") if n.name == "node1" else n for n in found]


@pytest.mark.real_slurm
def test_the_real_slurm_refuses_resuming_an_idle_node_and_the_reset_copes() -> None:
    ensure_slurm()
    with exclusive():
        assert node_states()["node1"][0] == "idle"
        slurm = StaleFirstLook()
        reset(slurm)  # type: ignore[arg-type]
        assert slurm.looks >= 2
        assert {n: s for n, (s, _) in node_states().items()} == dict.fromkeys(NODES, "idle")
