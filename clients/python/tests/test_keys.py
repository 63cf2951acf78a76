"""The client against a real ``mcq serve`` that needs API keys."""

from __future__ import annotations

import pytest

from mcq_client import Client, ProblemError

from .conftest import KeyedServer


def test_a_key_submits_reads_and_cancels_its_tenants_work(keyed: KeyedServer) -> None:
    with Client(keyed.server.url, api_key=keyed.alice) as alice:
        batch = alice.submit_batch([{"runs": 1000}, {"runs": 1000}])
        assert alice.batch(batch).total == 2
        alice.cancel(batch)
        assert alice.batch(batch).done


def test_without_a_key_the_server_answers_401(keyed: KeyedServer) -> None:
    with Client(keyed.server.url) as anonymous, pytest.raises(ProblemError) as refused:
        anonymous.submit(runs=1000)
    assert (refused.value.status, refused.value.type) == (401, "/problems/unauthorized")


def test_another_tenants_work_is_not_found(keyed: KeyedServer) -> None:
    with (
        Client(keyed.server.url, api_key=keyed.alice) as alice,
        Client(keyed.server.url, api_key=keyed.bob) as bob,
    ):
        job = alice.submit(runs=1000)
        with pytest.raises(ProblemError) as hidden:
            bob.job(job)
        assert hidden.value.status == 404
        with pytest.raises(ProblemError) as refused:
            bob.cancel(job)
        assert refused.value.status == 404
        assert alice.job(job).id == job.id


def test_another_tenants_sweep_summary_and_table_are_not_found(keyed: KeyedServer) -> None:
    pytest.importorskip("pandas")
    with (
        Client(keyed.server.url, api_key=keyed.alice) as alice,
        Client(keyed.server.url, api_key=keyed.bob) as bob,
    ):
        grid = alice.submit_batch({"runs": 1000}, sweep={"exercise": [25, 35]})
        assert len(alice.results_frame(grid)) == 2
        assert len(alice.summary(grid)["points"]) == 2
        for read in (bob.summary, lambda b: bob.results_frame(b, wait=False)):
            with pytest.raises(ProblemError) as hidden:
                read(grid)
            assert (hidden.value.status, hidden.value.type) == (404, "/problems/not-found")
