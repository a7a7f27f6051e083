"""Issue 28 item 8: `cluster create --upload-scripts` sends the folder's own scripts and nothing else.

A symbolic link out of the folder (a planted ``creds -> ~/.aws/credentials``) refuses the upload before
anything is sent; ``.git`` (whose ``config`` may hold a token) and dotfiles stay home unless asked
(``--upload-hidden``: dotfiles, never version control); a FIFO never blocks the walk; what is sent is listed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from hyperpod_scheduler.cluster import upload
from hyperpod_scheduler.cluster.create import create_cluster
from hyperpod_scheduler.cluster.load import load_report
from hyperpod_scheduler.errors import UsageError
from tests.reliability.cli_inproc import cli

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "trn1-legacy-custom.yaml"
BUCKET = "sagemaker-trn1-research-lifecycle"
ARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghij12"


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    folder = tmp_path / "scripts"
    shutil.copytree(ROOT / "examples" / "lifecycle-scripts", folder)
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text('[remote "origin"]\n\turl = https://ghp_TOKEN@github.com/x/y\n')
    (folder / ".env").write_text("AWS_SECRET_ACCESS_KEY=S3CRET\n")
    (folder / "lib").mkdir()
    (folder / "lib" / "helper.sh").write_text("#!/bin/bash\n")
    (folder / "lib" / ".hidden.sh").write_text("#!/bin/bash\n")
    return folder


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "t",
        "AWS_SECRET_ACCESS_KEY": "t",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        yield s3


def _uploaded(s3: Any) -> set[str]:
    listing = s3.list_objects_v2(Bucket=BUCKET)
    return {o["Key"].removeprefix("scripts/") for o in listing.get("Contents", [])}


def _create(s3: Any, folder: Path, **kw: Any) -> None:
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    with Stubber(sagemaker) as stub:
        stub.add_response("create_cluster", {"ClusterArn": ARN})
        create_cluster(load_report(SPEC), sagemaker, s3=s3, scripts=folder, **kw)


def test_version_control_and_dotfiles_stay_home(aws: Any, scripts: Path) -> None:
    _create(aws, scripts)
    sent = _uploaded(aws)
    assert "on_create.sh" in sent and "lib/helper.sh" in sent
    assert not any(k.startswith(".git") or k == ".env" or k.endswith("/.hidden.sh") for k in sent), sent


def test_dotfiles_go_when_asked_but_version_control_never(aws: Any, scripts: Path) -> None:
    _create(aws, scripts, hidden=True)
    sent = _uploaded(aws)
    assert {".env", "lib/.hidden.sh", "on_create.sh"} <= sent
    assert not any(k.startswith(".git/") for k in sent), sent


def test_a_link_out_of_the_folder_refuses_the_upload_before_anything_is_sent(
    aws: Any, scripts: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "credentials"
    secret.write_text("[default]\naws_secret_access_key = S3CRET\n")
    (scripts / "lib" / "creds").symlink_to(secret)
    with pytest.raises(UsageError, match=r"'lib/creds' in .* is a symbolic link out of the folder"):
        _create(aws, scripts)
    assert _uploaded(aws) == set()


def test_a_linked_folder_out_of_the_folder_is_refused(aws: Any, scripts: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "home-aws"
    elsewhere.mkdir()
    (elsewhere / "credentials").write_text("S3CRET\n")
    (scripts / "aws").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UsageError, match=r"'aws' in .* is a symbolic link out of the folder"):
        _create(aws, scripts)
    assert _uploaded(aws) == set()


def test_a_link_inside_the_folder_is_sent_as_the_file_it_names(aws: Any, scripts: Path) -> None:
    (scripts / "lib" / "again.sh").symlink_to(scripts / "lib" / "helper.sh")
    _create(aws, scripts)
    assert {"lib/again.sh", "lib/helper.sh"} <= _uploaded(aws)


def test_a_fifo_in_the_folder_is_refused_not_waited_on(aws: Any, scripts: Path) -> None:
    os.mkfifo(scripts / "pipe")
    with pytest.raises(UsageError, match=r"'pipe' in .* is a FIFO \(named pipe\), not a regular file"):
        _create(aws, scripts)
    assert _uploaded(aws) == set()


def test_the_dry_run_lists_what_would_be_sent_and_what_is_left_out(scripts: Path) -> None:
    ran = cli("cluster", "create", str(SPEC), "--dry-run", "--upload-scripts", str(scripts))
    assert ran.code == 0, ran.err
    listed = ran.err.splitlines()
    assert "  on_create.sh" in listed and "  lib/helper.sh" in listed
    assert any(line.startswith("  left out") and ".git/" in line and ".env" in line for line in listed), ran.err
    assert not any(line.strip() in (".env", ".git/config") for line in listed)


def test_a_folder_far_larger_than_any_script_folder_is_refused_before_anything_is_sent(
    aws: Any, scripts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upload, "MAX_FILES", 3)  # the walk counts as it goes: a home folder stops early too
    with pytest.raises(UsageError, match="holds more than 3 files or 256 MiB"):
        _create(aws, scripts)
    assert _uploaded(aws) == set()
