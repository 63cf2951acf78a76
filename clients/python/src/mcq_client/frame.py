"""Results as a pandas DataFrame. pandas is an optional dependency, imported
only here and only when a frame is asked for."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .views import Result

# pandas' nullable integer types hold a missing value without turning the
# column into floats, which would round seeds above 2^53.
_INT64_MAX = 2**63 - 1


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as err:
        raise ImportError(
            "results_frame needs pandas, which is not installed: "
            "pip install 'mcq-client[pandas]' (or pip install pandas)"
        ) from err
    return pandas


def _integer_column(pd: Any, values: list[Any]) -> Any:
    """An exact integer column when every present value is an int."""
    present = [v for v in values if v is not None]
    if not present or not all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return values
    dtype = "UInt64" if min(present) >= 0 and max(present) > _INT64_MAX else "Int64"
    return pd.array(values, dtype=dtype)


def _float_column(values: list[float | None]) -> list[float]:
    """Plain floats, NaN where a job has no result yet."""
    return [math.nan if v is None else v for v in values]


def results_frame(results: Iterable[Result]) -> Any:
    """One row per job, in submission order: ``job_id``, ``state``, every
    spec field (except the seed, which has its own column), ``price``,
    ``std_error``, ``ci95_low``, ``ci95_high``, ``paths``, ``seed`` and
    ``error``; ``delta`` and ``delta_std_error`` after ``ci95_high`` when
    some job reports a delta. Prices are floats, NaN for a job without a result; integer
    columns use pandas' nullable integer types, so seeds stay exact
    (``UInt64``) and a missing value reads as ``<NA>``."""
    pd = _pandas()
    rows = list(results)
    spec_fields: dict[str, None] = {}
    for row in rows:
        spec_fields.update((name, None) for name in row.spec if name != "seed")
    columns: dict[str, Any] = {
        "job_id": [r.job_id for r in rows],
        "state": [r.state for r in rows],
    }
    for name in spec_fields:
        columns[name] = _integer_column(pd, [r.spec.get(name) for r in rows])
    columns["price"] = _float_column([r.price for r in rows])
    columns["std_error"] = _float_column([r.std_error for r in rows])
    columns["ci95_low"] = _float_column([r.ci95[0] if r.ci95 else None for r in rows])
    columns["ci95_high"] = _float_column([r.ci95[1] if r.ci95 else None for r in rows])
    if any(r.delta is not None for r in rows):
        columns["delta"] = _float_column([r.delta for r in rows])
        columns["delta_std_error"] = _float_column([r.delta_std_error for r in rows])
    columns["paths"] = pd.array([r.paths for r in rows], dtype="Int64")
    # Seeds are below 2^53 (results stored by older servers may hold any
    # u64): always unsigned, never float.
    columns["seed"] = pd.array([r.seed for r in rows], dtype="UInt64")
    columns["error"] = [r.error for r in rows]
    return pd.DataFrame(columns)
