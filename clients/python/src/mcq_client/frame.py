"""Results as a pandas DataFrame, read from the server's CSV table
(``GET /v1/batches/{id}/results``). pandas is an optional dependency,
imported only here and only when a frame is asked for."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import IO, Any

FLOAT_COLUMNS = (
    "price",
    "std_error",
    "ci95_low",
    "ci95_high",
    "delta",
    "delta_std_error",
    "queue_wait_ms",
    "compute_ms",
    "elapsed_ms",
)
"""Columns that are floats, NaN where a job has no value (no result yet)."""

INTEGER_COLUMNS = {"paths": "Int64", "attempts": "Int64", "seed": "UInt64"}
"""Columns of whole numbers and their nullable pandas types: a missing value
reads as ``<NA>`` instead of turning the column into floats."""

TIME_COLUMNS = ("submitted_at", "started_at", "finished_at")
"""Timestamps, read as timezone-aware (UTC) datetimes, ``NaT`` when missing."""

TEXT_COLUMNS = ("job_id", "state", "method", "error")
"""Columns kept as text whatever they hold."""


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as err:
        raise ImportError(
            "results_frame needs pandas, which is not installed: "
            "pip install 'mcq-client[pandas]' (or pip install pandas)"
        ) from err
    return pandas


def _major(version: str) -> int:
    """The major number of a version string such as ``2.2.3``."""
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else 0


class ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks (a streamed answer),
    so that the CSV parser reads the table as it arrives."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__()
        self._chunks = chunks
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = chunk
        view = memoryview(buffer).cast("B")
        size = min(len(view), len(self._pending))
        view[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def frame_from_csv(source: IO[bytes]) -> Any:
    """A DataFrame from a results table in CSV: one row per job, the
    columns in the table's order (``job_id``, ``state``, the fields of the
    job's grid point or the spec fields that vary, ``price``, …).

    Numbers are parsed back to the exact doubles the server wrote; seeds are an exact ``UInt64``
    column, ``paths`` and ``attempts`` ``Int64``; the timestamps are UTC
    datetimes. Other columns (a grid point's fields) are typed as pandas
    infers them.
    """
    pd = _pandas()
    dtypes: dict[str, Any] = {name: str for name in TEXT_COLUMNS}
    dtypes.update(INTEGER_COLUMNS)
    dtypes.update((name, "float64") for name in FLOAT_COLUMNS)
    header = source.readline()
    names = header.decode().rstrip("\r\n").split(",") if header.strip() else []
    present = {name: dtype for name, dtype in dtypes.items() if name in names}
    # pandas before 3 parses floats to within an ulp or so unless asked for
    # the exact round trip; from 3 on that is the default and the option
    # is deprecated.
    exact = {"float_precision": "round_trip"} if _major(pd.__version__) < 3 else {}
    # The header has been read: parse the rest with its names.
    frame = pd.read_csv(
        source,
        names=names,
        header=None,
        dtype=present,
        keep_default_na=False,
        na_values={name: [""] for name in names},
        **exact,
    )
    for name in TIME_COLUMNS:
        if name in frame.columns:
            frame[name] = pd.to_datetime(frame[name], utc=True)
    return frame
