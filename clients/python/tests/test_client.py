"""The client against a real ``mcq serve``, once per backend."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

from mcq_client import (
    Batch,
    BatchStatus,
    Client,
    Job,
    ProblemError,
    Result,
    WaitTimeout,
)

from .conftest import Server

# The exact price of the original sample's call (every field at its default).
EXACT_PRICE = 9.530286028882
# Its delta, d price / d initial, exact.
EXACT_DELTA = 0.4753041267394558
SMALL_RUNS = 10_000


def _outcome(result: Result) -> tuple[object, ...]:
    return (result.job_id, result.price, result.std_error, result.ci95, result.paths, result.seed)


def test_one_job_is_submitted_and_waited_for(client: Client) -> None:
    job = client.submit(runs=SMALL_RUNS, seed=7)
    assert isinstance(job, Job)
    uuid.UUID(job.id)
    assert job.batch_id is None
    assert job.spec["seed"] == 7 and job.spec["runs"] == SMALL_RUNS
    assert job.spec["exercise"] == 30.0, "omitted fields take the defaults"

    # A bare id: the client finds out that it names a job.
    final = client.wait(job.id, timeout=120)
    assert isinstance(final, Job) and final.id == job.id
    assert final.state == "succeeded" and final.finished
    result = final.result
    assert result is not None and result.succeeded
    assert result.seed == 7 and result.paths == SMALL_RUNS
    assert result.price is not None and result.ci95 is not None
    assert result.ci95[0] < result.price < result.ci95[1]
    assert result.details["method"] == "mc"

    # The view itself, and the job read again: the same outcome.
    assert client.wait(job).result == result
    assert client.job(job.id).result == result


def test_a_base_spec_is_varied_by_keywords(client: Client) -> None:
    base = {"runs": SMALL_RUNS, "option": "put", "seed": 3}
    job = client.submit(base, exercise=35, seed=4)
    assert job.spec["option"] == "put" and job.spec["exercise"] == 35.0
    assert job.spec["seed"] == 4, "keywords override the base spec"
    assert base["seed"] == 3, "the caller's spec is left alone"


def test_seeded_batches_give_the_same_bits(client: Client) -> None:
    specs = [{"runs": SMALL_RUNS, "seed": 1000 + i} for i in range(20)]
    first = client.submit_batch(specs, label="reproducible")
    second = client.submit_batch(specs, label="reproducible")
    assert isinstance(first, Batch) and len(first.job_ids) == 20
    assert first.id != second.id and not set(first.job_ids) & set(second.job_ids)

    for batch in (first, second):
        done = client.wait(batch.id, timeout=120)
        assert isinstance(done, BatchStatus)
        assert done.done and done.total == 20 and done.counts.succeeded == 20
        assert done.label == "reproducible"

    one = list(client.results(first.id))
    two = list(client.results(second.id))
    assert [r.job_id for r in one] == first.job_ids, "results come in submission order"
    assert [r.seed for r in one] == [1000 + i for i in range(20)]
    assert [_outcome(r)[1:] for r in one] == [_outcome(r)[1:] for r in two]
    # Different seeds are different streams: the comparison above can fail.
    assert len({r.price for r in one}) == 20


def test_prices_agree_with_the_exact_price(client: Client) -> None:
    batch = client.submit_batch([{"runs": 100_000, "seed": 50 + i} for i in range(4)])
    results = list(client.results(batch))
    assert [r.state for r in results] == ["succeeded"] * 4
    for result in results:
        assert result.price is not None and result.std_error is not None
        assert 0 < result.std_error < 0.05
        assert abs(result.price - EXACT_PRICE) < 5 * result.std_error, result

    exact = client.wait(client.submit(method="exact"), timeout=120)
    assert exact.result is not None and exact.result.price is not None
    assert abs(exact.result.price - EXACT_PRICE) < 1e-9
    assert exact.result.std_error == 0.0


def test_delta_comes_with_its_error_when_asked_for(client: Client) -> None:
    job = client.wait(client.submit(runs=100_000, seed=3, greeks=["delta"]), timeout=120)
    assert job.result is not None and job.spec["greeks"] == ["delta"]
    delta, error = job.result.delta, job.result.delta_std_error
    assert delta is not None and error is not None and error > 0
    assert abs(delta - EXACT_DELTA) < 5 * error, job.result

    exact = client.wait(client.submit(method="exact", greeks=["delta"]), timeout=120)
    assert exact.result is not None and exact.result.delta is not None
    assert abs(exact.result.delta - EXACT_DELTA) < 1e-12
    assert exact.result.delta_std_error == 0.0

    plain = client.wait(client.submit(runs=SMALL_RUNS), timeout=120)
    assert plain.result is not None and plain.result.delta is None


def test_invalid_values_are_problems_with_pointers(client: Client) -> None:
    with pytest.raises(ProblemError) as single:
        client.submit(down=1.2)
    problem = single.value
    assert problem.status == 422 and problem.type == "/problems/invalid-spec"
    assert [e.pointer for e in problem.errors] == ["/down"]
    assert "interest" in problem.errors[0].detail
    assert "/down" in str(problem), "the message names the field"

    with pytest.raises(ProblemError) as batch:
        client.submit_batch([{}, {"down": 1.2, "periods": 0}])
    pointers = {e.pointer for e in batch.value.errors}
    assert batch.value.status == 422
    assert pointers == {"/jobs/1/down", "/jobs/1/periods"}

    with pytest.raises(ProblemError) as unknown_field:
        client.submit(sweep={"runs": [1, 2]})
    assert unknown_field.value.status == 400
    assert unknown_field.value.type == "/problems/malformed-request"
    assert [e.pointer for e in unknown_field.value.errors] == ["/sweep"]


def test_unknown_ids_are_not_found(client: Client) -> None:
    missing = str(uuid.uuid4())
    with pytest.raises(ProblemError) as either:
        client.wait(missing)
    assert either.value.status == 404 and either.value.type == "/problems/not-found"
    assert "job or batch" in either.value.detail
    with pytest.raises(ProblemError) as batch:
        client.batch(missing)
    assert batch.value.status == 404 and "batch" in batch.value.detail
    with pytest.raises(ProblemError) as results:
        list(client.results("not-a-uuid/../../healthz"))
    assert results.value.status == 404


def test_waiting_on_a_batch_reports_progress(client: Client) -> None:
    batch = client.submit_batch([{"runs": 200_000, "seed": i} for i in range(20)])
    views: list[BatchStatus] = []
    final = client.wait(batch, timeout=120, progress=views.append)
    assert final.done and final.counts.succeeded == 20
    assert views and views[-1] is final
    assert all(isinstance(v, BatchStatus) and v.id == batch.id and v.total == 20 for v in views)
    finished = [v.counts.finished for v in views]
    assert finished == sorted(finished), "progress never goes back"
    assert final.stats is not None and final.stats.count == 20
    assert abs(final.stats.mean - EXACT_PRICE) < 5 * final.stats.std_error + 0.01


def test_a_wait_outlasts_the_servers_cap_and_runs_out_with_the_last_view(
    client: Client, server: Server
) -> None:
    job = client.submit(runs=10**10, seed=1)
    try:
        # Twice the longest the server holds one request: the wait asks
        # again after each capped answer until its own timeout.
        hold_cap = server.hold_cap_seconds
        started = time.monotonic()
        with pytest.raises(WaitTimeout) as timed_out:
            client.wait(job.id, timeout=2 * hold_cap)
        assert time.monotonic() - started >= 2 * hold_cap
        view = timed_out.value.view
        assert isinstance(view, Job) and view.id == job.id and not view.finished
    finally:
        client.cancel(job)
    assert client.wait(job, timeout=120).state == "cancelled"


def test_results_frame(client: Client) -> None:
    pd = pytest.importorskip("pandas")
    specs = [{"runs": SMALL_RUNS, "seed": 2**53 - 5 + i, "exercise": 25 + i} for i in range(5)]
    batch = client.submit_batch(specs)
    frame = client.results_frame(batch.id)
    assert isinstance(frame, pd.DataFrame)
    assert list(frame["job_id"]) == batch.job_ids
    assert list(frame["state"]) == ["succeeded"] * 5
    assert str(frame["seed"].dtype) == "UInt64"
    assert [int(s) for s in frame["seed"]] == [2**53 - 5 + i for i in range(5)]
    assert list(frame["exercise"]) == [25.0 + i for i in range(5)]
    assert (frame["ci95_low"] < frame["price"]).all() and (
        frame["price"] < frame["ci95_high"]
    ).all()
    assert list(frame["paths"]) == [SMALL_RUNS] * 5
    assert list(frame["price"]) == [r.price for r in client.results(batch.id)]
    assert "delta" not in frame.columns, "no delta columns unless asked for"


def test_a_sweeps_frame_has_its_grid_and_delta(client: Client) -> None:
    pytest.importorskip("pandas")
    batch = client.submit_batch(
        {"runs": SMALL_RUNS, "greeks": ["delta"]},
        sweep={"exercise": [25, 35], "option": ["call", "put"]},
        repeat=2,
    )
    frame = client.results_frame(batch)
    results = list(client.results(batch))
    assert list(frame.columns[:4]) == ["job_id", "state", "exercise", "option"]
    assert list(frame["exercise"]) == [25, 25, 25, 25, 35, 35, 35, 35]
    assert list(frame["option"]) == ["call", "call", "put", "put"] * 2
    assert list(frame["delta"]) == [r.delta for r in results]
    assert list(frame["delta_std_error"]) == [r.delta_std_error for r in results]
    assert [int(s) for s in frame["seed"]] == [r.seed for r in results]
    assert (frame["attempts"] == 1).all()
    assert frame["finished_at"].notna().all()
    chosen = client.results_frame(batch, fields=["price", "exercise"])
    assert list(chosen.columns) == ["price", "exercise"]
    assert list(chosen["price"]) == [r.price for r in results]
    with pytest.raises(ProblemError) as unknown:
        client.results_frame(batch, fields=["prise"])
    assert unknown.value.status == 400 and "price" in (unknown.value.detail or "")


def test_seeds_up_to_the_servers_limit_round_trip_exactly(client: Client) -> None:
    # The server takes seeds up to 2^53 - 1, the top of what a double holds
    # exactly; the client keeps them ints throughout.
    seeds = [2**53 - 3, 2**53 - 2, 2**53 - 1]
    batch = client.submit_batch([{"runs": SMALL_RUNS, "seed": s} for s in seeds])
    results = list(client.results(batch.id))
    assert [r.seed for r in results] == seeds
    assert [r.spec["seed"] for r in results] == seeds
    assert [r.details["seed"] for r in results] == seeds

    job = client.submit(runs=SMALL_RUNS, seed=2**53 - 1)
    assert job.spec["seed"] == 2**53 - 1
    # The same seed by itself and inside a batch: the same stream.
    alone = client.wait(job, timeout=120).result
    assert alone is not None and _outcome(alone)[1:] == _outcome(results[2])[1:]

    with pytest.raises(ProblemError) as too_big:
        client.submit(seed=2**53)
    assert too_big.value.status == 422
    assert [e.pointer for e in too_big.value.errors] == ["/seed"]
    with pytest.raises(ProblemError) as not_u64:
        client.submit(seed=2**64)
    assert not_u64.value.status == 400
    assert [e.pointer for e in not_u64.value.errors] == ["/seed"]


def test_idempotent_batches_replay_their_answer(client: Client) -> None:
    key = f"test-{uuid.uuid4()}"
    specs: list[dict[str, Any]] = [{"runs": SMALL_RUNS}, {"runs": SMALL_RUNS, "option": "put"}]
    first = client.submit_batch(specs, label="once", idempotency_key=key)
    again = client.submit_batch(specs, label="once", idempotency_key=key)
    assert not first.replayed and again.replayed
    assert (again.id, again.job_ids) == (first.id, first.job_ids)
    with pytest.raises(ProblemError) as conflict:
        client.submit_batch(specs[:1], idempotency_key=key)
    assert conflict.value.status == 409
    assert conflict.value.type == "/problems/idempotency-conflict"


def test_a_sweep_prices_every_grid_point(client: Client) -> None:
    batch = client.submit_batch(
        {"runs": SMALL_RUNS},
        label="grid",
        sweep={"exercise": [25, 30, 35], "periods": [10, 20]},
        repeat=2,
    )
    assert len(batch.job_ids) == 12
    client.wait(batch, timeout=120)
    results = list(client.results(batch))
    points = [(r.point["exercise"], r.point["periods"]) for r in results]  # type: ignore[index]
    assert points == [(k, n) for k in (25, 30, 35) for n in (10, 20) for _ in range(2)]
    assert all(r.spec["exercise"] == r.point["exercise"] for r in results)  # type: ignore[index]
    assert len({r.seed for r in results}) == 12, "every job draws its own seed"
    summary = client.summary(batch)
    assert [p["point"] for p in summary["points"]] == [
        {"exercise": k, "periods": n} for k in (25, 30, 35) for n in (10, 20)
    ]
    first = summary["points"][0]["price"]
    assert first["count"] == 2
    prices = [r.price for r in results[:2] if r.price is not None]
    assert first["mean"] == pytest.approx(sum(prices) / 2)
    with pytest.raises(ProblemError) as bad:
        client.submit_batch(None, sweep={"exercise": [25, -1]})
    assert [e.pointer for e in bad.value.errors] == ["/sweep/exercise/1"]
    with pytest.raises(TypeError):
        client.submit_batch([{}], sweep={"exercise": [25]})


def test_a_dry_run_counts_and_prices_without_queueing(client: Client, server: Server) -> None:
    label = f"dry-{uuid.uuid4().hex[:8]}"

    def listed() -> list[Any]:
        page = httpx.get(f"{server.url}/v1/batches", params={"label": label}).json()
        return list(page["batches"])

    one = client.dry_run(runs=SMALL_RUNS)
    assert (one["jobs"], one["tasks"], one["paths"]) == (1, 1, SMALL_RUNS)
    grid = client.dry_run_batch(
        {"runs": SMALL_RUNS},
        label=label,
        sweep={"exercise": [25, 30, 35]},
        repeat=2,
        cost_local=0.04,
        cost_cloud="0.05,granularity=1min",
    )
    assert (grid["jobs"], grid["paths"]) == (6, 6 * SMALL_RUNS)
    assert grid["cost"]["cloud_granularity_s"] == 60.0
    assert grid["local"]["compute_s"] > 0
    assert listed() == []
    with pytest.raises(ProblemError) as bad:
        client.dry_run_batch([{}, {"down": 2}], label=label)
    assert "/jobs/1/down" in [e.pointer for e in bad.value.errors]
    with pytest.raises(TypeError):
        client.dry_run(cost_local=0.04)
    # The same batch for real is listed: the check above could fail.
    client.submit_batch(
        {"runs": SMALL_RUNS}, label=label, sweep={"exercise": [25, 30, 35]}, repeat=2
    )
    assert len(listed()) == 1
