"""What the server answers, as typed, read-only objects.

Each view keeps the decoded JSON it was built from in ``raw``, so fields
the server adds later are reachable before this package names them. Ids
are the server's UUID strings. Seeds are Python ints, exact over the whole
u64 range: the JSON decoder never passes them through a float.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JsonObject = dict[str, Any]
"""A decoded JSON object."""

FINISHED_STATES = frozenset({"succeeded", "failed", "cancelled"})
"""Job states that do not change any more."""


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class Result:
    """One job's outcome: its stored spec and, once it succeeded, its price.

    ``price``, ``std_error``, ``ci95`` and ``paths`` are ``None`` unless
    ``state`` is ``succeeded``; a failed job says why in ``error``.
    ``seed`` is the seed of the job's random streams (the stored spec's,
    drawn by the server when the submission gave none; ``None`` for the
    ``exact`` method): submitting ``spec`` again gives the same price bit
    for bit.
    """

    job_id: str
    """The job's id."""
    state: str
    """``queued``, ``running``, ``succeeded``, ``failed`` or ``cancelled``."""
    spec: JsonObject
    """The spec as stored: defaults filled, seed drawn."""
    price: float | None
    """Estimated (or, for ``exact``, exact) option price."""
    std_error: float | None
    """Standard error of ``price``; 0 for ``exact``."""
    ci95: tuple[float, float] | None
    """95% confidence interval of the price."""
    paths: int | None
    """Paths simulated (for ``exact``, the 2^periods paths enumerated)."""
    seed: int | None
    """Seed of the random streams."""
    error: str | None = None
    """Why the job failed, for a failed job."""
    delta: float | None = None
    """∂price/∂``initial``, when the spec asked for it (``greeks:
    ["delta"]``); ``None`` otherwise."""
    delta_std_error: float | None = None
    """Standard error of ``delta`` (0 for ``exact``)."""
    point: JsonObject | None = None
    """The grid point the job prices when its batch is a sweep
    (``{"exercise": 25, "periods": 10}``), else ``None``."""
    details: JsonObject = field(default_factory=dict, repr=False)
    """The server's whole result object (method, variance reduction used,
    its factor, ``elapsed_ms``, …); empty while there is no result."""

    @property
    def succeeded(self) -> bool:
        """True when the job has a price."""
        return self.state == "succeeded"

    @classmethod
    def from_job(cls, view: JsonObject) -> Result:
        """The result part of a job view (``GET /v1/jobs/{id}``)."""
        spec: JsonObject = view.get("spec") or {}
        result: JsonObject = view.get("result") or {}
        ci95 = result.get("ci95")
        seed = result.get("seed", spec.get("seed"))
        return cls(
            job_id=str(view["id"]),
            state=str(view["state"]),
            spec=spec,
            price=_float(result.get("price")),
            std_error=_float(result.get("std_error")),
            ci95=(float(ci95[0]), float(ci95[1])) if ci95 else None,
            paths=_int(result.get("paths")),
            seed=_int(seed),
            error=view.get("error"),
            delta=_float(result.get("delta")),
            delta_std_error=_float(result.get("delta_std_error")),
            point=view.get("point"),
            details=result,
        )


@dataclass(frozen=True)
class Job:
    """A job as the server shows it (``GET /v1/jobs/{id}``)."""

    id: str
    """The job's id."""
    batch_id: str | None
    """The batch it was submitted in, if any."""
    state: str
    """``queued``, ``running``, ``succeeded``, ``failed`` or ``cancelled``."""
    spec: JsonObject
    """The spec as stored: defaults filled, seed drawn."""
    result: Result | None
    """The outcome, once the job succeeded."""
    error: str | None
    """Why the job failed, for a failed job."""
    attempts: int
    """How many times the job was tried: the highest attempt of its tasks
    (1 when none was retried; see docs/api.md)."""
    timings: JsonObject
    """Timestamps (RFC 3339 strings) and durations in milliseconds."""
    raw: JsonObject = field(repr=False)
    """The decoded JSON of the view."""

    @property
    def finished(self) -> bool:
        """True once the job succeeded, failed or was cancelled."""
        return self.state in FINISHED_STATES

    @classmethod
    def from_json(cls, view: JsonObject) -> Job:
        """Reads a job view."""
        batch_id = view.get("batch_id")
        return cls(
            id=str(view["id"]),
            batch_id=None if batch_id is None else str(batch_id),
            state=str(view["state"]),
            spec=view.get("spec") or {},
            result=Result.from_job(view) if view.get("result") is not None else None,
            error=view.get("error"),
            attempts=int(view.get("attempts", 0)),
            timings=view.get("timings") or {},
            raw=view,
        )


@dataclass(frozen=True)
class Batch:
    """A submitted batch: its id and its jobs' ids in submission order."""

    id: str
    """The batch's id."""
    job_ids: list[str]
    """The jobs' ids, in the order of the submitted specs."""
    replayed: bool = False
    """True when the server answered from an earlier submission with the
    same idempotency key (nothing new was enqueued)."""


@dataclass(frozen=True)
class StateCounts:
    """How many of a batch's jobs are in each state."""

    queued: int
    """Waiting to be claimed."""
    running: int
    """Being computed."""
    succeeded: int
    """With a result."""
    failed: int
    """Gave up."""
    cancelled: int
    """Cancelled before they finished."""

    @property
    def finished(self) -> int:
        """Jobs that succeeded, failed or were cancelled."""
        return self.succeeded + self.failed + self.cancelled


@dataclass(frozen=True)
class PriceStats:
    """Statistics over the prices of a batch's succeeded jobs."""

    count: int
    """Prices summarised."""
    mean: float
    """Mean price."""
    min: float
    """Smallest price."""
    max: float
    """Largest price."""
    stddev: float
    """Sample standard deviation of the prices (n − 1)."""
    std_error: float
    """Standard error of the mean price."""


@dataclass(frozen=True)
class BatchStatus:
    """A batch as the server shows it (``GET /v1/batches/{id}``)."""

    id: str
    """The batch's id."""
    label: str | None
    """The label given at submission."""
    total: int
    """Jobs in the batch."""
    counts: StateCounts
    """Jobs per state."""
    done: bool
    """True when no job is queued or running."""
    stats: PriceStats | None
    """Statistics over the succeeded prices; ``None`` while none succeeded."""
    timings: JsonObject
    """Timestamps (RFC 3339 strings) and durations in milliseconds."""
    raw: JsonObject = field(repr=False)
    """The decoded JSON of the view."""

    @property
    def finished(self) -> bool:
        """True when the batch is done (the same as ``done``)."""
        return self.done

    @classmethod
    def from_json(cls, view: JsonObject) -> BatchStatus:
        """Reads a batch view."""
        counts: JsonObject = view.get("counts") or {}
        stats: JsonObject | None = view.get("stats")
        return cls(
            id=str(view["id"]),
            label=view.get("label"),
            total=int(view["total"]),
            counts=StateCounts(
                **{name: int(counts.get(name, 0)) for name in StateCounts.__dataclass_fields__}
            ),
            done=bool(view["done"]),
            stats=(
                PriceStats(
                    count=int(stats["count"]),
                    **{
                        name: float(stats[name])
                        for name in ("mean", "min", "max", "stddev", "std_error")
                    },
                )
                if stats
                else None
            ),
            timings=view.get("timings") or {},
            raw=view,
        )
