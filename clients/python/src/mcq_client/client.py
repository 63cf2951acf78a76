"""The synchronous client of the mcq HTTP API (docs/api.md)."""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, overload
from urllib.parse import quote

import httpx

from .errors import McqError, ProblemError, UnreachableError, WaitTimeout
from .frame import ChunkReader, frame_from_csv
from .version import __version__
from .views import FINISHED_STATES, Batch, BatchStatus, Job, JsonObject, Result

Kind = Literal["job", "batch"]
"""Which of the two kinds of id a request names."""

Id = str | uuid.UUID | Job | Batch | BatchStatus
"""Anything that names a job or a batch: an id, or a view of one."""

LONG_POLL_SECONDS = 60.0
"""The wait asked of the server per request without a progress callback:
the most it accepts. A server holds a request at most three quarters of its
request timeout (22.5 s by default), and the client simply asks again."""

PROGRESS_POLL_SECONDS = 0.5
"""The wait per request with a progress callback: how often it is called
while the work goes on (the answer still comes as soon as the work is done)."""

PAGE_SIZE = 1000
"""Jobs per page when reading results: the most the server gives."""

_MIN_GAP_SECONDS = 0.05
"""Shortest time between two reads of one wait. A server answers a wait at
once while it shuts down; without a gap the loop would spin until it is gone."""

_NOT_FOUND = "/problems/not-found"


