"""The emulator's records: clusters, instance groups, nodes, cluster events and scheduled changes.

Plain mutable dataclasses with JSON round-trips (one cluster is one row in the state file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# Node phases, in order of a launch; the status each one shows in InstanceStatus.Status.
PHASE_STATUS = {
    "provisioning": "Pending",
    "ami-setup": "Pending",
    "extension-script": "Pending",
    "custom-scripts": "Pending",
    "deep-health-check": "DeepHealthCheckInProgress",
    "running": "Running",
    "shutting-down": "ShuttingDown",
}
PHASE_MESSAGE = {
    "provisioning": "Provisioning the instance",
    "ami-setup": "Configuring the node from the HyperPod AMI",
    "extension-script": "Running the OnInitComplete lifecycle script",
    "custom-scripts": "Running the OnCreate lifecycle scripts",
    "deep-health-check": "Running deep health checks",
    "running": "",
    "shutting-down": "Terminating the instance",
}
SCRIPT_PHASES = ("extension-script", "custom-scripts")
CLUSTER_STATUSES = ("Creating", "InService", "Updating", "RollingBack", "Failed", "Deleting", "SystemUpdating")
GROUP_STATUSES = ("InService", "Creating", "Updating", "Degraded", "Deleting", "Failed", "SystemUpdating")


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


@dataclass
class Node:
    instance_id: str
    group: str
    instance_type: str
    launch_time: datetime
    phases: list[tuple[str, float]]  # planned phases and their durations in seconds
    phase_index: int = 0
    phase: str = "provisioning"
    logical_id: str | None = None
    lifecycle_start: datetime | None = None  # billing starts here (lifecycle setup), not at launch
    fail_phase: int | None = None  # index of the lifecycle phase whose script will fail
    failed: bool = False
    message: str = ""
    private_ip: str = ""
    op: int = 0  # the operation that launched it; an all-or-nothing rollback removes these
    draining: bool = False  # an all-or-nothing update will remove it once its launches succeed
    image_version: str | None = None  # the HyperPod AMI release it runs (None: a custom AMI)
    image_id: str = ""
    plan: str | None = None  # the training plan whose reserved capacity it holds
    scaling_op: str | None = None  # OperationId of the Scaling operation that launched it
    check_op: str | None = None  # OperationId of its DeepHealthCheck operation

    @property
    def status(self) -> str:
        return "Failure" if self.failed else PHASE_STATUS[self.phase]  # a failed node stays Failure until gone

    @property
    def active(self) -> bool:
        """Counts towards the group's size (launched and not on its way out)."""
        return self.phase != "shutting-down"

    @property
    def settling(self) -> bool:
        return self.phase not in ("running", "shutting-down")

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "group": self.group,
            "instance_type": self.instance_type,
            "launch_time": _iso(self.launch_time),
            "phases": [list(p) for p in self.phases],
            "phase_index": self.phase_index,
            "phase": self.phase,
            "logical_id": self.logical_id,
            "lifecycle_start": _iso(self.lifecycle_start),
            "fail_phase": self.fail_phase,
            "failed": self.failed,
            "message": self.message,
            "private_ip": self.private_ip,
            "op": self.op,
            "draining": self.draining,
            "image_version": self.image_version,
            "image_id": self.image_id,
            "plan": self.plan,
            "scaling_op": self.scaling_op,
            "check_op": self.check_op,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Node:
        launch = _dt(d["launch_time"])
        assert launch is not None
        return cls(
            instance_id=d["instance_id"],
            group=d["group"],
            instance_type=d["instance_type"],
            launch_time=launch,
            phases=[(str(p[0]), float(p[1])) for p in d["phases"]],
            phase_index=d["phase_index"],
            phase=d["phase"],
            logical_id=d.get("logical_id"),
            lifecycle_start=_dt(d.get("lifecycle_start")),
            fail_phase=d.get("fail_phase"),
            failed=d.get("failed", False),
            message=d.get("message", ""),
            private_ip=d.get("private_ip", ""),
            op=d.get("op", 0),
            draining=d.get("draining", False),
            image_version=d.get("image_version"),
            image_id=d.get("image_id", ""),
            plan=d.get("plan"),
            scaling_op=d.get("scaling_op"),
            check_op=d.get("check_op"),
        )


