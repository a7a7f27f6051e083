"""The SageMaker model is decoded once per process, however many sessions and threads ask for it."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.loaders import JSONFileLoader

from hyperpod_scheduler.aws import clients, model
from hyperpod_scheduler.emulator import shapes


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Counter[str]:
    """JSON files botocore decodes, counted by path; the process starts on a loader of its own (a new
    AWS_DATA_PATH), so models other tests loaded already do not hide a second decode."""
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    clients._cached_session.cache_clear()
    seen: Counter[str] = Counter()
    real = JSONFileLoader.load_file

    def counted(self: JSONFileLoader, file_path: str) -> Any:
        found = real(self, file_path)
        if found is not None:
            seen[Path(file_path).parent.parent.name + "/" + Path(file_path).name] += 1
        return found

    monkeypatch.setattr(JSONFileLoader, "load_file", counted)
    yield seen
    clients._cached_session.cache_clear()


def _together(n: int, work: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        out[i] = work(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_eight_threads_with_their_own_sessions_decode_the_model_once(decodes: Counter[str]) -> None:
    made = _together(
        8, lambda i: clients.session(region="us-east-1").client("sagemaker", endpoint_url="http://127.0.0.1:9")
    )
    assert decodes["sagemaker/service-2"] == 1
    # ... and every client reads that one copy.
    assert len({id(c.meta.service_model._service_description) for c in made}) == 1


def test_sessions_per_profile_and_the_validation_model_share_one_copy(
    decodes: Counter[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    config.write_text("[profile a]\nregion = us-east-1\n[profile b]\nregion = eu-west-1\n", encoding="utf-8")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    a = clients.sagemaker_client("a", endpoint_url="http://127.0.0.1:9")
    b = clients.sagemaker_client("b", endpoint_url="http://127.0.0.1:9")
    validation = model._service_model.__wrapped__("sagemaker")  # what service_model() builds, uncached
    assert decodes["sagemaker/service-2"] == 1
    assert a.meta.service_model._service_description is b.meta.service_model._service_description
    assert validation._service_description is a.meta.service_model._service_description


def test_service_model_is_one_object_for_threads_that_ask_first(monkeypatch: pytest.MonkeyPatch) -> None:
    model._service_model.cache_clear()
    got = _together(8, lambda i: model.service_model())
    assert all(m is got[0] for m in got)


def test_the_emulator_handler_threads_build_its_model_once() -> None:
    shapes._service_model.cache_clear()
    got = _together(8, lambda i: shapes.service_model())
    assert all(m is got[0] for m in got)


def test_boto3_sessions_on_the_shared_loader_do_not_grow_its_search_path() -> None:
    # Every boto3 Session appends boto3's data folder to its loader's search path; on the one loader a
    # process shares, a session per request (the dashboard, a Lambda container) grew it without end.
    from hyperpod_scheduler.aws import clients
    from hyperpod_scheduler.aws.model import shared_loader

    clients.session(region="us-east-1")
    before = list(shared_loader().search_paths)
    for _ in range(5):
        clients.session(region="us-east-1")
    assert shared_loader().search_paths == before
    assert len(set(before)) == len(before)
