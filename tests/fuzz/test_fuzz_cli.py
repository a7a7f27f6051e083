"""Fuzzed command lines: every command that ends by itself, with each of its options given a good, odd or
hostile value (numbers that are NaN or 1e999, instants in year 1, names with slashes and escape codes,
paths to folders, /dev/zero and missing files, NUL and newline characters, unknown options; since issue
28 also a FIFO, /dev/null and /dev/full, a symbolic link loop and a link out of the folder, files with
YAML tags or non-UTF-8 bytes, a closed or full stdout, and URL-shaped AWS_ENDPOINT_URL values carrying a
password or a query token, which must never be shown). The CLI runs
in-process against the emulator; each run ends within the hang limit with exit 0, 1 or 2, and a failure
says so in ``error:`` lines, never an internal error. Nothing is written outside the run's folder."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.emulator import Emulator, running_emulator
from hyperpod_scheduler.errors import UsageError
from hyperpod_scheduler.inputs import files
from tests.engine.conftest import three_tier_request
from tests.fuzz.budget import bounded, examples
from tests.fuzz.test_fuzz_files import KINDS
from tests.reliability.cli_inproc import DOCUMENTED_EXIT_CODES, Stdout, cli

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
        # issue 28: a FIFO (must never block), device nodes (must never be replaced or chmod-ed), a link loop,
        # a link out of the run's folder (what it points at must stay as it was), YAML tags, non-UTF-8 bytes
        str(run / "pipe"), "/dev/null", "/dev/full", str(run / "loop1"), str(run / "loop1" / "x.json"),
        str(run / "link-out"), str(run / "tagged.yaml"), str(run / "latin1.yaml"),
    ]  # fmt: skip


def _states(run: Path) -> list[str]:
    return ["memory:", str(run / "s.db"), f"sqlite:///{run}/t.db", "sqlite:", "ftp://x", "x\x00y", str(run),
            str(run / "pipe"), "/dev/null", str(run / "notes.txt"), str(run / "loop1")]  # fmt: skip


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
    ("agent", "install-script"): (None, {"--channel": "text", "--cluster": "name", "--output": "path",
                                         "--poll": "number"}),
}  # fmt: skip
# URL-shaped values of the endpoint variables: a password or a query token must never be shown.
SECRET = "S3CRETPW"
ENDPOINTS = [None, f"admin:{SECRET}@sagemaker.example", f"http://u:{SECRET}@127.0.0.1:9",
             f"http://127.0.0.1:9/?token={SECRET}", "ftp://127.0.0.1:9", "http://[::1", "http://x y",
             "http://127.0.0.1:99999", "", "\udcff", "127.0.0.1:9"]  # fmt: skip
STDOUTS: list[Stdout] = ["captured"] * 8 + ["closed", "full"]


@pytest.fixture(scope="module")
def emu() -> Any:
    with running_emulator(speed=3000, seed=23, in_process=True) as e:
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
        "name": NAMES,
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
    if command == ("agent", "install-script"):
        argv.extend(["--channel", "s3://b/p", "--cluster", "c1"])  # required; a drawn value comes first and wins
    return argv


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = Path(tmp_path_factory.mktemp("fuzzcli"))
    (run / "good.yaml").write_text(GOOD_CONFIG)
    (run / "spec.yaml").write_text(GOOD_SPEC)
    (run / "junk.bin").write_bytes(os.urandom(4096))
    (run / "home").mkdir()
    (run / "tagged.yaml").write_text("defaults: !!bool maybe\nwhen: !!timestamp x\nname: !x c9\n")
    (run / "latin1.yaml").write_bytes(b"name: caf\xe9\ntargets: []\n")
    (run / "notes.txt").write_text("my notes\n")
    os.chmod(run / "notes.txt", 0o644)
    os.mkfifo(run / "pipe")
    (run / "loop1").symlink_to(run / "loop2")
    (run / "loop2").symlink_to(run / "loop1")
    (run / "link-out").symlink_to(ELSEWHERE)
    return run


ELSEWHERE = Path(tempfile.gettempdir()) / f"hyperpod-fuzz-elsewhere-{os.getpid()}.txt"


def _identity(path: str) -> tuple[int, int, int, int]:
    st = os.lstat(path)
    return st.st_mode, st.st_rdev, st.st_ino, st.st_size


def test_fuzzed_command_lines_end_with_a_documented_code_and_error_lines(
    emu: Emulator, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Device nodes are drawn as paths, and CI runs as root: only with the refusal in place (a pure check).
    for device in ("/dev/null", "/dev/full"):
        with pytest.raises(UsageError, match="a character device"):
            files.writable_target(device, "check")
    monkeypatch.chdir(run_dir)
    base_env = _env(emu, run_dir / "home")
    before = set(run_dir.iterdir())
    ELSEWHERE.write_text("someone else's\n")
    untouched = {p: _identity(p) for p in ("/dev/null", "/dev/full", str(run_dir / "pipe"), str(run_dir / "notes.txt"))}

    @examples(45)
    @given(command_lines(run_dir), st.sampled_from(ENDPOINTS), st.sampled_from(STDOUTS))
    def check(argv: list[str], endpoint: str | None, stdout: Stdout) -> None:
        env = base_env if endpoint is None else {**base_env, "AWS_ENDPOINT_URL": endpoint}
        ran = bounded(lambda: cli(*argv, env=env, stdout=stdout), repr(argv))
        assert ran.code in DOCUMENTED_EXIT_CODES, f"{argv!r}: exit {ran.code}: {ran.err!r}"
        assert SECRET not in ran.out + ran.err, f"{argv!r} with {endpoint!r}: the endpoint's secret was shown"
        if stdout == "closed":
            assert ran.code == 2 and ran.error_lines[0].startswith("error: stdout is closed"), ran.err
        assert "internal error" not in ran.err and "Traceback" not in ran.err, f"{argv!r}: {ran.err!r}"
        if ran.code:
            lines = ran.error_lines
            said = lines or [line for line in ran.out.splitlines() if any(f" {k} " in line for k in KINDS)]
            if "--json" in argv and not lines:  # the results, with their kinds, are the JSON on stdout
                said = [k for k in KINDS if f'"kind": "{k}"' in ran.out or f'"severity": "{k}"' in ran.out]
            assert said, f"{argv!r}: exit {ran.code} and nothing said"
            assert all(line.startswith(("error: ", "warning: ")) for line in lines), f"{argv!r}: {ran.err!r}"
        assert "\x1b" not in ran.out + ran.err, f"{argv!r}: a raw escape reached the terminal"

    try:
        check()
    finally:
        assert ELSEWHERE.read_text() == "someone else's\n"  # a link out was never written through
        ELSEWHERE.unlink()
    assert {p: _identity(p) for p in untouched} == untouched  # devices, the FIFO, notes.txt: as they were
    assert stat.S_IMODE(os.stat(run_dir / "notes.txt").st_mode) == 0o644
    created = set(run_dir.iterdir()) - before
    outputs = ("s.db", "t.db", "out", "missing.yaml", "s.db-wal", "s.db-shm", "t.db-wal", "t.db-shm")
    assert created <= {run_dir / n for n in outputs}  # only what an option named