@dataclass
class Group:
    name: str
    spec: dict[str, Any]  # the group as last sent, without InstanceCount / MinInstanceCount
    target: int
    min_count: int | None
    status: str
    created_op: int
    stable_target: int = 0  # last InService values: what the MinInstanceCount rollback returns to
    stable_min: int | None = None
    wave: list[str] = field(default_factory=list)  # nodes of the group's first launch (Continuous)
    logical_queue: list[str] = field(default_factory=list)  # BatchAdd ids not yet given to a node
    retry_pending: bool = False
    last_warn: datetime | None = None
    last_short: int = 0
    min_token: int = 0
    image_version: str | None = None  # desired HyperPod AMI release (None: a custom AMI)
    image_id: str = ""  # desired AMI id: what a node launched now runs
    ran_version: str | None = None  # what its nodes last ran, for Current* while it has none
    ran_image_id: str = ""
    scaling_op: str | None = None  # OperationId of its Scaling operation in progress

    @property
    def instance_type(self) -> str:
        t = self.spec.get("InstanceType")
        if isinstance(t, str):
            return t
        types = (self.spec.get("InstanceRequirements") or {}).get("InstanceTypes") or ["ml.c5.xlarge"]
        return str(types[0])

    @property
    def node_type(self) -> str | None:
        slurm = self.spec.get("SlurmConfig")
        return str(slurm.get("NodeType")) if isinstance(slurm, dict) and slurm.get("NodeType") else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": self.spec,
            "target": self.target,
            "min_count": self.min_count,
            "status": self.status,
            "created_op": self.created_op,
            "stable_target": self.stable_target,
            "stable_min": self.stable_min,
            "wave": self.wave,
            "logical_queue": self.logical_queue,
            "retry_pending": self.retry_pending,
            "last_warn": _iso(self.last_warn),
            "last_short": self.last_short,
            "min_token": self.min_token,
            "image_version": self.image_version,
            "image_id": self.image_id,
            "ran_version": self.ran_version,
            "ran_image_id": self.ran_image_id,
            "scaling_op": self.scaling_op,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Group:
        g = cls(
            name=d["name"],
            spec=d["spec"],
            target=d["target"],
            min_count=d.get("min_count"),
            status=d["status"],
            created_op=d.get("created_op", 0),
        )
        g.stable_target = d.get("stable_target", 0)
        g.stable_min = d.get("stable_min")
        g.wave = list(d.get("wave", []))
        g.logical_queue = list(d.get("logical_queue", []))
        g.retry_pending = d.get("retry_pending", False)
        g.last_warn = _dt(d.get("last_warn"))
        g.last_short = d.get("last_short", 0)
        g.min_token = d.get("min_token", 0)
        g.image_version = d.get("image_version")
        g.image_id = d.get("image_id", "")
        g.ran_version = d.get("ran_version")
        g.ran_image_id = d.get("ran_image_id", "")
        g.scaling_op = d.get("scaling_op")
        return g


@dataclass
class Operation:
    """An all-or-nothing create/update/rollback/delete in progress (Default provisioning mode)."""

    kind: str
    number: int
    snapshot: dict[str, dict[str, Any]] = field(default_factory=dict)  # group name -> Group.to_dict()
    failure: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "number": self.number, "snapshot": self.snapshot, "failure": self.failure}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Operation:
        return cls(d["kind"], d["number"], dict(d.get("snapshot") or {}), d.get("failure"))


@dataclass
class Scheduled:
    time: datetime
    kind: str
    args: dict[str, Any]


@dataclass
class ScalingEntry:
    """One instance group in a Scaling operation: its counts before, the counts asked for, its status."""

    group: str
    status: str  # InProgress | Superseded | Done
    original: dict[str, int]  # CurrentCount, TargetCount, MinCount (as they were)
    desired: dict[str, int]  # TargetCount, MinCount

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "status": self.status, "original": self.original, "desired": self.desired}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScalingEntry:
        return cls(d["group"], d["status"], dict(d["original"]), dict(d["desired"]))


@dataclass
class ClusterOperation:
    """What ListClusterOperations shows: a Scaling request, or the deep health checks of a batch of nodes."""

    operation_id: str
    kind: str  # Scaling | DeepHealthCheck
    created: datetime
    scaling: list[ScalingEntry] = field(default_factory=list)
    group: str | None = None  # DeepHealthCheck: the group whose new nodes are checked
    checks: list[str] = field(default_factory=list)  # DeepHealthCheck: the check types
    instances: list[str] = field(default_factory=list)  # DeepHealthCheck: the nodes checked
    parent: str | None = None  # DeepHealthCheck: the Scaling operation that launched the nodes
    done: bool = False  # DeepHealthCheck: every node has finished its checks

    @property
    def status(self) -> str:
        if self.kind != "Scaling":
            return "Done" if self.done else "InProgress"
        states = {e.status for e in self.scaling}
        if "InProgress" in states:
            return "InProgress"
        return "Superseded" if states == {"Superseded"} else "Done"

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation_id": self.operation_id,
            "kind": self.kind,
            "created": _iso(self.created),
            "scaling": [e.to_dict() for e in self.scaling],
            "group": self.group,
            "checks": self.checks,
            "instances": self.instances,
            "parent": self.parent,
            "done": self.done,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClusterOperation:
        created = _dt(d["created"])
        assert created is not None
        return cls(
            d["operation_id"],
            d["kind"],
            created,
            [ScalingEntry.from_dict(e) for e in d.get("scaling", [])],
            d.get("group"),
            list(d.get("checks", [])),
            list(d.get("instances", [])),
            d.get("parent"),
            d.get("done", False),
        )


