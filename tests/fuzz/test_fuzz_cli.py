"""Fuzzed command lines: every command that ends by itself, with each of its options given a good, odd or
hostile value (numbers that are NaN or 1e999, instants in year 1, names with slashes and escape codes,
paths to folders, /dev/zero and missing files, NUL and newline characters, unknown options). The CLI runs
in-process against the emulator; each run ends within the hang limit with exit 0, 1 or 2, and a failure
says so in ``error:`` lines, never an internal error. Nothing is written outside the run's folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.engine.conftest import three_tier_request
from tests.fuzz.budget import bounded, examples
from tests.fuzz.test_fuzz_files import KINDS
from tests.reliability.cli_inproc import DOCUMENTED_EXIT_CODES, cli

GOOD_CONFIG = """\
defaults: {poll_seconds: 0.05, settle_timeout_minutes: 1}
schedules: {office: "Mon-Fri 08:00-18:00 UTC"}
targets: [{region: us-east-1, schedule: office, clusters: [c1, {name: c2, schedule: always}]}]
"""
GOOD_SPEC = """\
name: c9
defaults: {execution_role: "arn:aws:iam::123456789012:role/x", instance_type: ml.c5.xlarge, lifecycle: ami}
instance_groups:
  - {name: controller, count: 1, slurm: {node_type: Controller}}
  - {name: workers, count: 2, slurm: {node_type: Compute, partition: w}}
