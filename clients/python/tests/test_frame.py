"""Results as a DataFrame, from results built here: missing values and the
message when pandas is not installed."""

from __future__ import annotations

import dataclasses
import math
import sys

import pytest

from mcq_client import Result
from mcq_client.frame import results_frame


def _result(job_id: str, state: str, price: float | None, seed: int | None) -> Result:
    done = price is not None
    return Result(
        job_id=job_id,
        state=state,
        spec={"runs": 1000, "target_std_error": None, "seed": seed, "option": "call"},
        price=price,
        std_error=0.5 if done else None,
        ci95=(price - 1, price + 1) if price is not None else None,
        paths=1000 if done else None,
        seed=seed,
        error=None if done or state != "failed" else "kernel panicked",
    )


def test_unfinished_jobs_are_missing_values_and_seeds_stay_exact() -> None:
    pd = pytest.importorskip("pandas")
    frame = results_frame(
        [
            _result("a", "succeeded", 9.5, 2**64 - 1),
            _result("b", "failed", None, 2**53 + 1),
            _result("c", "succeeded", 9.25, None),
        ]
    )
    assert list(frame.columns) == [
        "job_id", "state", "runs", "target_std_error", "option",
        "price", "std_error", "ci95_low", "ci95_high", "paths", "seed", "error",
    ]  # fmt: skip
    assert list(frame["seed"])[:2] == [2**64 - 1, 2**53 + 1]
    assert frame["seed"].isna().tolist() == [False, False, True]
    assert str(frame["seed"].dtype) == "UInt64"
    assert str(frame["paths"].dtype) == "Int64" and frame["paths"].isna().tolist()[1]
    assert str(frame["runs"].dtype) == "Int64"
    assert frame["price"].dtype == "float64" and math.isnan(frame["price"][1])
    assert frame["ci95_high"][0] == 10.5
    assert frame["error"][1] == "kernel panicked"
    assert isinstance(frame, pd.DataFrame)


def test_delta_columns_appear_when_a_job_reports_delta() -> None:
    pytest.importorskip("pandas")
    plain = _result("a", "succeeded", 9.5, 1)
    with_delta = dataclasses.replace(plain, job_id="b", delta=0.62, delta_std_error=0.001)
    assert "delta" not in results_frame([plain]).columns
    frame = results_frame([plain, with_delta])
    columns = list(frame.columns)
    assert columns[columns.index("ci95_high") + 1 : columns.index("paths")] == [
        "delta",
        "delta_std_error",
    ]
    assert math.isnan(frame["delta"][0]) and frame["delta"][1] == 0.62
    assert frame["delta_std_error"][1] == 0.001


def test_without_pandas_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry makes `import pandas` fail as if it were not installed.
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install 'mcq-client\[pandas\]'"):
        results_frame([])
