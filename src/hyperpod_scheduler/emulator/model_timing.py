"""How long each phase of the emulated control plane takes: ranges in seconds, drawn with seeded jitter.

No public per-node figure exists; these defaults reproduce the documented whole-cluster figures
(a new AMI-based cluster is InService in about 10 to 15 minutes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from hyperpod_scheduler.errors import UsageError

Range = tuple[float, float]


@dataclass(frozen=True)
class Timing:
    cluster_setup: Range = (60.0, 120.0)  # VPC/ENI/Slurm head bookkeeping before instances launch
    update_start: Range = (20.0, 60.0)  # UpdateCluster accepted until launches/scale-in begin
    provisioning: Range = (300.0, 480.0)  # EC2 launch until the OS boots
    ami_setup: Range = (180.0, 300.0)  # AMI-based configuration (Slurm daemons, Docker, Enroot...)
    extension_script: Range = (120.0, 240.0)  # OnInitComplete script after AMI setup
    custom_scripts: Range = (480.0, 720.0)  # OnCreate scripts doing everything themselves
    deep_health_check: Range = (1200.0, 2400.0)  # OnStartDeepHealthChecks (an estimate)
    shutdown: Range = (120.0, 240.0)  # ShuttingDown until the instance is gone
    capacity_failure_detection: Range = (120.0, 300.0)  # all-or-nothing: time until the launch fails
    rollback: Range = (120.0, 300.0)  # RollingBack until back to the previous state
    delete_cluster: Range = (60.0, 180.0)  # after the last node is gone
    retry_interval: Range = (240.0, 360.0)  # Continuous mode: re-check the capacity pool
    min_count_timeout: Range = (10800.0, 10800.0)  # the documented three hours

    @classmethod
    def from_dict(cls, data: Any, where: str = "timing") -> Timing:
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise UsageError(f"{where}: must be a mapping of phase name to [min, max] seconds")
        names = {f.name for f in fields(cls)}
        values: dict[str, Range] = {}
        for key, raw in data.items():
            if key not in names:
                raise UsageError(f"{where}.{key}: unknown phase (known: {', '.join(sorted(names))})")
            values[str(key)] = _range(raw, f"{where}.{key}")
        return cls(**values)

    def to_dict(self) -> dict[str, list[float]]:
        return {f.name: list(getattr(self, f.name)) for f in fields(self)}


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