class Client:
    """A connection to one mcq server.

    ``base_url`` is the server's address (``http://127.0.0.1:8080``);
    ``api_key``, when given, is sent as ``Authorization: Bearer …`` with
    every request; ``timeout`` bounds every request in seconds (a long poll
    is allowed its wait on top). Use it as a context manager, or call
    :meth:`close`, to release its connections.
    """

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 30.0) -> None:
        headers = {"User-Agent": f"mcq-client/{__version__}", "Accept": "application/json"}
        if api_key is not None:
            headers["Authorization"] = f"Bearer {api_key}"
        self.base_url = base_url.rstrip("/")
        """The server's address, without a trailing slash."""
        self.timeout = timeout
        """Seconds any one request may take, beyond the wait it asks for."""
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        """Closes the client's connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    def submit(self, spec: Mapping[str, Any] | None = None, **fields: Any) -> Job:
        """Enqueues one pricing job; returns it as stored (state ``queued``,
        defaults filled, seed drawn unless given).

        ``spec`` and ``fields`` are spec fields (docs/api.md: ``initial``,
        ``exercise``, ``up``, ``down``, ``interest``, ``periods``, ``runs``,
        ``target_std_error``, ``option``, ``method``, ``seed``,
        ``variance_reduction``); ``fields`` override ``spec``, so a base
        spec can be varied: ``client.submit(base, runs=10**6)``. Invalid
        values raise :class:`ProblemError` with a pointer per bad field.
        """
        body = {**(spec or {}), **fields}
        return Job.from_json(self._json("POST", "/v1/jobs", body=body))

    def submit_batch(
        self,
        jobs: Iterable[Mapping[str, Any]] | Mapping[str, Any] | None,
        label: str | None = None,
        sweep: Mapping[str, Iterable[Any]] | None = None,
        idempotency_key: str | None = None,
        repeat: int | None = None,
        seed: int | None = None,
    ) -> Batch:
        """Enqueues a batch of jobs, all or nothing; returns its id and the
        job ids in the order of ``jobs``.

        With ``sweep`` (spec fields and the values each takes, e.g.
        ``{"exercise": [25, 30, 35], "periods": [10, 20]}``), ``jobs`` is
        the base spec (a mapping, or ``None`` for the defaults) and the
        server enqueues one job per point of the grid, the last field
        varying fastest, each point ``repeat`` times (default 1), each job
        with its own seed; ``Result.point`` then names each job's point.

        ``seed`` is the batch's base seed (0 to 2^53 − 1): job ``i`` gets
        :func:`job_seed` ``(seed, i)`` unless its spec names a seed, so the
        same batch submitted with the same base prices every job alike, bit
        for bit, and a repeated grid point prices distinct streams. Without
        it each job draws its own seed.

        If any spec is invalid nothing is enqueued, and the
        :class:`ProblemError` points at each bad value (``/jobs/17/down``,
        ``/sweep/exercise/2``). With ``idempotency_key``, sending the same
        batch again (after a lost answer, say) returns the first answer and
        enqueues nothing.
        """
        body = _batch_body(jobs, label, sweep, repeat, seed)
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else {}
        response = self._request("POST", "/v1/batches", body=body, headers=headers)
        data = _decode(response)
        return Batch(
            id=str(data["id"]),
            job_ids=[str(job_id) for job_id in data["job_ids"]],
            replayed=response.headers.get("idempotent-replayed") == "true",
        )

    def dry_run(
        self,
        spec: Mapping[str, Any] | None = None,
        *,
        cost_local: float | str | None = None,
        cost_cloud: float | str | None = None,
        **fields: Any,
    ) -> JsonObject:
        """What :meth:`submit` with the same arguments would queue and take,
        without queueing anything (``POST /v1/jobs?dry_run=true``): the
        server's JSON, with ``jobs``, ``tasks``, ``paths``, ``local`` and
        ``fleet`` predictions, and ``cost`` when both prices are given (as
        ``mcq bench compare --cost-local/--cost-cloud``: ``0.04`` and
        ``"0.05,granularity=1min"``). Invalid values raise
        :class:`ProblemError` exactly as :meth:`submit` would.
        """
        body = {**(spec or {}), **fields}
        params = _dry_run_params(cost_local, cost_cloud)
        return self._json("POST", "/v1/jobs", params=params, body=body)

    def dry_run_batch(
        self,
        jobs: Iterable[Mapping[str, Any]] | Mapping[str, Any] | None,
        label: str | None = None,
        sweep: Mapping[str, Iterable[Any]] | None = None,
        repeat: int | None = None,
        seed: int | None = None,
        *,
        cost_local: float | str | None = None,
        cost_cloud: float | str | None = None,
    ) -> JsonObject:
        """What :meth:`submit_batch` with the same arguments would queue and
        take, without queueing anything (``POST /v1/batches?dry_run=true``);
        the answer and the prices as for :meth:`dry_run`.
        """
        body = _batch_body(jobs, label, sweep, repeat, seed)
        params = _dry_run_params(cost_local, cost_cloud)
        return self._json("POST", "/v1/batches", params=params, body=body)

    def summary(self, batch_id: str | uuid.UUID | Batch | BatchStatus) -> JsonObject:
        """The batch's jobs grouped by grid point (``GET
        /v1/batches/{id}/summary``): for each point its counts and the mean
        price of its jobs with its standard error and 95% interval."""
        return self._json("GET", f"/v1/batches/{_key(batch_id)}/summary")

    def job(self, id: str | uuid.UUID | Job) -> Job:
        """The job as it stands now."""
        return Job.from_json(self._json("GET", f"/v1/jobs/{_key(id)}"))

    def batch(self, id: str | uuid.UUID | Batch | BatchStatus) -> BatchStatus:
        """The batch as it stands now: counts by state, price statistics, timings."""
        return BatchStatus.from_json(self._json("GET", f"/v1/batches/{_key(id)}"))

    @overload
    def wait(
        self,
        id: Job,
        timeout: float | None = None,
        progress: Callable[[Job], object] | None = None,
    ) -> Job: ...

    @overload
    def wait(
        self,
        id: Batch | BatchStatus,
        timeout: float | None = None,
        progress: Callable[[BatchStatus], object] | None = None,
    ) -> BatchStatus: ...

    @overload
    def wait(
        self,
        id: str | uuid.UUID,
        timeout: float | None = None,
        progress: Callable[[Job | BatchStatus], object] | None = None,
    ) -> Job | BatchStatus: ...

    def wait(
        self,
        id: Id,
        timeout: float | None = None,
        progress: Callable[[Any], object] | None = None,
    ) -> Job | BatchStatus:
        """Waits until a job has finished or a batch is done; returns its
        final view (a :class:`Job` or a :class:`BatchStatus`).

        ``id`` is a job or batch id, or a view of one. The wait is a chain
        of long polls (``?wait=``): the server answers as soon as the work
        is done, so the return comes within milliseconds of the last
        result. ``timeout`` (seconds; ``None`` waits as long as it takes)
        raises :class:`WaitTimeout` carrying the last view. ``progress`` is
        called with every view read, about twice a second while the work
        goes on and once more with the final view.
        """
        kind, key = _target(id)
        deadline = None if timeout is None else time.monotonic() + timeout
        most = LONG_POLL_SECONDS if progress is None else PROGRESS_POLL_SECONDS
        while True:
            started = time.monotonic()
            hold = most if deadline is None else max(0.0, min(most, deadline - started))
            view, kind = self._read(kind, key, hold)
            if progress is not None:
                progress(view)
            if view.finished:
                return view
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"{kind} {key} has not finished after {timeout} s", view)
            _pause_after(started)

    def results(
        self,
        batch_id: str | uuid.UUID | Batch | BatchStatus,
        *,
        wait: bool = True,
        page_size: int = PAGE_SIZE,
    ) -> Iterator[Result]:
        """Yields one :class:`Result` per job of the batch, in submission
        order, reading the batch's jobs page by page (by cursor).

        With ``wait`` (the default) each page is held by the server until
        all its jobs have finished, so results arrive as they complete and
        every result yielded is final; a failed or cancelled job is yielded
        too, without a price. Without ``wait`` the jobs come as they stand.
        """
        key = _key(batch_id)
        hold = LONG_POLL_SECONDS if wait else 0.0
        after: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": page_size}
            if after is not None:
                params["after"] = after
            if hold:
                params["wait"] = _duration(hold)
            started = time.monotonic()
            page = self._json("GET", f"/v1/batches/{key}/jobs", params=params, hold=hold)
            jobs: list[JsonObject] = page["jobs"]
            if wait and not all(job["state"] in FINISHED_STATES for job in jobs):
                # The wait ran out first: ask for the same page again.
                _pause_after(started)
                continue
            for job in jobs:
                yield Result.from_job(job)
            after = page.get("next")
            if after is None:
                return

    def results_frame(
        self,
        batch_id: str | uuid.UUID | Batch | BatchStatus,
        *,
        fields: Iterable[str] | None = None,
        wait: bool = True,
    ) -> Any:
        """The batch's results as a pandas DataFrame, one row per job in
        submission order, read from the server's CSV table as it streams
        (``GET /v1/batches/{id}/results``), so a batch of 100,000 jobs is
        never held as objects in between.

        Columns: ``job_id``, ``state``, the fields of each job's grid point
        (for a batch that is not a sweep: the spec fields that vary between
        its jobs), ``price``, ``std_error``, ``ci95_low``, ``ci95_high``,
        ``delta`` and ``delta_std_error`` when the batch asked for delta,
        ``paths``, ``seed`` (exact, ``UInt64``), ``method``, ``attempts``,
        the timings and ``error``; ``fields`` picks and orders them. With
        ``wait`` (the default) it first waits until the batch is done, as
        :meth:`wait` does. Needs pandas (``pip install
        'mcq-client[pandas]'``); raises ImportError saying so when it is
        missing.
        """
        if wait:
            self.wait(batch_id)
        params: dict[str, str | int] = {"format": "csv"}
        if fields is not None:
            params["fields"] = ",".join(fields)
        path = f"/v1/batches/{_key(batch_id)}/results"
        request = self._http.build_request(
            "GET", path, params=params, headers={"Accept": "text/csv"}
        )
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError as err:
            reason = str(err) or type(err).__name__
            raise UnreachableError(f"GET {self.base_url}{path}: {reason}") from err
        try:
            if response.is_error:
                response.read()
                raise ProblemError.from_response(response)
            return frame_from_csv(io.BufferedReader(ChunkReader(response.iter_bytes())))
        except httpx.TransportError as err:
            # A table cut short (the server lost its database midway) is
            # an error, never a shorter frame.
            reason = str(err) or type(err).__name__
            raise UnreachableError(f"GET {self.base_url}{path} broke off: {reason}") from err
        finally:
            response.close()

    def cancel(self, id: Id) -> None:
        """Cancels a job, or every unfinished job of a batch. Finished jobs
        keep their state; cancelling again is harmless."""
        kind, key = _target(id)
        if kind != "job":
            try:
                self._request("POST", f"/v1/batches/{key}/cancel")
                return
            except ProblemError as err:
                if kind == "batch" or err.status != 404:
                    raise
        try:
            self._request("POST", f"/v1/jobs/{key}/cancel")
        except ProblemError as err:
            raise (_unknown(err, key) if kind is None else err) from None

    def _read(self, kind: Kind | None, key: str, hold: float) -> tuple[Job | BatchStatus, Kind]:
        """Reads a job or batch view with a wait of ``hold`` seconds. An id
        of unknown kind is tried as a batch, then as a job (a 404 comes at
        once, without the wait)."""
        params = {"wait": _duration(hold)} if hold > 0 else None
        if kind != "job":
            try:
                view = self._json("GET", f"/v1/batches/{key}", params=params, hold=hold)
                return BatchStatus.from_json(view), "batch"
            except ProblemError as err:
                if kind == "batch" or err.status != 404:
                    raise
        try:
            view = self._json("GET", f"/v1/jobs/{key}", params=params, hold=hold)
        except ProblemError as err:
            raise (_unknown(err, key) if kind is None else err) from None
        return Job.from_json(view), "job"

    def _json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: JsonObject | None = None,
        hold: float = 0.0,
    ) -> JsonObject:
        return _decode(self._request(method, path, params=params, body=body, hold=hold))

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: JsonObject | None = None,
        headers: Mapping[str, str] | None = None,
        hold: float = 0.0,
    ) -> httpx.Response:
        """Sends one request; raises :class:`ProblemError` for an error
        answer and :class:`UnreachableError` when there is no answer."""
        all_headers = dict(headers or {})
        content = None
        if body is not None:
            content = _encode(body)
        if method == "POST":
            # Also for an empty cancel: a server without keys refuses writes
            # of other content types, as a form on another web site sends.
            all_headers["Content-Type"] = "application/json"
        # A long poll is allowed its wait on top of the usual timeout.
        timeout = httpx.Timeout(self.timeout, read=self.timeout + hold)
        try:
            response = self._http.request(
                method,
                path,
                params=params,
                content=content,
                headers=all_headers,
                timeout=timeout,
            )
        except httpx.TransportError as err:
            reason = str(err) or type(err).__name__
            raise UnreachableError(f"{method} {self.base_url}{path}: {reason}") from err
        if response.is_error:
            raise ProblemError.from_response(response)
        return response


def _batch_body(
    jobs: Iterable[Mapping[str, Any]] | Mapping[str, Any] | None,
    label: str | None,
    sweep: Mapping[str, Iterable[Any]] | None,
    repeat: int | None,
    seed: int | None,
) -> JsonObject:
    """The body of ``POST /v1/batches``: listed jobs, or a sweep over a base spec."""
    body: JsonObject
    if sweep is not None:
        if jobs is not None and not isinstance(jobs, Mapping):
            raise TypeError("with sweep, jobs is the base spec: a mapping or None")
        body = {"sweep": {str(field): list(values) for field, values in sweep.items()}}
        if jobs is not None:
            body["spec"] = dict(jobs)
        if repeat is not None:
            body["repeat"] = int(repeat)
    else:
        if jobs is None or isinstance(jobs, Mapping):
            raise TypeError("jobs must be a list of specs (or give sweep)")
        if repeat is not None:
            raise TypeError("repeat applies to a sweep")
        body = {"jobs": [dict(spec) for spec in jobs]}
    if label is not None:
        body["label"] = label
    if seed is not None:
        body["seed"] = int(seed)
    return body


def _dry_run_params(
    cost_local: float | str | None, cost_cloud: float | str | None
) -> dict[str, str]:
    """The query of a dry run, with its prices when both are given."""
    params = {"dry_run": "true"}
    if (cost_local is None) != (cost_cloud is None):
        raise TypeError("cost_local and cost_cloud go together")
    if cost_local is not None and cost_cloud is not None:
        params["cost_local"] = str(cost_local)
        params["cost_cloud"] = str(cost_cloud)
    return params


def _encode(body: JsonObject) -> bytes:
    """JSON for a request body. Python ints are written exactly, so seeds up
    to 2^64 − 1 arrive intact; NumPy scalars and arrays are accepted as
    their Python values; NaN and infinities are refused (JSON has none)."""
    try:
        return json.dumps(body, default=_plain, allow_nan=False).encode()
    except (TypeError, ValueError) as err:
        raise ValueError(f"the request cannot be sent as JSON: {err}") from err


def _plain(value: Any) -> Any:
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _decode(response: httpx.Response) -> JsonObject:
    """The JSON object of a successful answer. Python's decoder reads
    integers as ints of any size, so u64 seeds stay exact."""
    try:
        data = json.loads(response.content)
    except ValueError as err:
        raise McqError(
            f"{response.request.method} {response.request.url} answered {response.status_code} "
            "with a body that is not JSON; is this an mcq server?"
        ) from err
    if not isinstance(data, dict):
        raise McqError(f"{response.request.url} answered with JSON that is not an object")
    return data


def _pause_after(started: float) -> None:
    """Keeps two reads of one wait at least :data:`_MIN_GAP_SECONDS` apart."""
    early = _MIN_GAP_SECONDS - (time.monotonic() - started)
    if early > 0:
        time.sleep(early)


def _duration(seconds: float) -> str:
    """A ``?wait=`` value the server accepts: whole milliseconds."""
    return f"{max(0, round(seconds * 1000))}ms"


def _key(id: Id) -> str:
    """The id as it goes into a path (escaped, so no id can change the route)."""
    if isinstance(id, (Job, Batch, BatchStatus)):
        id = id.id
    return quote(str(id), safe="")


def _target(id: Id) -> tuple[Kind | None, str]:
    """The kind of work ``id`` names, when its type tells, and its key."""
    if isinstance(id, Job):
        return "job", _key(id)
    if isinstance(id, (Batch, BatchStatus)):
        return "batch", _key(id)
    return None, _key(id)


def _unknown(err: ProblemError, key: str) -> ProblemError:
    """A job lookup's 404 after a batch lookup's: the id names neither."""
    if err.status != 404 or err.type != _NOT_FOUND:
        return err
    return ProblemError(err.status, err.type, err.title, f"no job or batch with id {key}")