"""

NAMES = ["c1", "c2", "nope", "", "a" * 64, "a/b", "gr\u00fcn", "-x", "x\ny", "\x1b[2Jc1", "c1 c2", "\udcff", "--"]
INSTANTS = ["2026-12-01T08:00Z", "2026-12-01T08:00+01:00", "0001-01-01T00:00Z", "9999-12-31T23:59-05:00",
            "yesterday", "", "2026-13-01T00:00Z", "1e9", "2026-12-01"]  # fmt: skip
NUMBERS = ["-1", "0", "1", "3", "0.05", "nan", "inf", "-inf", "1e308", "1e999", "abc", "", "9" * 400, "0x10"]
TEXT = ["", "x", "a b", "\x00", "line\nbreak", "[/]", "{{x}}", "\u202e", "\udcff", "x" * 2000]
REGIONS = ["us-east-1", "", "mars-1", "a b", "us-east-1\x00", "../x"]


def _paths(run: Path) -> list[str]:
    return [
        str(run / "good.yaml"), str(run / "spec.yaml"), str(run / "missing.yaml"), str(run), "/dev/zero",
        str(run / "junk.bin"), "", "x\x00y", str(run / "out" / "deep" / "file.json"),
    ]  # fmt: skip


def _states(run: Path) -> list[str]:
    return ["memory:", str(run / "s.db"), f"sqlite:///{run}/t.db", "sqlite:", "ftp://x", "x\x00y", str(run)]


# command -> (positional choices, {option: kind})
COMMANDS: dict[tuple[str, ...], tuple[list[str] | None, dict[str, str]]] = {
    ("stop",): (NAMES, {"--region": "region", "--wait": "flag", "--dry-run": "flag", "--config": "path",
                        "--state": "state", "--json": "flag", "--include-protected": "flag"}),
    ("start",): (NAMES, {"--region": "region", "--wait": "flag", "--dry-run": "flag", "--config": "path",
                         "--state": "state", "--json": "flag"}),
    ("tick",): (None, {"--at": "instant", "--dry-run": "flag", "--config": "path", "--state": "state",
                       "--json": "flag"}),
    ("run",): (None, {"--interval": "number", "--ticks": "number", "--dry-run": "flag", "--config": "path",
                      "--state": "state"}),
    ("status",): (None, {"--config": "path", "--state": "state", "--json": "flag"}),
    ("plan",): (None, {"--until": "instant", "--no-describe": "flag", "--config": "path", "--state": "state",
                       "--json": "flag"}),
    ("history",): (NAMES, {"--region": "region", "--limit": "number", "--config": "path", "--state": "state",
                           "--json": "flag"}),
    ("hold",): (NAMES, {"--until": "instant", "--state-wanted": "text", "--reason": "text", "--dry-run": "flag",
                        "--config": "path", "--state": "state"}),
    ("release",): (NAMES, {"--dry-run": "flag", "--config": "path", "--state": "state"}),
    ("report",): (None, {"--since": "instant", "--until": "instant", "--json": "flag", "--csv": "path",
                         "--html": "path", "--prices": "path", "--no-fsx": "flag", "--config": "path",
                         "--state": "state"}),
    ("cluster", "validate"): (["PATH"], {"--json": "flag", "--strict": "flag"}),
    ("cluster", "render"): (["PATH"], {"--output": "path", "--provisioning-parameters": "path"}),
    ("cluster", "create"): (["PATH"], {"--region": "region", "--dry-run": "flag", "--json": "flag"}),
    ("cluster", "describe"): (NAMES, {"--region": "region", "--json": "flag", "--as-spec": "flag"}),
    ("cluster", "example"): (["slurm", "eks", "", "x\x00"], {}),
    ("schedule", "check"): ([*TEXT, "Mon-Fri 08:00-18:00 UTC", "office"], {"--at": "instant", "--config": "path",
                                                                            "--json": "flag"}),
    ("schedule", "next"): ([*TEXT, "always", "office"], {"--from": "instant", "--count": "number",
                                                          "--config": "path", "--json": "flag"}),
    ("deploy", "template"): (["worker", "hub", "nope", ""], {"--output": "path", "--param": "text"}),
}  # fmt: skip


@pytest.fixture(scope="module")
def emu() -> Any:
    with running_emulator(speed=3000, seed=23) as e:
        e.backend.dispatch("CreateCluster", three_tier_request("c1"))
        yield e


def _env(emu: Emulator, home: Path) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # any service but SageMaker: nowhere
        "AWS_ENDPOINT_URL_SAGEMAKER": emu.endpoint,
        "AWS_ACCESS_KEY_ID": "t",
        "AWS_SECRET_ACCESS_KEY": "t",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(home / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "HYPERPOD_SCHEDULER_AWS_DEADLINE": "10",
    }


@st.composite
def command_lines(draw: st.DrawFn, run: Path) -> list[str]:
    command = draw(st.sampled_from(sorted(COMMANDS)))
    positional, options = COMMANDS[command]
    argv = list(command)
    if positional is not None:
        value = draw(st.sampled_from(positional))
        argv.append(draw(st.sampled_from(_paths(run))) if value == "PATH" else value)
    values = {
        "path": _paths(run),
        "state": _states(run),
        "instant": INSTANTS,
        "number": NUMBERS,
        "text": TEXT,
        "region": REGIONS,
    }
    for option in draw(st.lists(st.sampled_from(sorted(options)), unique=True, max_size=4)) if options else []:
        kind = options[option]
        if kind == "flag":
            argv.append(option)
        else:
            argv.extend([option, draw(st.sampled_from(values[kind]))])
    if draw(st.integers(0, 9)) == 0:
        argv.append(draw(st.sampled_from(["--bogus", "extra", "--json=1", "--aws-deadline", "--aws-deadline=nan"])))
    if command == ("run",):
        argv.extend(["--ticks", "1"])  # the loop is for services; one tick is the command under test
    return argv


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = Path(tmp_path_factory.mktemp("fuzzcli"))
    (run / "good.yaml").write_text(GOOD_CONFIG)
    (run / "spec.yaml").write_text(GOOD_SPEC)
    (run / "junk.bin").write_bytes(os.urandom(4096))
    (run / "home").mkdir()
    return run


def test_fuzzed_command_lines_end_with_a_documented_code_and_error_lines(
    emu: Emulator, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(run_dir)
    env = _env(emu, run_dir / "home")
    before = set(run_dir.iterdir())

    @examples(45)
    @given(command_lines(run_dir))
    def check(argv: list[str]) -> None:
        ran = bounded(lambda: cli(*argv, env=env), repr(argv))
        assert ran.code in DOCUMENTED_EXIT_CODES, f"{argv!r}: exit {ran.code}: {ran.err!r}"
        assert "internal error" not in ran.err and "Traceback" not in ran.err, f"{argv!r}: {ran.err!r}"
        if ran.code:
            lines = ran.error_lines
            said = lines or [line for line in ran.out.splitlines() if any(f" {k} " in line for k in KINDS)]
            if "--json" in argv and not lines:  # the results, with their kinds, are the JSON on stdout
                said = [k for k in KINDS if f'"kind": "{k}"' in ran.out]
            assert said, f"{argv!r}: exit {ran.code} and nothing said"
            assert all(line.startswith(("error: ", "warning: ")) for line in lines), f"{argv!r}: {ran.err!r}"
        assert "\x1b" not in ran.out + ran.err, f"{argv!r}: a raw escape reached the terminal"

    check()
    created = set(run_dir.iterdir()) - before
    outputs = ("s.db", "t.db", "out", "missing.yaml", "s.db-wal", "s.db-shm", "t.db-wal", "t.db-shm")
    assert created <= {run_dir / n for n in outputs}  # only what an option named
