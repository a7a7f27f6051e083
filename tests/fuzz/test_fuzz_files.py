"""Fuzzed config files and cluster specs, generated from the pydantic models' own JSON schemas and then
broken (a node replaced by junk or removed, an unknown key, bytes truncated or made invalid UTF-8, YAML
aliases and anchors and YAML tags spliced in), read by the CLI as a user runs it: the command succeeds, or exits 1 or 2
with error lines only, never an internal error, never a hang."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_scheduler.cluster.spec import ClusterSpec
from hyperpod_scheduler.config.model import Config
from hyperpod_scheduler.emulator import Emulator, running_emulator
from tests.fuzz.budget import bounded, examples
from tests.fuzz.strategies import broken, damaged_bytes, from_schema
from tests.reliability.cli_inproc import DOCUMENTED_EXIT_CODES, Ran, cli

REPO = Path(__file__).resolve().parents[2]
# Real documents as the seeds (one mutation away from valid reaches the deep checks), and documents
# generated from the models' schemas (shapes nobody wrote by hand).
CONFIG_SEEDS = [yaml.safe_load((REPO / "examples" / "hyperpod-scheduler.yaml").read_text())]
SPEC_SEEDS = [
    yaml.safe_load(p.read_text())
    for p in [*(REPO / "examples").glob("*.yaml"), *(REPO / "src/hyperpod_scheduler/cluster/examples").glob("*.yaml")]
    if p.name != "hyperpod-scheduler.yaml"
]
CONFIGS = st.one_of(st.sampled_from(CONFIG_SEEDS), from_schema(Config.model_json_schema()))
SPECS = st.one_of(st.sampled_from(SPEC_SEEDS), from_schema(ClusterSpec.model_json_schema()))
KINDS = ("error", "failed", "refused")
ALIASES = [
    "",
    "x: &a [1, 2]\ny: *a\n",
    "x: &a [*a]\n",
    "a: &a [x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n",
    "? [k]\n: v\n",
    "<<: {defaults: 1}\n",
]
# issue 28: an explicit tag made PyYAML build what it says, or crash (exit 70); every one is refused now.
TAGS = ["x: !!timestamp x\n", "y: !!bool maybe\n", "z: !!python/object/apply:os.system [true]\n",
        "w: !custom 1\n", "v: !!set {a}\n", "u: !!binary AAAA\n", "t: !!float 1e999\n", "s: !!int 0x\n"]  # fmt: skip


@pytest.fixture(scope="module")
def emu() -> Any:
    # Any AWS call a fuzzed config leads to lands here (no clusters, so tag discovery finds none).
    with running_emulator(speed=60, seed=19) as e:
        yield e


def _env(emu: Emulator) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # SNS, S3, pricing, FSx: nowhere (the discard port)
        "AWS_ENDPOINT_URL_SAGEMAKER": emu.endpoint,
        "AWS_ACCESS_KEY_ID": "t",
        "AWS_SECRET_ACCESS_KEY": "t",
        "AWS_DEFAULT_REGION": "us-east-1",
        "HYPERPOD_SCHEDULER_AWS_DEADLINE": "10",
    }


def _document(value: Any) -> st.SearchStrategy[bytes]:
    try:
        text = yaml.safe_dump(value, allow_unicode=True)
    except (yaml.YAMLError, ValueError):
        text = repr(value)
    extra = st.one_of(st.just(""), st.just(""), st.just(""), st.sampled_from(ALIASES), st.sampled_from(TAGS))
    return extra.flatmap(lambda tail: damaged_bytes(text.encode("utf-8", "surrogatepass") + b"\n" + tail.encode()))


def _documents(model: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    return st.one_of(model, broken(model), broken(broken(model))).flatmap(_document)


def _check(ran: Ran, command: str) -> None:
    assert ran.code in DOCUMENTED_EXIT_CODES, f"{command}: exit {ran.code}: {ran.err!r}"
    assert "internal error" not in ran.err and "Traceback" not in ran.err, ran.err
    if ran.code:
        lines = ran.error_lines
        # A tick reports a cluster's failure as its event line on stdout ("c1 error ..."), exit 1.
        said = lines or [line for line in ran.out.splitlines() if any(f" {k} " in line for k in KINDS)]
        assert said, f"{command}: exit {ran.code} and nothing said: {ran.out!r}"
        assert all(line.startswith(("error: ", "warning: ")) for line in lines), ran.err


@examples(20)
@given(doc=_documents(CONFIGS), command=st.sampled_from([("tick", "--dry-run"), ("status",), ("plan",)]))
def test_fuzzed_configs_are_read_or_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, emu: Emulator, doc: bytes, command: tuple[str, ...]
) -> None:
    path = Path(tmp_path_factory.mktemp("cfg")) / "c.yaml"
    path.write_bytes(doc)
    ran = bounded(lambda: cli(*command, "--config", str(path), "--state", "memory:", env=_env(emu)), command[0])
    _check(ran, command[0])


@examples(40)
@given(doc=_documents(SPECS), command=st.sampled_from(["validate", "render"]))
def test_fuzzed_specs_are_read_or_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, doc: bytes, command: str
) -> None:
    path = Path(tmp_path_factory.mktemp("spec")) / "spec.yaml"
    path.write_bytes(doc)
    ran = bounded(lambda: cli("cluster", command, str(path)), f"cluster {command}")
    _check(ran, command)
    if command == "render" and ran.code:
        assert len(ran.error_lines) == 1, ran.err  # render refuses with exactly one line
