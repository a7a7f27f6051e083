"""provisioning_parameters.json read into Slurm roles: every bad field is one line naming it."""

from __future__ import annotations

import json

import pytest

from hyperpod_scheduler.cluster.slurm_roles import combine, parse_parameters
from hyperpod_scheduler.inputs.bounded import BadDocument

SRC = "s3://b/lc/provisioning_parameters.json"
GOOD = {
    "version": "1.0.0",
    "workload_manager": "slurm",
    "controller_group": "controller-machine",
    "login_group": "login-group",
    "worker_groups": [{"instance_group_name": "worker-group-1", "partition_name": "ml.p5.48xlarge"}],
}


def test_the_aws_samples_file_gives_each_group_its_role() -> None:
    assert parse_parameters(json.dumps(GOOD).encode(), SRC) == {
        "controller-machine": "Controller",
        "login-group": "Login",
        "worker-group-1": "Compute",
    }


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"controller_group": None}, "controller_group is None, expected an instance group name"),
        ({"login_group": 3}, "login_group is 3"),
        ({"workload_manager": "pbs"}, "workload_manager is 'pbs', expected 'slurm'"),
        ({"worker_groups": "w"}, "worker_groups is 'w'"),
        ({"worker_groups": [{"partition_name": "p"}]}, "worker_groups[0].instance_group_name is None"),
        ({"login_group": "controller-machine"}, "login_group names group 'controller-machine', already the Controller"),
    ],
)
def test_a_bad_field_is_one_line_naming_it(change: dict[str, object], said: str) -> None:
    with pytest.raises(BadDocument) as err:
        parse_parameters(json.dumps({**GOOD, **change}).encode(), SRC)
    assert said in str(err.value) and str(err.value).startswith(SRC) and "\n" not in str(err.value)


def test_a_large_file_is_refused_unread() -> None:
    with pytest.raises(BadDocument, match="larger than"):
        parse_parameters(b" " * 70_000, SRC)


def test_slurm_config_wins_and_a_group_the_file_does_not_name_is_unknown() -> None:
    roles, unknown = combine(
        {"head": "Controller", "w": None, "x": None, "y": None},
        {SRC: {"head": "Compute", "w": "Compute"}, "s3://c/provisioning_parameters.json": "denied"},
        {"w": SRC, "x": SRC, "y": "s3://c/provisioning_parameters.json"},
    )
    assert roles == {"head": "Controller", "w": "Compute"}
    assert unknown == {"x": f"{SRC} does not name group 'x'", "y": "denied"}
