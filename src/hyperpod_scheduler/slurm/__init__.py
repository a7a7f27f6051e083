"""The Slurm edge: a small interface over squeue, sinfo, scontrol and scancel, and parsers for their output."""

from hyperpod_scheduler.slurm.commands import Slurm, SlurmError, SubprocessSlurm
from hyperpod_scheduler.slurm.memory import MemorySlurm
from hyperpod_scheduler.slurm.model import SlurmJob, SlurmNode
from hyperpod_scheduler.slurm.parse import expand_hostlist, parse_sinfo, parse_squeue

__all__ = [
    "MemorySlurm",
    "Slurm",
    "SlurmError",
    "SlurmJob",
    "SlurmNode",
    "SubprocessSlurm",
    "expand_hostlist",
    "parse_sinfo",
    "parse_squeue",
]
