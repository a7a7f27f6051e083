"""Issue 28's file and argument cases (items 7, 10, 12, 13, 15), one regression test each, run in process.

Every input path is read only when it is a regular file (a FIFO used to block for ever); every output path
is replaced atomically, and only when it is a regular file or missing (a folder, a FIFO, a symbolic link,
a loop: one line, exit 2, nothing written); every YAML reader refuses tags; a non-UTF-8 file or object is
one line. Device nodes (/dev/null, /dev/zero) are in test_hostile_devices.py, the closed and full stdout
in test_hostile_stdout.py.

A case that blocked on today's code must not hang the suite: ``unblocked`` opens the FIFO's other end
when the work has not finished in ``GUARD_S``, so the blocked call returns and the test fails.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from hyperpod_scheduler.cli.config_watch import ConfigWatch
from hyperpod_scheduler.cluster.create import create_cluster
from hyperpod_scheduler.cluster.load import load_report
from hyperpod_scheduler.config.load import load_config
from hyperpod_scheduler.cost.price_file import update_file
from hyperpod_scheduler.cost.prices import Price, PriceTable
from hyperpod_scheduler.deploy import config_store
from hyperpod_scheduler.errors import HyperpodSchedulerError, UsageError
from tests.reliability.cli_inproc import Ran, cli

T = TypeVar("T")
GUARD_S = 30.0  # far beyond a refusal (which opens nothing); only a blocked open reaches it
GOOD_CONFIG = (
    "schedules: {office: 'Mon-Fri 08:00-18:00 UTC'}\ntargets: [{region: us-east-1, schedule: office, clusters: [c1]}]\n"
)
GOOD_SPEC = """\
name: c1
defaults: {execution_role: "arn:aws:iam::123456789012:role/x", instance_type: ml.c5.xlarge, lifecycle: ami}
instance_groups:
  - {name: controller, count: 1, slurm: {node_type: Controller}}
  - {name: workers, count: 2, slurm: {node_type: Compute, partition: w}}
"""
FETCHED = PriceTable({"ml.c5.xlarge": Price(0.2, "AWS Price List API, us-east-1", "2026-12-01")}, {}, ())


def unblocked(fifo: Path, work: Callable[[], T]) -> T:
    """``work()``, failing the test (instead of hanging it) if it blocks on ``fifo``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD_S)
    if thread.is_alive():
        for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):  # whichever end it waits for
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, flags))
        thread.join(GUARD_S)
        raise AssertionError(f"blocked on the FIFO {fifo}")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    return path


def _is_fifo(path: Path) -> bool:
    return stat.S_ISFIFO(os.lstat(path).st_mode)


def _spec(tmp_path: Path) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(GOOD_SPEC)
    return str(path)