@dataclass
class ClusterEvent:
    event_id: str
    time: datetime
    resource_type: str  # Cluster | InstanceGroup | Instance
    level: str  # Info | Warn | Error
    description: str
    group: str | None = None
    instance_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # EventDetails.EventMetadata
    operation_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation_id": self.operation_id,
            "event_id": self.event_id,
            "time": _iso(self.time),
            "resource_type": self.resource_type,
            "level": self.level,
            "description": self.description,
            "group": self.group,
            "instance_id": self.instance_id,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClusterEvent:
        t = _dt(d["time"])
        assert t is not None
        return cls(
            d["event_id"],
            t,
            d["resource_type"],
            d["level"],
            d["description"],
            d.get("group"),
            d.get("instance_id"),
            dict(d.get("metadata") or {}),
            d.get("operation_id"),
        )


@dataclass
class Cluster:
    arn: str
    name: str
    cluster_id: str
    account: str
    region: str
    created: datetime
    status: str
    config: dict[str, Any]  # cluster-level request fields (VpcConfig, Orchestrator, NodeRecovery...)
    groups: dict[str, Group] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    failure_message: str | None = None
    pending: dict[int, Scheduled] = field(default_factory=dict)
    op: Operation | None = None
    op_counter: int = 0
    tokens: dict[str, tuple[datetime, dict[str, Any]]] = field(default_factory=dict)
    events: list[ClusterEvent] = field(default_factory=list)  # stored in their own table
    operations: list[ClusterOperation] = field(default_factory=list)  # oldest first

    @property
    def continuous(self) -> bool:
        return self.config.get("NodeProvisioningMode") == "Continuous"

    def group_nodes(self, group: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.group == group]

    def running(self, group: str) -> int:
        """CurrentCount: running nodes, less those an update is about to remove."""
        return sum(1 for n in self.nodes.values() if n.group == group and n.phase == "running" and not n.draining)

    def active(self, group: str) -> int:
        """Nodes that count towards the group's size: launched, staying, not on their way out."""
        return sum(1 for n in self.nodes.values() if n.group == group and n.active and not n.draining)

    def to_dict(self) -> dict[str, Any]:
        return {
            "arn": self.arn,
            "name": self.name,
            "cluster_id": self.cluster_id,
            "account": self.account,
            "region": self.region,
            "created": _iso(self.created),
            "status": self.status,
            "config": self.config,
            "groups": [g.to_dict() for g in self.groups.values()],
            "nodes": [n.to_dict() for n in self.nodes.values()],
            "tags": self.tags,
            "failure_message": self.failure_message,
            "pending": [[seq, _iso(s.time), s.kind, s.args] for seq, s in self.pending.items()],
            "op": self.op.to_dict() if self.op else None,
            "op_counter": self.op_counter,
            "tokens": {k: [_iso(t), resp] for k, (t, resp) in self.tokens.items()},
            "operations": [o.to_dict() for o in self.operations],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cluster:
        created = _dt(d["created"])
        assert created is not None
        c = cls(
            arn=d["arn"],
            name=d["name"],
            cluster_id=d["cluster_id"],
            account=d["account"],
            region=d["region"],
            created=created,
            status=d["status"],
            config=d["config"],
        )
        c.groups = {g["name"]: Group.from_dict(g) for g in d["groups"]}
        c.nodes = {n["instance_id"]: Node.from_dict(n) for n in d["nodes"]}
        c.tags = dict(d.get("tags") or {})
        c.failure_message = d.get("failure_message")
        for seq, t, kind, args in d.get("pending", []):
            when = _dt(t)
            assert when is not None
            c.pending[int(seq)] = Scheduled(when, kind, args)
        c.op = Operation.from_dict(d["op"]) if d.get("op") else None
        c.op_counter = d.get("op_counter", 0)
        for k, (t, resp) in (d.get("tokens") or {}).items():
            when = _dt(t)
            assert when is not None
            c.tokens[k] = (when, resp)
        c.operations = [ClusterOperation.from_dict(o) for o in d.get("operations", [])]
        return c
