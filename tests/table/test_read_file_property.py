"""Properties of reading one data file with pyarrow (pure: no JVM).

* A scan refuses up front (from the statistics, then the footer) exactly the
  files in Spark's legacy calendar that its read tasks would refuse as they read
  them: no file the tasks would refuse gets through to the user's first action,
  and none they read is refused.
* Columns a file names in another case than the table are read as stored, as
  Spark's reader and Delta's find them.

``LAKELAYOUT_FUZZ_EXAMPLES`` scales the examples (``make fuzz``).
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lakelayout.errors import UnsupportedTable
from lakelayout.stats.model import ColumnStats
from lakelayout.table.datafile import (
    DataFile,
    TableFormat,
    calendar_unsettled,
    check_file_calendar,
    read_data_file,
)
from tests.expr.predicates import EDGE_DAYS as PREDICATE_EDGE_DAYS

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "60"))
UTC = dt.UTC

#: the ends of DATE, the epoch and the Julian / Gregorian switch, and the days around
#: 1900, from which lakelayout takes the two calendars to agree
EDGE_DAYS = [
    *PREDICATE_EDGE_DAYS,
    dt.date(1899, 12, 31),
    dt.date(1900, 1, 1),
    dt.date(1900, 1, 2),
]
days = st.one_of(st.sampled_from(EDGE_DAYS), st.dates())
EDGE_MOMENTS = [
    dt.datetime(1899, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    dt.datetime(1900, 1, 1, tzinfo=UTC),
    dt.datetime(1900, 1, 1, 23, 59, 59, 999999, tzinfo=UTC),
    dt.datetime(1900, 1, 2, tzinfo=UTC),
    dt.datetime(1900, 1, 2, 0, 0, 0, 1, tzinfo=UTC),
    dt.datetime(1, 1, 1, tzinfo=UTC),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]
moments = st.one_of(
    st.sampled_from(EDGE_MOMENTS),
    st.datetimes(timezones=st.just(UTC)),
)
#: footers as Spark writes them: no key (pyarrow, delta-rs), a legacy key, or the
#: version of a Spark that wrote in the legacy calendar without saying so
FOOTERS = [
    {},
    {b"org.apache.spark.version": b"3.5.0"},
    {b"org.apache.spark.version": b"3.5.0", b"org.apache.spark.legacyDateTime": b""},
    {b"org.apache.spark.version": b"3.5.0", b"org.apache.spark.legacyINT96": b""},
    {b"org.apache.spark.version": b"3.0.3"},
    {b"org.apache.spark.version": b"2.4.8"},
]
SCHEMA = pa.schema([("d", pa.date32()), ("ts", pa.timestamp("us", "UTC"))])


def _write(folder: Path, data: pa.Table, keys: dict[bytes, bytes], int96: bool) -> DataFile:
    name = f"{uuid.uuid4().hex}.parquet"  # the up-front check remembers plain files by name
    pq.write_table(
        data.replace_schema_metadata(keys), folder / name, use_deprecated_int96_timestamps=int96
    )
    return DataFile(name, (folder / name).stat().st_size, data.num_rows)


def _refused(call: object) -> bool:
    try:
        call()  # type: ignore[operator]
    except UnsupportedTable:
        return True
    return False


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@example(
    rows=[(dt.date(2020, 1, 1), dt.datetime(1899, 12, 31, 23, tzinfo=UTC))],
    footer=3,
    int96=True,
    known=(True, True),
)
@example(rows=[(dt.date(1899, 12, 31), None)], footer=2, int96=False, known=(False, True))
@given(
    rows=st.lists(st.tuples(st.none() | days, st.none() | moments), min_size=1, max_size=5),
    footer=st.integers(0, len(FOOTERS) - 1),
    int96=st.booleans(),
    known=st.tuples(st.booleans(), st.booleans()),
)
def test_property_a_scan_refuses_up_front_exactly_what_its_tasks_refuse(
    tmp_path: Path,
    rows: list[tuple[dt.date | None, dt.datetime | None]],
    footer: int,
    int96: bool,
    known: tuple[bool, bool],
) -> None:
    data = pa.table(
        {
            "d": pa.array([r[0] for r in rows], pa.date32()),
            "ts": pa.array([r[1] for r in rows], pa.timestamp("us", "UTC")),
        }
    )
    file = _write(tmp_path, data, FOOTERS[footer], int96)
    fmt = TableFormat.plain(SCHEMA)
    fs = pafs.LocalFileSystem()

    def bounds(name: str, is_known: bool) -> ColumnStats:
        low = data.column(name).combine_chunks()
        least = low.sort().take(pa.array([0])) if low.null_count < len(low) else low[:1]
        value = least if is_known else pa.nulls(1, low.type)  # unknown: NULL
        return ColumnStats(value, value, np.zeros(1, np.int64))

    stats = {"d": bounds("d", known[0]), "ts": bounds("ts", known[1])}
    by_tasks = _refused(lambda: list(read_data_file(fs, str(tmp_path), fmt, file)))
    unsettled = bool(calendar_unsettled(fmt, stats, 1)[0])
    up_front = unsettled and _refused(lambda: check_file_calendar(fs, str(tmp_path), fmt, file))
    assert up_front == by_tasks, (unsettled, FOOTERS[footer], int96)


#: letters whose lower case Spark (Java's Locale.ROOT) and Python agree on (ß has no upper
#: case of one letter: kept as is; Σ is left out: both lower it by its place in the word,
#: so 'XΣ' and 'Xσ' are two names to Spark too)
LETTERS = "abcdeXYZäÖßé"


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    names=st.lists(
        st.text(LETTERS, min_size=1, max_size=4), min_size=1, max_size=4, unique_by=str.lower
    ),
    flips=st.lists(st.booleans(), min_size=16, max_size=16),
    dropped=st.integers(-1, 3),
    data=st.data(),
)
def test_property_columns_in_another_case_are_read_as_stored(
    tmp_path_factory: pytest.TempPathFactory,
    names: list[str],
    flips: list[bool],
    dropped: int,
    data: st.DataObject,
) -> None:
    folder = tmp_path_factory.mktemp("case")
    table = pa.schema([(n, pa.int64()) for n in names])

    def spelt(name: str, k: int) -> str:
        return "".join(
            c.swapcase() if flips[(k + i) % 16] and c.swapcase().lower() == c.lower() else c
            for i, c in enumerate(name)
        )

    values = {n: data.draw(st.lists(st.integers(-9, 9), min_size=2, max_size=2)) for n in names}
    stored = {spelt(n, k): values[n] for k, n in enumerate(names) if k != dropped}
    stored["other_1"] = [0, 0]  # a column the table does not have (and the file's rows)
    file = _write(folder, pa.table(stored), {}, False)
    out = pa.Table.from_batches(
        list(read_data_file(pafs.LocalFileSystem(), str(folder), TableFormat.plain(table), file)),
        schema=table,
    )
    for k, n in enumerate(names):
        assert out.column(n).to_pylist() == ([None, None] if k == dropped else values[n])
