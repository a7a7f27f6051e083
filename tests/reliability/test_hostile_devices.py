"""Issue 28 item 7 (and 12, 13): device nodes given as paths are refused before anything opens them.

`prices update --file /dev/null`, a price cache at /dev/null, `-o /dev/null` and `--state /dev/null` used to
replace or chmod the node: as root (CI runs as root) that breaks the machine. These tests therefore never
run a write at a real device unless the refusal is in place: the module imports the checks that refuse
(so on code without them it stops at import, touching nothing), and ``refusal_in_place`` asks the pure
check, which opens nothing, before each test. Each test then asserts the node is the node it was (type,
device number, inode, mode).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hyperpod_scheduler.cost import pricelist
from hyperpod_scheduler.cost.price_file import update_file
from hyperpod_scheduler.cost.prices import Price, PriceTable
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import files
from hyperpod_scheduler.store.errors import NotAStoreFile
from tests.reliability.cli_inproc import cli

NULL, ZERO, FULL = Path("/dev/null"), Path("/dev/zero"), Path("/dev/full")
FETCHED = PriceTable({"ml.c5.xlarge": Price(0.2, "AWS Price List API, us-east-1", "2026-12-01")}, {}, ())


def _identity(path: Path) -> tuple[int, int, int, int]:
    st = os.lstat(path)
    return st.st_mode, st.st_rdev, st.st_ino, st.st_uid


@pytest.fixture(autouse=True)
def refusal_in_place() -> None:
    for device in (NULL, FULL):
        if not device.exists():
            pytest.skip(f"{device} is not on this machine")
        with pytest.raises(UsageError, match="a character device"):
            files.writable_target(device, "check")  # stats, never opens
    assert NotAStoreFile.exit_code == 2  # --state /dev/null is refused by the store before SQLite opens it


@pytest.mark.parametrize(
    "argv",
    [
        ("cluster", "render", "{spec}", "-o", "/dev/null"),
        ("cluster", "render", "{spec}", "--provisioning-parameters", "/dev/null"),
        ("deploy", "template", "hub", "-o", "/dev/null"),
        ("deploy", "template", "hub", "-o", "/dev/full"),
        ("agent", "install-script", "--channel", "s3://b/p", "--cluster", "c1", "-o", "/dev/null"),
        ("report", "--csv", "/dev/null", "--state", "memory:", "--config", "{config}"),
        ("report", "--html", "/dev/full", "--state", "memory:", "--config", "{config}"),
        ("status", "--state", "/dev/null", "--config", "{config}"),
        ("tick", "--dry-run", "--state", "/dev/null", "--config", "{config}"),
    ],
)
def test_a_device_as_an_output_or_state_is_refused_and_left_as_it_was(tmp_path: Path, argv: tuple[str, ...]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: c1\ndefaults: {execution_role: 'arn:aws:iam::123456789012:role/x', instance_type: ml.c5.xlarge,"
        " lifecycle: ami}\ninstance_groups: [{name: w, count: 1, slurm: {node_type: Controller}}]\n"
    )
    config = tmp_path / "c.yaml"
    config.write_text("targets: [{region: us-east-1, schedule: always, clusters: [c1]}]\n")
    before = {d: _identity(d) for d in (NULL, FULL)}
    ran = cli(*(a.format(spec=spec, config=config) for a in argv))
    line = ran.one_error_line()
    assert ran.code == 2 and "a character device, not a regular file" in line, line
    assert {d: _identity(d) for d in (NULL, FULL)} == before


def test_prices_update_refuses_a_device_and_leaves_it() -> None:
    before = _identity(NULL)
    with pytest.raises(UsageError, match="--file: '/dev/null' is a character device"):
        update_file(NULL, FETCHED)
    assert _identity(NULL) == before


def test_a_price_cache_at_a_device_is_refused_and_left() -> None:
    before = _identity(NULL)
    with pytest.raises(UsageError, match="price cache: '/dev/null' is a character device"):
        pricelist.write_cache(NULL, "us-east-1", FETCHED, datetime(2026, 12, 1, tzinfo=UTC))
    assert _identity(NULL) == before


@pytest.mark.parametrize(
    "argv",
    [
        ("config", "push", "/dev/zero", "--location", "s3://bucket/fleet.yaml"),
        ("status", "--config", "/dev/zero", "--state", "memory:"),
        ("cluster", "render", "/dev/zero"),
        ("schedule", "check", "always", "--config", "/dev/zero"),
    ],
)
def test_dev_zero_as_an_input_is_refused_unread(argv: tuple[str, ...]) -> None:
    line = cli(*argv).one_error_line()
    assert "/dev/zero" in line and "is a character device, not a regular file; refused unread" in line, line
