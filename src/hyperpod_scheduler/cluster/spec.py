"""The cluster spec: a short YAML file a person writes, parsed into typed, immutable values.

The spec is a friendlier face on the CreateCluster request (snake_case keys, tags as a mapping, one
``defaults`` block for what every group shares). It is deliberately faithful: whatever can be written
renders to exactly one request, and the HyperPod rules are judged on that request (``cluster.rules``),
so the spec, ``cluster validate`` and the emulator never disagree about what is allowed.

Anything the typed fields do not cover can be passed through verbatim under ``api:`` (at cluster or
group level), in the API's own PascalCase; the botocore model then checks it like the rest.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, field_validator

from hyperpod_scheduler.errors import Problem, SpecError, UsageError
from hyperpod_scheduler.inputs import bounded
from hyperpod_scheduler.inputs.text import quoted

AMI = "ami"  # the spelling of "no LifeCycleConfig at all" (the AMI-based tier)


class _Strict(BaseModel):
    # forbid: a misspelt key must be an error, not a silently ignored line
    model_config = ConfigDict(extra="forbid", frozen=True)


class Lifecycle(_Strict):
    """A LifeCycleConfig block. Which combinations are valid is judged by ``cluster.rules``."""

    source_s3_uri: StrictStr | None = None
    on_create: StrictStr | None = None
    on_init_complete: StrictStr | None = None


class SlurmGroup(_Strict):
    node_type: StrictStr
    # One name is what HyperPod accepts; a list is still parsed so the rules can say why it is wrong.
    partition: StrictStr | list[StrictStr] | None = None

    def partition_names(self) -> list[str] | None:
        if self.partition is None:
            return None
        return [self.partition] if isinstance(self.partition, str) else list(self.partition)


class Vpc(_Strict):
    security_group_ids: list[StrictStr]
    subnets: list[StrictStr]


class GroupDefaults(_Strict):
    """Settings every group inherits unless it sets its own."""

    execution_role: StrictStr | None = None
    instance_type: StrictStr | None = None
    threads_per_core: StrictInt | None = None
    lifecycle: Literal["ami"] | Lifecycle | None = None
    ebs_volume_gb: StrictInt | None = None
    deep_health_checks: list[StrictStr] | None = None
    training_plan_arn: StrictStr | None = None
    image_id: StrictStr | None = None


class InstanceGroup(_Strict):
    name: StrictStr
    count: StrictInt
    min_count: StrictInt | None = None
    instance_type: StrictStr | None = None
    execution_role: StrictStr | None = None
    threads_per_core: StrictInt | None = None
    # None: inherit ``defaults.lifecycle``; "ami": no LifeCycleConfig; a block: sent as written.
    lifecycle: Literal["ami"] | Lifecycle | None = None
    slurm: SlurmGroup | None = None
    ebs_volume_gb: StrictInt | None = None
    deep_health_checks: list[StrictStr] | None = None
    training_plan_arn: StrictStr | None = None
    image_id: StrictStr | None = None
    override_vpc: Vpc | None = None
    api: dict[str, Any] = Field(default_factory=dict)


class FsxMount(_Strict):
    """The shared FSx for Lustre file system the legacy lifecycle scripts mount (provisioning_parameters.json)."""

    dns_name: StrictStr
    mount_name: StrictStr


class ClusterSpec(_Strict):
    name: StrictStr
    # Slurm topology: `api` sends SlurmConfig per group; `provisioning-parameters` (legacy) sends none and
    # writes the groups' roles into provisioning_parameters.json beside the lifecycle scripts instead.
    topology: Literal["api", "provisioning-parameters"] = "api"
    fsx: FsxMount | None = None
    orchestrator: Literal["slurm", "eks"] = "slurm"
    eks_cluster_arn: StrictStr | None = None
    slurm_config_strategy: StrictStr | None = None
    node_provisioning_mode: StrictStr | None = None
    node_recovery: StrictStr | None = None
    cluster_role: StrictStr | None = None
    vpc: Vpc | None = None
    tags: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    defaults: GroupDefaults = Field(default_factory=GroupDefaults)
    instance_groups: list[InstanceGroup]
    api: dict[str, Any] = Field(default_factory=dict)

    @field_validator("tags", mode="before")
    @classmethod
    def _tag_values_as_text(cls, value: Any) -> Any:
        # YAML reads `cost-centre: 1234` as an int; AWS tag values are strings, so say what was meant.
        if isinstance(value, Mapping):
            return {
                k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v for k, v in value.items()
            }
        return value

    def group(self, name: str) -> InstanceGroup | None:
        return next((g for g in self.instance_groups if g.name == name), None)


# ---------------------------------------------------------------------------------------------------
# Loading: YAML text -> dict -> ClusterSpec, every failure a SpecError naming the field.


def parse_yaml(text: str | bytes, source: str | None = None) -> Any:
    """YAML (or JSON) through the bounded reader: aliases, depth, size, duplicate and non-scalar keys."""
    try:
        return bounded.load_yaml(text, source or "spec")
    except bounded.BadDocument as exc:
        raise SpecError([Problem("yaml", f"{exc.where}{exc.problem}")], source) from None


def _known_fields(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


_MODEL_AT: dict[str, type[BaseModel]] = {
    "": ClusterSpec,
    "defaults": GroupDefaults,
    "vpc": Vpc,
    "instance_groups[]": InstanceGroup,
    "instance_groups[].slurm": SlurmGroup,
    "instance_groups[].lifecycle": Lifecycle,
    "instance_groups[].override_vpc": Vpc,
    "fsx": FsxMount,
    "defaults.lifecycle": Lifecycle,
}


_UNION_FIELDS = ("lifecycle", "partition")
_UNION_MEMBERS = ("Lifecycle", "literal['ami']", "str", "list[str]")


def _field_path(loc: Sequence[int | str]) -> tuple[str, str]:
    """(``instance_groups[1].slurm.node_type``, ``instance_groups[].slurm``) for a pydantic loc."""
    shown, shape = "", ""
    previous: int | str | None = None
    for part in loc:
        if isinstance(part, int):
            shown, shape = f"{shown}[{part}]", f"{shape}[]"
        elif previous in _UNION_FIELDS and part in _UNION_MEMBERS:
            continue  # pydantic names the union member it tried; the user never wrote that
        else:
            shown = f"{shown}.{part}" if shown else part
            shape = f"{shape}.{part}" if shape else part
        previous = part
    return shown, shape


def _group_name(data: Any, loc: Sequence[int | str]) -> str | None:
    if len(loc) >= 2 and loc[0] == "instance_groups" and isinstance(loc[1], int):
        groups = data.get("instance_groups") if isinstance(data, Mapping) else None
        if isinstance(groups, list) and loc[1] < len(groups) and isinstance(groups[loc[1]], Mapping):
            name = groups[loc[1]].get("name")
            return name if isinstance(name, str) else None
    return None


def _problems_from(exc: ValidationError, data: Any) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[str] = set()
    for err in exc.errors():
        loc = err["loc"]
        field, shape = _field_path(loc)
        group = _group_name(data, loc)
        kind = err["type"]
        if kind == "extra_forbidden":
            parent_shape = shape.rsplit(".", 1)[0] if "." in shape else ""
            model = _MODEL_AT.get(parent_shape)
            key = str(loc[-1])
            hint = ""
            if model is not None:
                close = difflib.get_close_matches(key, _known_fields(model), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
            message = f"unknown field{hint}"
        elif kind == "missing":
            message = "required field is missing"
        elif kind == "literal_error" and field.endswith("lifecycle") and isinstance(err["input"], Mapping):
            continue  # a block was meant: the errors inside it say what is wrong
        elif kind == "literal_error" and field.endswith("lifecycle"):
            message = (
                "must be 'ami' or a block with source_s3_uri and on_create or on_init_complete, "
                f"got {quoted(err['input'])}"
            )
        else:
            message = f"{err['msg'].lower()}, got {quoted(err['input'])}"
        # A union reports once per member; one line per field is enough for a person.
        if field in seen:
            continue
        seen.add(field)
        problems.append(Problem(field or "spec", message, group))
    return problems


def spec_from_dict(data: Any, source: str | None = None) -> ClusterSpec:
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else type(data).__name__
        raise SpecError([Problem("spec", f"must be a YAML mapping of cluster settings, got {kind}")], source)
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_problems_from(exc, data), source) from None


def read_spec_file(path: str | Path) -> Any:
    """The parsed YAML (or JSON) of a spec file; a missing file is a UsageError, bad YAML a SpecError."""
    p = Path(path)
    try:
        data = bounded.read_bytes(p, f"spec file {p}")  # refused unread when too large
    except bounded.MissingFile:
        raise UsageError(f"spec file not found: {p}") from None
    return parse_yaml(data, str(p))


def load_spec(path: str | Path) -> ClusterSpec:
    """Read and parse a spec file; a missing file is a UsageError, a bad one a SpecError."""
    return spec_from_dict(read_spec_file(path), str(path))
