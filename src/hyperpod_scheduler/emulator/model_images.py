"""The HyperPod AMI release catalogue: versions, their image ids, when each came out, and "latest".

botocore's model documents ``ImageReleaseVersion`` as MAJOR.MINOR.PATCH and says an omitted value
means "the latest available version is used". So the catalogue is a list of releases, each released
at a moment on the emulator's clock; "latest" is the highest version released by then. A test (or a
user rehearsing) can add a release at any time, or list future ones in the capacity file, and so
rehearse "AWS released a new AMI overnight". Real HyperPod version numbers and AMI ids are not
published in a machine-readable form; the built-in ones are made up in the documented format.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hyperpod_scheduler.emulator.model_timing import moment, parse_moment
from hyperpod_scheduler.errors import UsageError

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_AMI = re.compile(r"^ami-[0-9a-f]{8,17}$")

UP_TO_DATE = "UpToDate"
UPDATE_AVAILABLE = "UpdateAvailable"
SECURITY_UPDATE_REQUIRED = "SecurityUpdateRequired"
END_OF_LIFE = "EndOfLife"


@functools.lru_cache(maxsize=4096)
def version_key(version: str) -> tuple[int, int, int]:
    m = _VERSION.match(version)
    if m is None:
        raise ValueError(f"{version!r} is not a MAJOR.MINOR.PATCH version")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def image_id_for(version: str) -> str:
    """A stable, made-up AMI id for a version (17 hex digits, like real AMI ids)."""
    return "ami-" + hashlib.blake2b(f"hyperpod-ami:{version}".encode(), digest_size=9).hexdigest()[:17]


@dataclass(frozen=True)
class ImageRelease:
    version: str
    image_id: str
    released_at: datetime | None = None  # None: available from the start
    released_offset: float | None = None  # seconds after the emulator's origin
    security_update: bool = False  # older versions need this one for security (SecurityUpdateRequired)
    end_of_life_at: datetime | None = None
    end_of_life_offset: float | None = None

    @property
    def key(self) -> tuple[int, int, int]:
        return version_key(self.version)

    def released(self, t: datetime, origin: datetime) -> bool:
        when = moment(self.released_at, self.released_offset, origin)
        return when is None or when <= t

    def ended(self, t: datetime, origin: datetime) -> bool:
        when = moment(self.end_of_life_at, self.end_of_life_offset, origin)
        return when is not None and when <= t

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "image_id": self.image_id,
            "released_at": self.released_at,
            "released_offset": self.released_offset,
            "security_update": self.security_update,
            "end_of_life_at": self.end_of_life_at,
            "end_of_life_offset": self.end_of_life_offset,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ImageRelease:
        return cls(
            version=str(d["version"]),
            image_id=str(d["image_id"]),
            released_at=d.get("released_at"),
            released_offset=d.get("released_offset"),
            security_update=bool(d.get("security_update", False)),
            end_of_life_at=d.get("end_of_life_at"),
            end_of_life_offset=d.get("end_of_life_offset"),
        )


BUILT_IN: tuple[ImageRelease, ...] = tuple(
    ImageRelease(v, image_id_for(v)) for v in ("1.0.0", "1.1.0", "1.2.0", "1.2.1")
)


class Catalogue:
    """The releases an emulator knows, in version order; every question is asked at a moment ``t``."""

    def __init__(self, releases: Iterable[ImageRelease]) -> None:
        ordered = sorted(releases, key=lambda r: r.key)
        seen: set[tuple[int, int, int]] = set()
        for r in ordered:
            if r.key in seen:
                raise UsageError(f"images: version {r.version} is listed twice")
            seen.add(r.key)
        self.releases: tuple[ImageRelease, ...] = tuple(ordered)
        self._by_version = {r.version: r for r in ordered}

    def available(self, t: datetime, origin: datetime) -> list[ImageRelease]:
        return [r for r in self.releases if r.released(t, origin)]

    def latest(self, t: datetime, origin: datetime) -> ImageRelease | None:
        out = self.available(t, origin)
        return out[-1] if out else None

    def find(self, version: str) -> ImageRelease | None:
        return self._by_version.get(version)

    def by_image(self, image_id: str) -> ImageRelease | None:
        return next((r for r in self.releases if r.image_id == image_id), None)

    def next_time(self, t: datetime, origin: datetime) -> datetime | None:
        """When the next not-yet-released version comes out (for a driver that jumps the clock)."""
        times = [moment(r.released_at, r.released_offset, origin) for r in self.releases]
        later = [w for w in times if w is not None and w > t]
        return min(later) if later else None

    def status(self, version: str, t: datetime, origin: datetime) -> str:
        """ImageVersionStatus of a group or node running ``version`` at ``t``."""
        current = self.find(version)
        if current is not None and current.ended(t, origin):
            return END_OF_LIFE
        key, status = version_key(version), UP_TO_DATE
        for r in reversed(self.releases):  # newest first: only the releases above ``version`` matter
            if r.key <= key:
                break
            if r.released(t, origin):
                if r.security_update:
                    return SECURITY_UPDATE_REQUIRED
                status = UPDATE_AVAILABLE
        return status


def next_version(releases: Sequence[ImageRelease]) -> str:
    """The patch release after the highest known version."""
    if not releases:
        return "1.0.0"
    major, minor, patch = max(r.key for r in releases)
    return f"{major}.{minor}.{patch + 1}"


def release_from_dict(raw: Any, where: str) -> ImageRelease:
    """One entry of the capacity file's ``images:`` list, or of ``POST /_emulator/images``."""
    if not isinstance(raw, Mapping):
        raise UsageError(f"{where}: expected a mapping with version (and image_id, at, security_update)")
    known = {"version", "image_id", "at", "security_update", "end_of_life"}
    for key in raw:
        if key not in known:
            raise UsageError(f"{where}.{key}: unknown key (known: {', '.join(sorted(known))})")
    version = raw.get("version")
    if not isinstance(version, str) or not _VERSION.match(version):
        raise UsageError(f"{where}.version: expected MAJOR.MINOR.PATCH, got {version!r}")
    image_id = raw.get("image_id", image_id_for(version))
    if not isinstance(image_id, str) or not _AMI.match(image_id):
        raise UsageError(f"{where}.image_id: expected ami- and 8 to 17 hex digits, got {image_id!r}")
    security = raw.get("security_update", False)
    if not isinstance(security, bool):
        raise UsageError(f"{where}.security_update: expected true or false, got {security!r}")
    at, offset = parse_moment(raw["at"], f"{where}.at") if "at" in raw else (None, None)
    eol_at, eol_offset = (
        parse_moment(raw["end_of_life"], f"{where}.end_of_life") if "end_of_life" in raw else (None, None)
    )
    return ImageRelease(version, image_id, at, offset, security, eol_at, eol_offset)
