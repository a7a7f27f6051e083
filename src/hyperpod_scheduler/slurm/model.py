"""What the scheduler needs to know about Slurm jobs and nodes, as plain values."""

from __future__ import annotations

from dataclasses import dataclass

# Jobs that hold nodes: a stop would interrupt them.
ACTIVE_JOB_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "SIGNALING"})
# A node that joined Slurm and takes work (sinfo long state names, flags stripped).
USABLE_NODE_STATES = frozenset({"idle", "allocated", "mixed", "completing", "planned"})
# sinfo appends these to a state: * not responding, ~ powered off, # powering up, % powering down,
# ! pending power down, $ reservation/maintenance, @ pending reboot, ^ rebooting, - planned, + more states.
NODE_STATE_FLAGS = "*~#%!$@^-+"


@dataclass(frozen=True)
class SlurmJob:
    job_id: str  # "123", or "123_4" for an array task (scancel and scontrol take both)
    name: str
    state: str  # upper case, e.g. RUNNING
    user: str
    partition: str
    nodes: tuple[str, ...]  # expanded node names
    comment: str = ""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_JOB_STATES


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str  # long state name, lower case, without flags: idle, allocated, mixed, drained, draining, down...
    flags: str  # the trailing flag characters sinfo printed (see NODE_STATE_FLAGS)
    reason: str
    partitions: tuple[str, ...]

    @property
    def responding(self) -> bool:
        return "*" not in self.flags

    @property
    def draining(self) -> bool:
        return self.state.startswith("drain")

    @property
    def usable(self) -> bool:
        """Joined Slurm and takes work: idle or allocated (or mixed), responding, not powered down."""
        return self.state in USABLE_NODE_STATES and self.responding and "~" not in self.flags
