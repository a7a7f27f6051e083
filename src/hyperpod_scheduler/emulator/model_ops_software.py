"""UpdateClusterSoftware: move instance groups to another HyperPod AMI release (or AMI).

As botocore's model defines it: ``ClusterName``, ``InstanceGroups`` (each a name and an
``ImageReleaseVersion``, MAJOR.MINOR.PATCH), ``DeploymentConfig`` (a rolling policy, a wait, rollback
alarms) and ``ImageId``; the answer is ``ClusterArn``; its errors are ConflictException and
ResourceNotFound. What the emulator assumes where the model and the guide are silent (docs/emulator.md,
"UpdateClusterSoftware"):

- refused (ConflictException) unless the cluster is InService: one update at a time, as UpdateCluster;
- ``InstanceGroups`` omitted: every group on a HyperPod-managed release moves to the latest one;
- a group on a custom AMI named with an ``ImageReleaseVersion`` is refused (the version names a
  HyperPod-managed AMI);
- the groups' desired release changes at once; the cluster is Updating for the usual update set-up
  time, then InService. Running nodes are not rolled one by one: they keep the release they launched
  on (CurrentImageReleaseVersion) and nodes launched from then on run the new one. A group at zero
  therefore reports its old release as current until its next node launches.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_scheduler.emulator import model_control as control
from hyperpod_scheduler.emulator.errors import conflict, not_found, validation
from hyperpod_scheduler.emulator.model_lookup import find_cluster
from hyperpod_scheduler.emulator.model_state import Cluster
from hyperpod_scheduler.emulator.model_world import World


def _image_choice(w: World, t: datetime, c: Cluster, image: str) -> tuple[str | None, str]:
    catalogue = w.catalogue()
    if image == "default":
        latest = catalogue.latest(t, w.origin)
        if latest is None:
            raise validation("ImageId: default: no HyperPod AMI release is available")
        return latest.version, latest.image_id
    release = catalogue.by_image(image)
    if release is not None and not release.released(t, w.origin):
        raise validation(f"ImageId: {image} is not released yet")
    return (release.version, image) if release is not None else (None, image)


def update_cluster_software(w: World, t: datetime, p: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    c = find_cluster(w, p["ClusterName"], account, region)
    catalogue = w.catalogue()
    latest = catalogue.latest(t, w.origin)
    live = {n: g for n, g in c.groups.items() if g.status != "Deleting"}
    asked = p.get("InstanceGroups")
    if asked is None:
        asked = [{"InstanceGroupName": n} for n, g in live.items() if g.image_version is not None]
    chosen: dict[str, tuple[str | None, str]] = {}
    for i, entry in enumerate(asked):
        name = entry["InstanceGroupName"]
        group = live.get(name)
        if group is None:
            raise not_found(f"InstanceGroups[{i}]: instance group {name} not found in cluster {c.name}")
        if name in chosen:
            raise validation(f"InstanceGroups[{i}]: instance group {name} is named twice")
        version = entry.get("ImageReleaseVersion")
        if version is not None:
            release = catalogue.find(str(version))
            if release is None or not release.released(t, w.origin):
                known = ", ".join(r.version for r in catalogue.available(t, w.origin)) or "none"
                raise validation(
                    f"InstanceGroups[{i}].ImageReleaseVersion: {version} is not an available HyperPod AMI "
                    f"release (available: {known})"
                )
            if group.image_version is None:
                raise validation(
                    f"InstanceGroups[{i}]: instance group {name} runs a custom AMI ({group.image_id}); "
                    "ImageReleaseVersion names a HyperPod-managed AMI"
                )
            chosen[name] = (release.version, release.image_id)
        elif "ImageId" in p:
            chosen[name] = _image_choice(w, t, c, str(p["ImageId"]))
        elif latest is not None and group.image_version is not None:
            chosen[name] = (latest.version, latest.image_id)
    if c.status != "InService":
        raise conflict(f"Cluster {c.name} is in {c.status} state; its software can be updated only when InService")
    snapshot = {n: g.to_dict() for n, g in c.groups.items()}
    for name, (version, image_id) in chosen.items():
        g = c.groups[name]
        g.image_version, g.image_id = version, image_id
    control.begin_operation(w, c, t, "update", snapshot)
    w.touch(c)
    return {"ClusterArn": c.arn}
