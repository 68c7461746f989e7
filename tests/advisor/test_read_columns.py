"""Queries priced by the columns they read (pure: Arrow, deltalake; no Spark)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from lakelayout.advisor.benefit import estimate
from lakelayout.advisor.columns import column_shares, query_shares
from lakelayout.advisor.costmodel import DEFAULTS
from lakelayout.table.datafile import column_bytes


def test_a_query_reads_the_sum_of_its_columns_shares_and_unknown_stays_whole() -> None:
    shares = {"a": 0.5, "b": 0.3, "c": 0.2}
    got = query_shares([["a"], ["b", "c"], None, ["a", "zz"], [], ["a", "b", "c"]], shares)
    assert got.tolist() == pytest.approx([0.5, 0.5, 1.0, 1.0, 0.0, 1.0])
    assert query_shares([["a"], None], {}).tolist() == [1.0, 1.0]  # no footers: whole files


def test_shares_come_from_the_footers_and_partition_columns_are_not_in_them(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(3)
    n = 20_000
    data = pa.table(
        {
            "small": pa.array(rng.integers(0, 4, n), pa.int8()),
            "wide": pa.array([f"{'x' * 40}{i}" for i in rng.integers(0, 10**9, n)]),
            "p": pa.array(["u", "v"] * (n // 2)),
        }
    )
    path = str(tmp_path / "t")
    write_deltalake(path, data, partition_by=["p"])
    files = [f.split(path + "/", 1)[-1] for f in DeltaTable(path).file_uris()]
    shares = column_shares(path, files, {})
    assert set(shares) == {"small", "wide"} and sum(shares.values()) == pytest.approx(1.0)
    assert shares["wide"] > 0.9  # the strings are most of the bytes
    sizes = {"small": 0, "wide": 0}
    for f in files:
        meta = pq.read_metadata(f"{path}/{f}")
        for g in range(meta.num_row_groups):
            for c in range(meta.row_group(g).num_columns):
                chunk = meta.row_group(g).column(c)
                sizes[chunk.path_in_schema] += chunk.total_compressed_size
    assert shares["small"] == pytest.approx(sizes["small"] / sum(sizes.values()))
    # physical names map to logical ones; a file that cannot be read is left out
    renamed = column_shares(path, [*files, "missing.parquet"], {"wide": "comment"})
    assert set(renamed) == {"small", "comment"} and renamed["comment"] == shares["wide"]
    assert column_shares(path, ["missing.parquet"], {}) == {}


def test_footer_bytes_go_to_their_top_level_column_whatever_the_nesting(tmp_path: Path) -> None:
    n = 2_000
    point = pa.struct([("x", pa.int32()), ("y", pa.string())])
    data = pa.table(
        {
            "a.b": pa.array(range(n), pa.int64()),  # a dot in a top-level name
            "fixed": pa.array([[{"x": i, "y": str(i)}] * 2 for i in range(n)],
                              pa.list_(point, 2)),
            "m": pa.array([[("k", {"x": i, "y": "v"})] for i in range(n)],
                          pa.map_(pa.string(), point)),
            "tail": pa.array([f"s{i}" for i in range(n)]),
        }
    )  # fmt: skip
    pq.write_table(data, tmp_path / "f.parquet", row_group_size=500)
    meta = pq.read_metadata(tmp_path / "f.parquet")
    # by position: "a.b" 1 leaf, fixed 2 (x, y), m 3 (key, x, y), tail 1
    owners = ["a.b", "fixed", "fixed", "m", "m", "m", "tail"]
    want = dict.fromkeys(owners, 0)
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            want[owners[c]] += meta.row_group(g).column(c).total_compressed_size
    assert meta.num_columns == len(owners)
    assert column_bytes(meta) == want


def test_only_the_byte_term_of_a_saving_follows_the_columns_read() -> None:
    now, after = np.array([1.0, 0.5, 0.25]), np.array([0.2, 0.1, 0.25])
    args = dict(
        family="zorder", layout="zorder(a)", fractions_now=now, fractions_after=after,
        candidate_bytes=10**9, candidate_files=100, files_after=100, other_bytes=0,
        model=DEFAULTS, expected=50.0, margin=1.5, n_curve=1, n_sop=0, n_additional=0,
    )  # fmt: skip
    whole = estimate(**args)  # type: ignore[arg-type]
    shares = np.array([0.1, 0.5, 1.0])
    narrow = estimate(**args, read_shares=shares)  # type: ignore[arg-type]
    # the bytes reported are the files' (what pruning keeps, as the decision log measures)
    assert narrow.bytes_now_per_query == whole.bytes_now_per_query
    assert narrow.cost_seconds == whole.cost_seconds
    per_file = DEFAULTS.query_seconds_per_file * 100 * float(np.mean(now - after))
    per_byte = DEFAULTS.query_seconds_per_byte * 10**9
    assert whole.saving_seconds == pytest.approx(50 * (per_file + per_byte * np.mean(now - after)))
    assert narrow.saving_seconds == pytest.approx(
        50 * (per_file + per_byte * np.mean((now - after) * shares))
    )
    assert narrow.saving_seconds < whole.saving_seconds
    everything = estimate(**args, read_shares=np.ones(3))  # type: ignore[arg-type]
    assert dataclasses.astuple(everything) == dataclasses.astuple(whole)
