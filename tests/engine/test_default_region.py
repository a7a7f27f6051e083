"""A cluster named without a region is looked for where the AWS chain points, as the AWS CLI does."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperpod_scheduler.aws.clients import default_region
from hyperpod_scheduler.engine.fleet import ref_for
from hyperpod_scheduler.errors import UsageError

AWS_CONFIG = """[default]
region = ap-southeast-2

[profile tokyo]
region = ap-northeast-1

[profile bare]
output = json
"""


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    config = tmp_path / "aws-config"
    config.write_text(AWS_CONFIG)
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    return monkeypatch


def test_the_config_files_region_and_the_profiles_own(aws_env: pytest.MonkeyPatch) -> None:
    assert default_region() == "ap-southeast-2"
    assert default_region("tokyo") == "ap-northeast-1"
    assert ref_for("c1", None, "tokyo").key == "default/ap-northeast-1/c1"
    assert ref_for("c1", "eu-west-1", "tokyo").region == "eu-west-1"  # an explicit region wins


def test_the_environment_beats_the_config_file(aws_env: pytest.MonkeyPatch) -> None:
    aws_env.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    assert default_region() == "eu-central-1"
    aws_env.setenv("AWS_PROFILE", "tokyo")
    aws_env.delenv("AWS_DEFAULT_REGION")
    assert default_region() == "ap-northeast-1"


def test_no_region_anywhere_falls_back_to_us_east_1(aws_env: pytest.MonkeyPatch) -> None:
    assert default_region("bare") == "us-east-1"


def test_an_unknown_profile_is_a_one_line_error(aws_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="profile 'nope': not found"):
        default_region("nope")
