"""The capacity pool: how many instances of each type the emulated region can give, over time.

Loaded from YAML (``--capacity FILE``); the format is documented in docs/emulator.md. Each concrete
instance type has its own pool, sized by the first entry whose name or glob pattern matches it
(exact names win over patterns). The pool is shared by every cluster of the emulator.
"""

from __future__ import annotations

import bisect
import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import yaml

from hyperpod_scheduler.emulator.model_images import BUILT_IN, Catalogue, ImageRelease, release_from_dict
from hyperpod_scheduler.emulator.model_plans import TrainingPlan, plans_from_dict
from hyperpod_scheduler.emulator.model_timing import Timing, parse_moment
from hyperpod_scheduler.errors import UsageError

UNLIMITED = None  # an ``available`` of None means the pool never runs dry


@dataclass(frozen=True)
class Step:
    """From ``at`` on (absolute, or ``offset`` seconds after the emulator started) the pool holds ``available``."""

    available: int | None
    at: datetime | None = None
    offset: float | None = None

    def when(self, origin: datetime) -> datetime:
        if self.at is not None:
            return self.at
        return origin + timedelta(seconds=self.offset or 0.0)


@dataclass(frozen=True)
class Pool:
    available: int | None = UNLIMITED
    daily: tuple[tuple[time, int | None], ...] = ()  # (UTC time of day, available), sorted
    steps: tuple[Step, ...] = ()
    quota: int | None = None  # account-level limit on TargetCount of this type (ResourceLimitExceeded)

    def available_at(self, t: datetime, origin: datetime) -> int | None:
        """Steps, once reached, win over the daily pattern, which wins over the base figure."""
        value = self.available
        if self.daily:
            tod = t.astimezone(UTC).time()
            keys = [d[0] for d in self.daily]
            i = bisect.bisect_right(keys, tod) - 1
            value = self.daily[i][1]  # i == -1 wraps to the last point of the previous day
        reached = [s for s in self.steps if s.when(origin) <= t]
        if reached:
            value = max(reached, key=lambda s: s.when(origin)).available
        return value


DEFAULT_POOLS: tuple[tuple[str, Pool], ...] = (
    ("ml.p6*", Pool(available=4)),
    ("ml.p5*", Pool(available=8)),
    ("ml.p4d*", Pool(available=16)),
    ("ml.p4de*", Pool(available=8)),
    ("ml.trn2*", Pool(available=16)),
    ("ml.trn1*", Pool(available=32)),
    ("ml.g6e*", Pool(available=64)),
    ("*", Pool(available=1000)),  # CPU, G5, G6...: plentiful
)


@dataclass(frozen=True)
class CapacityModel:
    pools: tuple[tuple[str, Pool], ...] = DEFAULT_POOLS
    fail_next_launches: Mapping[str, int] = field(default_factory=dict)
    lifecycle_script_failure_rate: float = 0.0
    timing: Timing = field(default_factory=Timing)
    images: tuple[ImageRelease, ...] = BUILT_IN  # the AMI release catalogue (model_images)
    training_plans: tuple[TrainingPlan, ...] = ()

    @classmethod
    def default(cls) -> CapacityModel:
        return cls()

    @classmethod
    def from_yaml(cls, path: str | Path) -> CapacityModel:
        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"capacity file {p}: cannot read it ({exc.strerror or exc})") from exc
        except yaml.YAMLError as exc:
            raise UsageError(f"capacity file {p}: not valid YAML ({exc})") from exc
        try:
            return cls.from_dict(data if data is not None else {})
        except UsageError as exc:
            raise UsageError(f"capacity file {p}: {exc}") from exc

    @classmethod
    def from_dict(cls, data: Any) -> CapacityModel:
        if not isinstance(data, Mapping):
            raise UsageError("capacity: the top level must be a mapping")
        known = {"instance_types", "failures", "timing", "defaults", "images", "training_plans"}
        for key in data:
            if key not in known:
                raise UsageError(f"capacity.{key}: unknown key (known: {', '.join(sorted(known))})")
        pools: list[tuple[str, Pool]] = []
        types = data.get("instance_types") or {}
        if not isinstance(types, Mapping):
            raise UsageError("instance_types: must map an instance type (or glob) to its pool")
        for name, raw in types.items():
            pools.append((str(name), _pool(raw, f"instance_types.{name}")))
        defaults = data.get("defaults", True)
        if not isinstance(defaults, bool):
            raise UsageError(f"defaults: expected true or false, got {defaults!r}")
        if defaults:
            pools.extend(DEFAULT_POOLS)  # explicit entries come first, so they win
        fail_next, rate = _failures(data.get("failures"))
        images = (BUILT_IN if defaults else ()) + _images(data.get("images"))
        Catalogue(images)  # refuses a version listed twice
        plans = plans_from_dict(data.get("training_plans"))
        return cls(
            pools=tuple(pools),
            fail_next_launches=fail_next,
            lifecycle_script_failure_rate=rate,
            timing=Timing.from_dict(data.get("timing")),
            images=images,
            training_plans=plans,
        )

    def pool(self, instance_type: str) -> Pool:
        for name, pool in self.pools:
            if name == instance_type:
                return pool
        for name, pool in self.pools:
            if fnmatch.fnmatchcase(instance_type, name):
                return pool
        return Pool()

    def available(self, instance_type: str, t: datetime, origin: datetime) -> int | None:
        return self.pool(instance_type).available_at(t, origin)