# ---- 13: a FIFO as any input or output path is refused at once ------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ("status", "--config", "{fifo}", "--state", "memory:"),
        ("tick", "--dry-run", "--config", "{fifo}", "--state", "memory:"),
        ("cluster", "validate", "{fifo}"),
        ("cluster", "render", "{fifo}"),
        ("schedule", "check", "office", "--config", "{fifo}"),
        ("report", "--prices", "{fifo}", "--state", "memory:", "--config", "{config}"),
        ("agent", "audit", "--partition", "p", "--settings", "{fifo}"),
        ("status", "--config", "{config}", "--state", "{fifo}"),
        ("cluster", "render", "{spec}", "-o", "{fifo}"),
        ("cluster", "render", "{spec}", "--provisioning-parameters", "{fifo}"),
        ("deploy", "template", "hub", "-o", "{fifo}"),
        ("agent", "install-script", "--channel", "s3://b/p", "--cluster", "c1", "-o", "{fifo}"),
        ("report", "--csv", "{fifo}", "--state", "memory:", "--config", "{config}"),
        ("report", "--html", "{fifo}", "--state", "memory:", "--config", "{config}"),
    ],
)
def test_a_fifo_as_an_input_or_output_is_refused_at_once(tmp_path: Path, fifo: Path, argv: tuple[str, ...]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(GOOD_CONFIG)
    args = [a.format(fifo=fifo, config=config, spec=_spec(tmp_path)) for a in argv]
    ran = unblocked(fifo, lambda: cli(*args))
    line = ran.one_error_line()
    assert ran.code == 2 and "FIFO" in line and str(fifo) in line, line
    assert _is_fifo(fifo)  # still the FIFO it was: nothing replaced it


def test_prices_update_refuses_a_fifo_before_reading_it(fifo: Path) -> None:
    with pytest.raises(UsageError, match=r"FIFO \(named pipe\), not a regular file"):
        unblocked(fifo, lambda: update_file(fifo, FETCHED))
    assert _is_fifo(fifo)


def test_run_keeps_its_config_when_the_file_becomes_a_fifo(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(GOOD_CONFIG)
    watch = ConfigWatch(path, pause=lambda _: None)
    path.unlink()
    os.mkfifo(path)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert unblocked(path, lambda: watch.changed(load_config_text(GOOD_CONFIG, tmp_path))) is None
    assert "keeping the last good config" in err.getvalue()


def load_config_text(text: str, tmp_path: Path) -> Any:
    good = tmp_path / "good-copy.yaml"
    good.write_text(text)
    return load_config(good)


# ---- 15 (and 7): outputs that are not a regular file we may replace --------------------------------


@pytest.mark.parametrize("kind", ["folder", "missing folder", "symlink loop", "loop in the folder", "link out"])
@pytest.mark.parametrize("command", ["render", "template", "install-script"])
def test_an_output_that_is_not_a_file_we_may_replace_is_one_line_and_exit_2(
    tmp_path: Path, kind: str, command: str
) -> None:
    elsewhere = tmp_path / "someone-elses.txt"
    elsewhere.write_text("theirs\n")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    target = {
        "folder": tmp_path / "folder",
        "missing folder": tmp_path / "no" / "such" / "out.json",
        "symlink loop": tmp_path / "loop1",
        "loop in the folder": tmp_path / "loop1" / "out.json",
        "link out": tmp_path / "link",
    }[kind]
    if command == "template" and kind == "missing folder":
        pytest.skip("deploy template -o makes the folders it needs (documented)")
    argv = {
        "render": ["cluster", "render", _spec(tmp_path), "-o", str(target)],
        "template": ["deploy", "template", "hub", "-o", str(target)],
        "install-script": ["agent", "install-script", "--channel", "s3://b/p", "--cluster", "c1", "-o", str(target)],
    }[command]
    line = cli(*argv).one_error_line()
    assert line.startswith("error: --output: ") and str(target) in line, line
    assert elsewhere.read_text() == "theirs\n" and stat.S_IMODE(elsewhere.stat().st_mode) != 0o755
    assert (tmp_path / "link").is_symlink() and (tmp_path / "folder").is_dir()


def test_an_existing_output_is_replaced_whole_and_keeps_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "request.json"
    out.write_text("old")
    os.chmod(out, 0o640)
    before = out.stat().st_ino
    ran = cli("cluster", "render", _spec(tmp_path), "-o", str(out))
    assert ran.code == 0, ran.err
    assert '"ClusterName": "c1"' in out.read_text()
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and out.stat().st_ino != before  # a new file, renamed over
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_install_script_makes_a_new_file_executable_without_chmod_of_a_node(tmp_path: Path) -> None:
    out = tmp_path / "on_init.sh"
    ran = cli("agent", "install-script", "--channel", "s3://b/p", "--cluster", "c1", "-o", str(out))
    assert ran.code == 0, ran.err
    assert stat.S_IMODE(out.stat().st_mode) == 0o755 and out.read_text().startswith("#!")


# ---- 7: --state that names someone's file: refused, and left exactly as it was -----------------------


def test_state_naming_a_users_notes_leaves_their_mode_and_content(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    os.chmod(notes, 0o644)
    ran = cli("status", "--state", str(notes))
    assert ran.code in (1, 2) and "notes.txt" in ran.one_error_line()
    assert stat.S_IMODE(notes.stat().st_mode) == 0o644 and notes.read_text() == "my notes\n"


# ---- 10: YAML tags in every YAML the tool reads -------------------------------------------------------

TAGGED = ["x: !!timestamp x\n", "x: !!bool maybe\n", "x: !!python/name:os.system ''\n", "x: !anything 1\n"]


@pytest.mark.parametrize("text", TAGGED)
@pytest.mark.parametrize(
    "argv",
    [
        ("status", "--config", "{file}", "--state", "memory:"),
        ("tick", "--dry-run", "--config", "{file}", "--state", "memory:"),
        ("cluster", "validate", "{file}"),
        ("cluster", "render", "{file}"),
        ("schedule", "check", "always", "--config", "{file}"),
        ("report", "--prices", "{file}", "--state", "memory:", "--config", "{config}"),
        ("agent", "audit", "--partition", "p", "--settings", "{file}"),
        ("config", "push", "{file}", "--location", "s3://bucket/fleet.yaml"),
        ("emulator", "serve", "--capacity", "{file}"),
    ],
)
def test_a_yaml_tag_is_one_line_and_exit_2_in_every_reader(tmp_path: Path, text: str, argv: tuple[str, ...]) -> None:
    file = tmp_path / "tagged.yaml"
    file.write_text(text)
    config = tmp_path / "c.yaml"
    config.write_text(GOOD_CONFIG)
    ran = cli(*(a.format(file=file, config=config) for a in argv))
    line = ran.one_error_line() if argv[:2] != ("cluster", "validate") else _validate_line(ran)
    assert ran.code == 2 and "the YAML tag" in line and "is not accepted" in line, line


def _validate_line(ran: Ran) -> str:
    assert ran.code == 2 and "internal error" not in ran.err, ran.err
    return ran.error_lines[0]


def test_prices_update_refuses_a_tagged_price_file_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text("instance_hourly: !!timestamp x\n")
    with pytest.raises(UsageError, match="the YAML tag '!!timestamp' is not accepted"):
        update_file(path, FETCHED)
    assert path.read_text() == "instance_hourly: !!timestamp x\n"


@pytest.mark.parametrize("edit", ["defaults: !!bool maybe\n", "when: !!timestamp x\n", "targets: !!set {a}\n"])
def test_run_keeps_the_last_good_config_on_a_tagged_edit(tmp_path: Path, edit: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(GOOD_CONFIG)
    current = load_config(path)
    watch = ConfigWatch(path, pause=lambda _: None)
    path.write_text(GOOD_CONFIG + edit)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert watch.changed(current) is None  # no exception: the loop goes on with `current`
    assert "the YAML tag" in err.getvalue() and "keeping the last good config" in err.getvalue()
    assert err.getvalue().count("\n") == 1


# ---- 12: non-UTF-8 and unbounded reads ----------------------------------------------------------------


def test_prices_update_names_the_bad_byte_of_a_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_bytes(b"instance_hourly: {}\nnote: caf\xe9\n")
    with pytest.raises(UsageError, match=r"prices.yaml.*line 2, column 10: not UTF-8 text \(byte 0xe9\)"):
        update_file(path, FETCHED)
    assert path.read_bytes() == b"instance_hourly: {}\nnote: caf\xe9\n"


def test_prices_update_refuses_a_file_over_the_bound_unread(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    with path.open("wb") as handle:
        handle.truncate(5 * 1024 * 1024)  # sparse: 5 MiB of NULs
    with pytest.raises(UsageError, match="larger than 4 MiB"):
        update_file(path, FETCHED)


def test_config_push_of_a_non_utf8_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(b"targets: []\n# \xff\n")
    line = cli("config", "push", str(path), "--location", "s3://bucket/fleet.yaml").one_error_line()
    assert "line 2, column 3: not UTF-8 text (byte 0xff)" in line


def test_config_push_of_a_file_over_the_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    with path.open("wb") as handle:
        handle.truncate(5 * 1024 * 1024)
    line = cli("config", "push", str(path), "--location", "s3://bucket/fleet.yaml").one_error_line()
    assert "larger than 4 MiB" in line


class _S3Object:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def get_object(self, **_: Any) -> dict[str, Any]:
        return {"Body": io.BytesIO(self.body)}


def test_config_pull_of_a_non_utf8_object_is_one_line_naming_it() -> None:
    where = config_store.parse_location("s3://bucket/fleet.yaml")
    with pytest.raises(UsageError, match=r"fleet config s3://bucket/fleet.yaml: line 1, column 10: not UTF-8"):
        config_store.read_text(where, lambda *_: _S3Object(b"targets: \xff\n"))


def test_config_pull_refuses_an_object_over_the_bound() -> None:
    where = config_store.parse_location("s3://bucket/fleet.yaml")
    with pytest.raises(UsageError, match="larger than 4 MiB"):
        config_store.read_text(where, lambda *_: _S3Object(b"#" * (5 * 1024 * 1024)))


# ---- 15: arguments, endpoints and answers -------------------------------------------------------------


def test_a_non_utf8_cluster_argument_is_one_line_naming_the_option() -> None:
    line = cli("agent", "run", "--cluster", os.fsdecode(b"\xff"), "--channel", "memory:", "--once").one_error_line()
    assert line == "error: --cluster: b'\\xff' is not UTF-8 text"


@pytest.mark.parametrize("argv", [("stop", "\udcff", "--dry-run"), ("status", "--config=\udcfe")])
def test_any_non_utf8_argument_is_refused_before_the_command(argv: tuple[str, ...]) -> None:
    assert "is not UTF-8 text" in cli(*argv).one_error_line()


_AWS = {"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.mark.parametrize(
    "value",
    [
        "admin:S3CRETPW@sagemaker.example:8443",
        "http://admin:S3CRETPW@127.0.0.1:9",
        "ftp://127.0.0.1:9/?token=S3CRETPW",
        "http://127.0.0.1:99999/?token=S3CRETPW",
        "http://[::1/?token=S3CRETPW",
        "http://exa mple.com/?token=S3CRETPW",
    ],
)
@pytest.mark.parametrize("name", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER"])
def test_an_invalid_endpoint_is_one_line_and_never_shows_its_secret(name: str, value: str) -> None:
    ran = cli("cluster", "describe", "c1", env={**_AWS, name: value})
    line = ran.one_error_line()
    assert ran.code == 2 and f"${name}:" in line, line
    assert "S3CRETPW" not in ran.err + ran.out


def test_an_unreachable_endpoints_query_token_is_not_shown() -> None:
    env = {**_AWS, "AWS_ENDPOINT_URL": "http://127.0.0.1:9/?token=S3CRETPW", "HYPERPOD_SCHEDULER_AWS_DEADLINE": "2"}
    ran = cli("cluster", "describe", "c1", env=env)
    line = ran.one_error_line()
    assert ran.code == 1 and "127.0.0.1:9" in line, line
    assert "S3CRETPW" not in ran.err + ran.out


class _NoArn:
    def create_cluster(self, **_: Any) -> dict[str, Any]:
        return {"ResponseMetadata": {"HTTPStatusCode": 200}}


def test_a_create_cluster_answer_without_cluster_arn_is_one_documented_error(tmp_path: Path) -> None:
    report = load_report(Path(_spec(tmp_path)))
    with pytest.raises(HyperpodSchedulerError, match="CreateCluster answer: no ClusterArn") as caught:
        create_cluster(report, _NoArn())  # type: ignore[arg-type]
    assert caught.value.exit_code == 1  # a malformed answer (docs/reliability.md), never 70


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_a_document_on_stdout_masks_an_endpoints_query_as_an_error_line_does(fmt: str) -> None:
    from hyperpod_scheduler.cli.output import print_json, print_yaml

    said = 'AWS Price List API unreachable (Could not connect to the endpoint URL: "http://h:9/?token=S3CRETPW")'
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        (print_json if fmt == "json" else print_yaml)({"notes": [said], "u": "https://admin:S3CRETPW@h/x"})
    assert "S3CRETPW" not in out.getvalue() and "http://h:9/?***" in out.getvalue()
