"""Checks across the config that a field's own type cannot make: does every name it uses mean
something? A config that loads is one the engine can honour, so a typo is refused at load time (and
at ``config push``) instead of being found by a tick at 18:00, or never.
"""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_scheduler.agent.settings import CheckpointSettings
from hyperpod_scheduler.config.model import ClusterEntry, Config, Defaults, Target
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.schedule import Schedule, load_schedules, resolve

# Channel URLs an agent on another machine can reach. ``memory:`` is one process's memory: no agent
# would ever answer, so every stop would wait out the agent timeout and then fall to silent_agent.
STORE_CHANNEL_SCHEMES = ("dynamodb://", "sqlite:")


def check_config(config: Config, source: str = "config") -> None:
    """Raise a one-line UsageError naming the key when a schedule name, a schedule expression or a
    checkpoint channel in ``config`` cannot be used."""
    try:
        schedules = load_schedules(config.schedules)
    except UsageError as exc:
        raise UsageError(f"{source}: {exc}") from None
    for where, label in schedule_references(config):
        _check_schedule(source, where, label, schedules)
    for where, settings in checkpoint_blocks(config):
        _check_channel(source, where, settings)


def levels(config: Config) -> Iterator[tuple[str, Defaults | Target | ClusterEntry]]:
    """(key, block) for the defaults, every target and every named cluster, in the file's order."""
    yield "defaults", config.defaults
    for i, target in enumerate(config.targets):
        yield f"targets[{i}]", target
        for j, entry in enumerate(target.clusters):
            yield f"targets[{i}].clusters[{j}]", entry


def schedule_references(config: Config) -> Iterator[tuple[str, str | None]]:
    """(key, schedule) for every schedule set anywhere, and (key, None) for a named cluster that has none."""
    default = config.defaults.schedule
    target_schedule: str | None = None
    for where, block in levels(config):
        if isinstance(block, Target):
            target_schedule = block.schedule
        if block.schedule is not None:
            yield f"{where}.schedule", block.schedule
        elif isinstance(block, ClusterEntry) and target_schedule is None and default is None:
            yield f"{where} ('{block.name}')", None


def checkpoint_blocks(config: Config) -> Iterator[tuple[str, CheckpointSettings]]:
    """(key, settings) for every ``checkpoints:`` block of the config."""
    for where, block in levels(config):
        if isinstance(block.checkpoints, CheckpointSettings):  # ``none`` asks for no audit
            yield f"{where}.checkpoints", block.checkpoints


def _check_schedule(source: str, where: str, label: str | None, schedules: dict[str, Schedule]) -> None:
    if label is None:
        raise UsageError(f"{source}: {where}: no schedule (set `schedule` on the cluster, its target, or `defaults`)")
    try:
        resolve(label, schedules)
    except UsageError as exc:
        raise UsageError(f"{source}: {where}: {exc}") from None


def _check_channel(source: str, where: str, settings: CheckpointSettings) -> None:
    channel = settings.channel
    if channel is None:
        return
    if channel.startswith("s3://"):
        if not channel[5:].split("/", 1)[0]:
            raise UsageError(f"{source}: {where}.channel: '{channel}' names no bucket (s3://BUCKET/PREFIX)")
        return
    if channel.startswith("memory:"):
        raise UsageError(
            f"{source}: {where}.channel: '{channel}' lives in this process's memory, where no agent can "
            "answer; use s3://BUCKET/PREFIX, dynamodb://TABLE or a store file both sides can read"
        )
    if "://" in channel and not channel.startswith(STORE_CHANNEL_SCHEMES):
        raise UsageError(
            f"{source}: {where}.channel: '{channel}' is not s3://BUCKET/PREFIX, dynamodb://TABLE, sqlite:///PATH "
            "or a path"
        )
