"""Reading a spec file: typed values out, or one clear problem per bad field."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.cluster.check import check_spec
from hyperpod_scheduler.cluster.spec import AMI, Lifecycle, load_spec, parse_yaml, spec_from_dict
from hyperpod_scheduler.errors import SpecError, UsageError
from tests.cluster.cluster_specs import ROLE, example_text, slurm_spec, write_spec


def _problems(data: object) -> list[str]:
    with pytest.raises(SpecError) as info:
        spec_from_dict(data)
    return [str(p) for p in info.value.problems]


@pytest.mark.parametrize("kind", ["slurm", "eks"])
def test_shipped_examples_parse(kind: str) -> None:
    spec = spec_from_dict(parse_yaml(example_text(kind)))
    assert spec.instance_groups


def test_values_are_read_as_written(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path, slurm_spec(tags={"team": "ml"})))
    assert spec.name == "demo"
    assert [g.name for g in spec.instance_groups] == ["controller", "login", "gpu"]
    gpu = spec.group("gpu")
    assert gpu is not None and gpu.count == 2 and gpu.slurm is not None
    assert gpu.slurm.partition_names() == ["gpu"]
    assert spec.defaults.execution_role == ROLE
    assert spec.tags == {"team": "ml"}


def test_lifecycle_is_ami_a_block_or_inherited() -> None:
    data = slurm_spec()
    data["instance_groups"][0]["lifecycle"] = "ami"
    data["instance_groups"][1]["lifecycle"] = {
        "source_s3_uri": "s3://sagemaker-x/",
        "on_init_complete": "a.sh",
    }
    spec = spec_from_dict(data)
    assert spec.instance_groups[0].lifecycle == AMI
    assert spec.instance_groups[1].lifecycle == Lifecycle(source_s3_uri="s3://sagemaker-x/", on_init_complete="a.sh")
    assert spec.instance_groups[2].lifecycle is None  # inherits defaults.lifecycle (none here)


def test_numeric_tag_values_become_text() -> None:
    # YAML reads `cost-centre: 1234` as a number; AWS tag values are strings.
    assert spec_from_dict(slurm_spec(tags={"cost-centre": 1234})).tags == {"cost-centre": "1234"}


def test_misspelt_field_is_named_with_a_suggestion() -> None:
    data = slurm_spec()
    data["instance_groups"][2]["intance_type"] = data["instance_groups"][2].pop("instance_type")
    assert _problems(data) == [
        "error: group 'gpu' instance_groups[2].intance_type: unknown field (did you mean 'instance_type'?)"
    ]


def test_misspelt_top_level_and_nested_fields() -> None:
    data = slurm_spec(node_recovry="Automatic")
    data["instance_groups"][0]["slurm"] = {"nodetype": "Controller"}
    problems = _problems(data)
    assert "error: node_recovry: unknown field (did you mean 'node_recovery'?)" in problems
    assert (
        "error: group 'controller' instance_groups[0].slurm.nodetype: unknown field (did you mean "
        "'node_type'?)" in problems
    )
    assert "error: group 'controller' instance_groups[0].slurm.node_type: required field is missing" in problems


def test_quoted_number_is_not_silently_accepted() -> None:
    data = slurm_spec()
    data["instance_groups"][2]["count"] = "2"
    assert _problems(data) == ["error: group 'gpu' instance_groups[2].count: input should be a valid integer, got '2'"]


def test_boolean_is_not_a_count() -> None:
    data = slurm_spec()
    data["instance_groups"][2]["count"] = True
    assert _problems(data)[0].startswith("error: group 'gpu' instance_groups[2].count:")


def test_bad_lifecycle_word_is_explained_once() -> None:
    data = slurm_spec()
    data["instance_groups"][1]["lifecycle"] = "amii"
    assert _problems(data) == [
        "error: group 'login' instance_groups[1].lifecycle: must be 'ami' or a block with source_s3_uri "
        "and on_create or on_init_complete, got 'amii'"
    ]


def test_a_misspelt_lifecycle_key_is_named_without_the_ami_hint() -> None:
    data = slurm_spec()
    data["instance_groups"][1]["lifecycle"] = {"source_s3_uri": "s3://sagemaker-x/", "on_init": "a.sh"}
    assert _problems(data) == [
        "error: group 'login' instance_groups[1].lifecycle.on_init: unknown field (did you mean 'on_init_complete'?)"
    ]


def test_tag_keys_that_look_like_type_names_are_shown_as_written() -> None:
    assert _problems(slurm_spec(tags={"str": ["a"]})) == ["error: tags.str: input should be a valid string, got ['a']"]


def test_every_bad_field_is_reported_not_just_the_first() -> None:
    data = slurm_spec()
    del data["name"]
    data["instance_groups"][0]["count"] = "one"
    data["instance_groups"].append({"count": 1})
    problems = _problems(data)
    assert "error: name: required field is missing" in problems
    assert "error: instance_groups[3].name: required field is missing" in problems
    assert len(problems) == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "spec: must be a YAML mapping of cluster settings, got empty"),
        ("- a\n- b\n", "spec: must be a YAML mapping of cluster settings, got list"),
        ("name: a\nname: b\n", "yaml: line 2, column 1: duplicate key 'name'"),
        ("name: [a\n", "yaml: line 2, column 1: expected ',' or ']'"),
    ],
)
def test_unreadable_files_say_where(tmp_path: Path, text: str, expected: str) -> None:
    path = write_spec(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value).startswith(f"{path}: {expected}")


def test_duplicate_key_inside_a_group_is_refused(tmp_path: Path) -> None:
    text = "name: a\ninstance_groups:\n  - name: g\n    count: 1\n    count: 2\n"
    with pytest.raises(SpecError, match="line 5, column 5: duplicate key 'count'"):
        load_spec(write_spec(tmp_path, text))


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="spec file not found"):
        load_spec(tmp_path / "nope.yaml")


# --- any input: a spec or a SpecError, never a traceback ---------------------------------------------

_KEYS = st.sampled_from(
    ["name", "count", "instance_groups", "lifecycle", "slurm", "node_type", "partition", "defaults", "tags",
     "api", "vpc", "subnets", "source_s3_uri", "on_create", "orchestrator", "min_count", "ebs_volume_gb", "x"]
)  # fmt: skip
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10_000), st.floats(allow_nan=False), st.text(max_size=8)
)
_yamlish = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=5)),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_yamlish, st.fixed_dictionaries({"name": st.just("c"), "instance_groups": st.lists(_yamlish)})))
def test_any_input_gives_a_spec_or_a_spec_error(data: object) -> None:
    try:
        spec = spec_from_dict(data)
    except SpecError as exc:
        assert exc.problems and all(p.field for p in exc.problems)
        return
    try:
        check_spec(spec)  # rendering and the rules take whatever parsed, too
    except SpecError as exc:
        assert exc.problems
