"""Base seeds: the client derives job seeds exactly as the server does, with
the repository's shared test vectors, and a batch's base seed reproduces it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from mcq_client import MAX_SEED, Client, job_seed

from .conftest import Server

VECTORS = Path(__file__).resolve().parents[3] / "tests" / "vectors" / "job_seed.json"
SMALL_RUNS = 10_000


def test_job_seed_matches_the_shared_vectors() -> None:
    vectors = json.loads(VECTORS.read_text())["vectors"]
    assert len(vectors) >= 10
    for v in vectors:
        assert job_seed(v["base"], v["index"]) == v["seed"], v


def test_job_seeds_stay_within_the_seed_domain() -> None:
    for base in (0, 1, 2**32, MAX_SEED - 1, MAX_SEED):
        seeds = [job_seed(base, i) for i in range(2_000)]
        assert all(0 <= s <= MAX_SEED for s in seeds)
        assert len(set(seeds)) == len(seeds)
    # Nearby bases are unrelated batches, not one batch shifted by a job.
    assert not {job_seed(7, i) for i in range(1, 100)} & {job_seed(8, i) for i in range(99)}


def test_max_seed_is_the_servers_declared_maximum(server: Server) -> None:
    document = httpx.get(f"{server.url}/openapi.json", timeout=30).json()
    seed = document["components"]["schemas"]["Spec"]["properties"]["seed"]
    assert (seed["minimum"], seed["maximum"]) == (0, MAX_SEED)


def test_a_base_seed_reproduces_the_batch(client: Client) -> None:
    specs = [{"runs": SMALL_RUNS}] * 3 + [{"runs": SMALL_RUNS, "seed": 5}]
    runs = []
    for _ in range(2):
        batch = client.submit_batch(specs, seed=2010)
        client.wait(batch.id, timeout=120)
        runs.append([(r.seed, r.price) for r in client.results(batch.id)])
    seeds = [seed for seed, _ in runs[0]]
    assert seeds == [job_seed(2010, 0), job_seed(2010, 1), job_seed(2010, 2), 5]
    assert runs[0] == runs[1], "the same base seed, the same prices"
    assert len({price for _, price in runs[0]}) == 4

    swept = client.submit_batch(
        {"runs": SMALL_RUNS}, sweep={"exercise": [25, 35]}, repeat=2, seed=2010
    )
    client.wait(swept.id, timeout=120)
    results = list(client.results(swept.id))
    assert [r.seed for r in results] == [job_seed(2010, i) for i in range(4)]
    assert results[0].price != results[1].price, "a point's repeats are distinct streams"
