"""Results tables read into DataFrames, from CSV written here: types,
missing values, exact numbers, and the message when pandas is missing."""

from __future__ import annotations

import io
import math
import sys

import pytest

from mcq_client.frame import ChunkReader, frame_from_csv

HEADER = (
    "job_id,state,exercise,option,price,std_error,ci95_low,ci95_high,delta,delta_std_error,"
    "paths,seed,method,attempts,queue_wait_ms,compute_ms,elapsed_ms,submitted_at,started_at,"
    "finished_at,error"
)
ROWS = [
    "a,succeeded,25,call,9.530286028882001,0.0165,9.49,9.57,0.61,0.001,1000,9007199254740991,"
    "mc,1,1.5,20.25,19.5,2026-12-01T10:00:00+00:00,2026-12-01T10:00:01+00:00,"
    "2026-12-01T10:00:02+00:00,",
    'b,failed,30,put,,,,,,,,9007199254740990,mc,3,,,,2026-12-01T10:00:00+00:00,,,"boom, twice"',
    "c,queued,35,NA,,,,,,,,,exact,0,,,,2026-12-01T10:00:00+00:00,,,",
]


def _csv(rows: list[str]) -> io.BytesIO:
    return io.BytesIO(("\r\n".join([HEADER, *rows]) + "\r\n").encode())


def test_columns_keep_their_types_and_missing_values() -> None:
    pd = pytest.importorskip("pandas")
    frame = frame_from_csv(_csv(ROWS))
    assert list(frame.columns) == HEADER.split(",")
    assert list(frame["job_id"]) == ["a", "b", "c"]
    assert frame["price"][0] == 9.530286028882001, "numbers read back exactly"
    assert frame["price"].dtype == "float64" and math.isnan(frame["price"][1])
    assert str(frame["seed"].dtype) == "UInt64"
    assert list(frame["seed"])[:2] == [2**53 - 1, 2**53 - 2]
    assert frame["seed"].isna().tolist() == [False, False, True]
    assert str(frame["paths"].dtype) == "Int64" and frame["paths"].isna().tolist()[1]
    assert list(frame["attempts"]) == [1, 3, 0]
    assert list(frame["exercise"]) == [25, 30, 35]
    # Text stays text: "NA" is an option's value here, not a missing one.
    assert frame["option"][2] == "NA"
    assert frame["error"][1] == "boom, twice" and pd.isna(frame["error"][0])
    assert frame["finished_at"][0] == pd.Timestamp("2026-12-01T10:00:02Z")
    assert pd.isna(frame["started_at"][2])
    assert isinstance(frame, pd.DataFrame)


def test_chosen_columns_and_a_streamed_body() -> None:
    pytest.importorskip("pandas")
    body = b"price,seed\r\n9.5,7\r\n,8\r\n"
    # The body split mid-line and mid-number, as a stream may deliver it.
    chunks = iter([body[:9], body[9:15], b"", body[15:]])
    frame = frame_from_csv(io.BufferedReader(ChunkReader(chunks)))
    assert list(frame.columns) == ["price", "seed"]
    assert frame["price"][0] == 9.5 and math.isnan(frame["price"][1])
    assert list(frame["seed"]) == [7, 8]


def test_without_pandas_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry makes `import pandas` fail as if it were not installed.
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install 'mcq-client\[pandas\]'"):
        frame_from_csv(_csv(ROWS))
