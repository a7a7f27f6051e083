"""The in-process transport: botocore answered by the emulator without the socket, exactly as over it."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from hyperpod_scheduler.emulator import in_process, running_emulator
from hyperpod_scheduler.emulator.in_process import _Raw
from tests.emulator.clients import T0, make_client
from tests.engine.conftest import three_tier_request


def _answers(in_proc: bool) -> list[Any]:
    with running_emulator(virtual_start=T0, seed=5, check_answers=True, in_process=in_proc) as emu:
        sm = make_client(emu.endpoint)
        sm.create_cluster(**three_tier_request("c1"))
        emu.advance(600)
        seen: list[Any] = [sm.describe_cluster(ClusterName="c1"), sm.list_cluster_nodes(ClusterName="c1")]
        with pytest.raises(ClientError) as missing:
            sm.describe_cluster(ClusterName="nope")
        seen.append(missing.value.response["Error"])
        assert emu.answer_problems == []
    for answer in seen:
        answer.pop("ResponseMetadata", None)
    return seen


def test_in_process_answers_are_the_served_ones() -> None:
    assert _answers(in_proc=True) == _answers(in_proc=False)


def test_in_process_needs_no_socket_and_stops_with_the_emulator() -> None:
    with running_emulator(virtual_start=T0, in_process=True) as emu:
        sm = make_client(emu.endpoint)
        emu._server.close()  # nothing listens any more: only the in-process path can answer
        sm.create_cluster(**three_tier_request("c1"))
        assert [c["ClusterName"] for c in sm.list_clusters()["ClusterSummaries"]] == ["c1"]
    assert not in_process.answered_in_process(emu.endpoint)


def test_a_request_a_before_send_handler_answered_never_reaches_the_emulator() -> None:
    with running_emulator(virtual_start=T0, in_process=True) as emu:
        sm = make_client(emu.endpoint)
        body = b'{"__type": "ThrottlingException", "message": "Rate exceeded"}'
        sm.meta.events.register_first(
            "before-send.sagemaker.CreateCluster", lambda request, **_: AWSResponse(request.url, 400, {}, _Raw(body))
        )
        with pytest.raises(ClientError, match="Rate exceeded"):
            sm.create_cluster(**three_tier_request("c1"))
        assert emu.backend.dispatch("ListClusters", {})["ClusterSummaries"] == []


def test_renew_is_a_fresh_emulator_behind_the_same_endpoint() -> None:
    with running_emulator(virtual_start=T0, seed=5, in_process=True) as emu:
        sm = make_client(emu.endpoint)
        sm.create_cluster(**three_tier_request("c1"))
        emu.advance(3600)
        emu.faults.error_rate = 1.0
        endpoint = emu.endpoint
        emu.renew()
        assert emu.endpoint == endpoint
        assert emu.clock.now() == T0
        assert emu.faults.error_rate == 0.0
        assert sm.list_clusters()["ClusterSummaries"] == []
