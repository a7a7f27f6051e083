"""DescribeCluster answer → request, derived from the botocore model rather than from a list of names.

A request member's *twin* in the answer is the member of the same name, or else ``Desired<Name>``
(``ImageId`` ↔ ``DesiredImageId``, ``AutoPatchConfig.PatchSchedule`` ↔ ``DesiredPatchSchedule``,
``KubernetesConfig.Labels`` ↔ ``DesiredLabels``): the desired value is what the group is configured to
be, so re-sending it changes nothing. The rule is applied at every depth, so a structure whose answer
shape differs from its request shape (``ClusterAutoPatchConfigDetails`` against
``ClusterAutoPatchConfig``) is rebuilt member by member, and whatever the answer reports beyond the
request shape (status, current values) never leaks into a request.

A request member without a twin cannot be re-sent, because no answer says what it is; ``untwinned``
lists them, and a test generated from the model fails the day botocore adds one.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

from botocore.model import ListShape, MapShape, Shape, StructureShape

from hyperpod_scheduler.aws.model import service_model

DESIRED = "Desired"


@functools.cache
def shape(name: str) -> Shape:
    # Kept: botocore builds a new Shape per shape_for, and each resolves its members afresh (a tenth of
    # a millisecond per group per update). The model itself is one per process (aws.model).
    return service_model().shape_for(name)


def twin(member: str, answer_shape: StructureShape) -> str | None:
    """The answer member that reports the request member ``member``, or None."""
    if member in answer_shape.members:
        return member
    desired = DESIRED + member
    return desired if desired in answer_shape.members else None


@functools.lru_cache(maxsize=512)  # bounded: a caller holding shapes of its own cannot grow it without end
def twins(request_shape: StructureShape, answer_shape: StructureShape) -> tuple[tuple[str, Shape, str, Shape], ...]:
    """Each request member that has a twin, in the request shape's order, as (member, its shape, its
    twin, the twin's shape). Worked out once per pair of shapes (the model's shapes live as long as the
    process), not again for every member of every group of every update."""
    found = []
    for name, member in request_shape.members.items():
        source = twin(name, answer_shape)
        if source is not None:
            found.append((name, member, source, answer_shape.members[source]))
    return tuple(found)


# What deepcopy gives back as it is: no copy to make, and no call into copy for each leaf.
_IMMUTABLE = frozenset({str, int, bool, float, type(None)})


def rebuild(request_shape: Shape, answer_shape: Shape, value: Any) -> Any:
    """``value`` (as the answer shape has it) in the request shape. A value of the wrong kind is passed
    through unchanged, so request validation names it instead of it vanishing silently."""
    if type(value) in _IMMUTABLE:
        return value
    if isinstance(request_shape, StructureShape) and isinstance(answer_shape, StructureShape):
        if not isinstance(value, Mapping):
            return copy.deepcopy(value)
        out: dict[str, Any] = {}
        for name, member, source, source_shape in twins(request_shape, answer_shape):
            if value.get(source) is None:
                continue
            out[name] = rebuild(member, source_shape, value[source])
        return out
    if isinstance(request_shape, ListShape) and isinstance(answer_shape, ListShape) and isinstance(value, list):
        return [rebuild(request_shape.member, answer_shape.member, v) for v in value]
    if isinstance(request_shape, MapShape) and isinstance(answer_shape, MapShape) and isinstance(value, Mapping):
        return {k: rebuild(request_shape.value, answer_shape.value, v) for k, v in value.items()}
    return copy.deepcopy(value)


def untwinned(request_shape: Shape, answer_shape: Shape, path: str = "") -> list[str]:
    """Request members, at any depth, that no member of the answer shape reports."""
    found: list[str] = []
    if isinstance(request_shape, StructureShape) and isinstance(answer_shape, StructureShape):
        for name, member in request_shape.members.items():
            where = f"{path}.{name}" if path else name
            source = twin(name, answer_shape)
            if source is None:
                found.append(where)
            else:
                found.extend(untwinned(member, answer_shape.members[source], where))
    elif isinstance(request_shape, ListShape) and isinstance(answer_shape, ListShape):
        found.extend(untwinned(request_shape.member, answer_shape.member, f"{path}[]"))
    elif isinstance(request_shape, MapShape) and isinstance(answer_shape, MapShape):
        found.extend(untwinned(request_shape.value, answer_shape.value, f"{path}{{}}"))
    return found