def _count(raw: Any, where: str) -> int | None:
    if raw is None or raw == "unlimited":
        return None
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    raise UsageError(f"{where}: expected a count >= 0 or 'unlimited', got {raw!r}")


def _step(raw: Any, where: str) -> Step:
    if not isinstance(raw, Mapping) or "at" not in raw or "available" not in raw:
        raise UsageError(f"{where}: expected {{at: ISO time or offset like '+2h', available: N}}")
    available = _count(raw["available"], f"{where}.available")
    at, offset = parse_moment(raw["at"], f"{where}.at")
    return Step(available, at=at, offset=offset)


def _images(raw: Any) -> tuple[ImageRelease, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise UsageError("images: expected a list of {version, image_id, at} releases")
    return tuple(release_from_dict(item, f"images[{i}]") for i, item in enumerate(raw))


def _daily(raw: Any, where: str) -> tuple[tuple[time, int | None], ...]:
    if not isinstance(raw, list) or not raw:
        raise UsageError(f"{where}: expected a list of {{time: 'HH:MM', available: N}} (UTC)")
    points: list[tuple[time, int | None]] = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or "time" not in item or "available" not in item:
            raise UsageError(f"{where}[{i}]: expected {{time: 'HH:MM', available: N}}")
        text = item["time"]
        if isinstance(text, int):  # YAML 1.1 reads 09:00 as a sexagesimal integer
            text = f"{text // 60:02d}:{text % 60:02d}"
        try:
            tod = time.fromisoformat(str(text))
        except ValueError:
            raise UsageError(f"{where}[{i}].time: expected 'HH:MM' (UTC), got {item['time']!r}") from None
        points.append((tod, _count(item["available"], f"{where}[{i}].available")))
    return tuple(sorted(points, key=lambda p: p[0]))


def _pool(raw: Any, where: str) -> Pool:
    if isinstance(raw, int) or raw is None or raw == "unlimited":
        return Pool(available=_count(raw, where))
    if not isinstance(raw, Mapping):
        raise UsageError(f"{where}: expected a count or a mapping with available/daily/schedule/quota")
    for key in raw:
        if key not in ("available", "daily", "schedule", "quota"):
            raise UsageError(f"{where}.{key}: unknown key (known: available, daily, schedule, quota)")
    steps = raw.get("schedule") or []
    if not isinstance(steps, list):
        raise UsageError(f"{where}.schedule: expected a list of {{at, available}} steps")
    quota = raw.get("quota")
    return Pool(
        available=_count(raw.get("available"), f"{where}.available"),
        daily=_daily(raw["daily"], f"{where}.daily") if "daily" in raw else (),
        steps=tuple(_step(s, f"{where}.schedule[{i}]") for i, s in enumerate(steps)),
        quota=_count(quota, f"{where}.quota") if quota is not None else None,
    )


def _failures(raw: Any) -> tuple[dict[str, int], float]:
    if raw is None:
        return {}, 0.0
    if not isinstance(raw, Mapping):
        raise UsageError("failures: expected a mapping with fail_next_launches / lifecycle_script_failure_rate")
    for key in raw:
        if key not in ("fail_next_launches", "lifecycle_script_failure_rate"):
            raise UsageError(f"failures.{key}: unknown key (known: fail_next_launches, lifecycle_script_failure_rate)")
    fail_next: dict[str, int] = {}
    launches = raw.get("fail_next_launches") or {}
    if not isinstance(launches, Mapping):
        raise UsageError("failures.fail_next_launches: expected a mapping of instance type to a count")
    for name, n in launches.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise UsageError(f"failures.fail_next_launches.{name}: expected a count >= 0, got {n!r}")
        fail_next[str(name)] = n
    rate = raw.get("lifecycle_script_failure_rate", 0.0)
    if not isinstance(rate, int | float) or isinstance(rate, bool) or not 0.0 <= rate <= 1.0:
        raise UsageError(f"failures.lifecycle_script_failure_rate: expected 0.0..1.0, got {rate!r}")
    return fail_next, float(rate)
