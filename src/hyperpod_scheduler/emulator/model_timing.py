"""How long each phase of the emulated control plane takes: ranges in seconds, drawn with seeded jitter.

No public per-node figure exists; these defaults reproduce the documented whole-cluster figures
(a new AMI-based cluster is InService in about 10 to 15 minutes). Deep health checks have no
published duration at all; their defaults are estimates per instance family (the GPU checks, DCGM
level 4 and NCCL, take longest), each drawn with spread.

Also here: the moments that configuration names (an ISO time, or an offset like ``+2h`` from when
the emulator started), shared by capacity steps, image releases and training plans.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from hyperpod_scheduler.errors import UsageError

Range = tuple[float, float]

# Deep health checks by instance family (first match wins); the last entry covers everything else.
DEFAULT_HEALTH_CHECKS: tuple[tuple[str, Range], ...] = (
    ("ml.p6*", (2700.0, 5400.0)),
    ("ml.p5*", (2400.0, 4800.0)),
    ("ml.p4*", (2100.0, 4200.0)),
    ("ml.trn*", (1800.0, 3600.0)),
    ("ml.g*", (900.0, 1800.0)),
    ("*", (600.0, 1200.0)),
)


@dataclass(frozen=True)
class Timing:
    cluster_setup: Range = (60.0, 120.0)  # VPC/ENI/Slurm head bookkeeping before instances launch
    update_start: Range = (20.0, 60.0)  # UpdateCluster accepted until launches/scale-in begin
    provisioning: Range = (300.0, 480.0)  # EC2 launch until the OS boots
    ami_setup: Range = (180.0, 300.0)  # AMI-based configuration (Slurm daemons, Docker, Enroot...)
    extension_script: Range = (120.0, 240.0)  # OnInitComplete script after AMI setup
    custom_scripts: Range = (480.0, 720.0)  # OnCreate scripts doing everything themselves
    deep_health_check: tuple[tuple[str, Range], ...] = DEFAULT_HEALTH_CHECKS  # by instance type glob
    shutdown: Range = (120.0, 240.0)  # ShuttingDown until the instance is gone
    capacity_failure_detection: Range = (120.0, 300.0)  # all-or-nothing: time until the launch fails
    rollback: Range = (120.0, 300.0)  # RollingBack until back to the previous state
    delete_cluster: Range = (60.0, 180.0)  # after the last node is gone
    retry_interval: Range = (240.0, 360.0)  # Continuous mode: re-check the capacity pool
    min_count_timeout: Range = (10800.0, 10800.0)  # the documented three hours

    def health_check(self, instance_type: str) -> Range:
        for pattern, r in self.deep_health_check:
            if pattern == instance_type or fnmatch.fnmatchcase(instance_type, pattern):
                return r
        return DEFAULT_HEALTH_CHECKS[-1][1]

    @classmethod
    def from_dict(cls, data: Any, where: str = "timing") -> Timing:
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise UsageError(f"{where}: must be a mapping of phase name to [min, max] seconds")
        names = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in data.items():
            if key not in names:
                raise UsageError(f"{where}.{key}: unknown phase (known: {', '.join(sorted(names))})")
            if key == "deep_health_check":
                values[key] = _health_checks(raw, f"{where}.{key}")
            else:
                values[str(key)] = _range(raw, f"{where}.{key}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = {p: list(r) for p, r in value} if f.name == "deep_health_check" else list(value)
        return out


def _health_checks(raw: Any, where: str) -> tuple[tuple[str, Range], ...]:
    """One range for every type, or a mapping of instance type (or glob) to a range; the built-in
    family estimates stay behind what the file names."""
    if isinstance(raw, Mapping):
        mine = tuple((str(k), _range(v, f"{where}.{k}")) for k, v in raw.items())
        return mine + DEFAULT_HEALTH_CHECKS
    return (("*", _range(raw, where)),)


def _range(raw: Any, where: str) -> Range:
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        lo = hi = float(raw)
    elif (
        isinstance(raw, list | tuple)
        and len(raw) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw)
    ):
        lo, hi = float(raw[0]), float(raw[1])
    else:
        raise UsageError(f"{where}: expected seconds or [min, max] seconds, got {raw!r}")
    if lo < 0 or hi < lo:
        raise UsageError(f"{where}: need 0 <= min <= max, got {raw!r}")
    return (lo, hi)


# --- moments named in configuration ------------------------------------------------------------------

_OFFSET = re.compile(r"^\+?(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_moment(raw: Any, where: str) -> tuple[datetime | None, float | None]:
    """``(absolute time, None)`` or ``(None, offset seconds)`` from an ISO time, seconds or ``'+90m'``."""
    if isinstance(raw, datetime):
        at = raw if raw.tzinfo is not None else raw.replace(tzinfo=UTC)
        return at.astimezone(UTC), None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return None, float(raw)
    if isinstance(raw, str):
        m = _OFFSET.match(raw.strip())
        if m:
            return None, float(m.group(1)) * _UNIT[m.group(2)]
        try:
            parsed = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC), None
    raise UsageError(f"{where}: expected an ISO 8601 time or an offset like '+90m', got {raw!r}")


def moment(at: datetime | None, offset: float | None, origin: datetime) -> datetime | None:
    """The moment a parsed value names, counting offsets from ``origin`` (None: neither was given)."""
    if at is not None:
        return at
    if offset is not None:
        return origin + timedelta(seconds=offset)
    return None
