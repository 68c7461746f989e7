"""Logs UDF and skipping indexes in the replay; the taxi workload; ``bench taxi`` end to end."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakelayout.evaluation import datasets
from lakelayout.evaluation import workloads as wl
from lakelayout.evaluation.datasets import (
    LOG_SCANNER,
    LOGS_INDEXES,
    LOGS_UDFS,
    logs_dataset,
    taxi_dataset,
)
from lakelayout.evaluation.policies import make_policies
from lakelayout.evaluation.replay import MatchCounter, ReplayConfig, replay
from lakelayout.expr.parse import parse_predicate

pytestmark = pytest.mark.spark

#: logs templates the declared indexes can help (plus the UDF)
INDEXED_TEMPLATES = ["udf_agent", "db_suffix", "url_prefix", "month", "box"]


def _counts(spark: Any, df: Any, queries: list[wl.Query]) -> dict[int, int]:
    from pyspark.sql import functions as F

    sums = [F.sum(F.expr(q.sql).cast("int")).alias(f"q{q.i}") for q in queries]
    row = df.select(*sums).collect()[0]
    return {q.i: int(row[f"q{q.i}"] or 0) for q in queries}


def test_driver_counts_udf_matches_with_the_python_function(tmp_path: Path) -> None:
    """The replay's driver-side count evaluates UDF calls with the registered function."""
    import pyarrow.parquet as pq

    from lakelayout.evaluation.datasets import LOG_AGENTS

    agents = [LOG_SCANNER, LOG_AGENTS[4], LOG_SCANNER, None, LOG_AGENTS[0]]
    pq.write_table(pa.table({"user_agent": pa.array(agents, pa.string())}), tmp_path / "f.parquet")
    schema = pa.schema([("user_agent", pa.string())])
    counter = MatchCounter(str(tmp_path), ["user_agent"], LOGS_UDFS)
    for sql, expected in (
        ("getagentname(user_agent) = 'zgrab'", 2),
        ("getagentname(user_agent) IN ('curl', 'Chrome')", 2),
        ("getagentname(user_agent) = 'zgrab' OR user_agent LIKE 'curl%'", 3),
        ("getagentname(user_agent) != 'zgrab'", 2),  # NULL agent: NULL, not kept
    ):
        predicate = parse_predicate(sql, schema, functions={"getagentname": pa.string()})
        assert int(counter.counts(["f.parquet"], predicate).sum()) == expected, sql


def test_spark_accepts_every_taxi_predicate(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ds = taxi_dataset(spark, 5000, tmp_path, batches=2, seed=2)
    queries = wl.generate(wl.TAXI_TEMPLATES, 24, seed=5, shape="mixed")
    counts = _counts(spark, ds.frame(spark), queries)
    assert len(counts) == 24
    by_template: dict[str, int] = {}
    for q in queries:
        by_template[q.template] = by_template.get(q.template, 0) + counts[q.i]
    # ranges are drawn where the data is: every template matches some rows
    assert all(n > 0 for n in by_template.values()), by_template


def test_staged_batches_are_their_own_directories_in_arrival_order(
    spark, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A staged dataset keeps each insert batch in its own directory (so an insert reads
    only its batch), and batch ``k`` is exactly the k-th slice of the arrival order."""
    import pyarrow.parquet as pq

    from lakelayout.evaluation.datasets import BATCH_COLUMN, taxi_arrow

    rows, batches, rows_per_file = 3000, 2, 600
    ds = taxi_dataset(spark, rows, tmp_path, batches=batches, seed=2)
    assert ds.rows == rows
    expected = taxi_arrow(rows, 2)
    for k in range(batches):
        directory = Path(ds.path) / f"{BATCH_COLUMN}={k}"
        staged = sum(pq.ParquetFile(f).metadata.num_rows for f in directory.glob("*.parquet"))
        assert staged == rows // batches, k
        df = ds.batch(spark, k, rows_per_file)
        assert df.rdd.getNumPartitions() == 3  # ceil(1500 / 600) ranges, one file each
        from pyspark.sql import functions as F

        got = df.withColumn("_part", F.spark_partition_id()).toArrow()
        want = expected.slice(k * rows // batches, rows // batches)
        # arrival order: every partition holds a sorted range of pickup times, and the
        # ranges follow each other (partition i's last time <= partition i+1's first)
        times = got.column("pickup_ts").to_pylist()
        parts = got.column("_part").to_pylist()
        ranges = []
        for part in sorted(set(parts)):
            mine = [t for t, p in zip(times, parts, strict=True) if p == part]
            assert mine == sorted(mine), part
            ranges.append((mine[0], mine[-1]))
        assert all(a[1] <= b[0] for a, b in pairwise(ranges)), ranges
        assert sorted(times) == want.column("pickup_ts").to_pylist()
        fares = sorted(zip(times, got.column("fare_amount").to_pylist(), strict=True))
        assert fares == sorted(
            zip(
                want.column("pickup_ts").to_pylist(),
                want.column("fare_amount").to_pylist(),
                strict=True,
            )
        )
        # the batch's cuts were found once: asked again (next policy), it is the same split
        again = ds.batch(spark, k, rows_per_file).withColumn("_part", F.spark_partition_id())
        assert sorted(zip(parts, times, strict=True)) == sorted(
            zip(
                *(again.toArrow().column(c).to_pylist() for c in ("_part", "pickup_ts")),
                strict=True,
            )
        )
        assert len([m for m in datasets._CUTS if m[0] == ds.path and m[2] == k]) == 1

    # staged once: asked again, the copy is reused and no row is generated again
    def generate(*_: Any) -> pa.Table:
        raise AssertionError("the staged copy was generated again")

    monkeypatch.setattr(datasets, "taxi_arrow", generate)
    assert taxi_dataset(spark, rows, tmp_path, batches=batches, seed=2) == ds


def test_indexes_skip_more_files_and_both_modes_agree(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ds = logs_dataset(spark, 8000, tmp_path, batches=2, seed=3)
    queries = wl.generate(
        wl.LOGS_TEMPLATES, 10, seed=2, shape="drift", segment_length=2, names=INDEXED_TEMPLATES
    )
    out = {}
    # spark mode also checks, per query, that Table.scan kept the files the metadata kept
    for name, mode, indexes in (("plain", "logical", False), ("indexed", "spark", True)):
        config = ReplayConfig(
            mode=mode,
            rows_per_file=1000,
            sample_rows=2000,
            full_scans=1,
            indexes=indexes,
            warmup=False,
            retime=False,
        )
        out[name] = replay(
            make_policies(["none", "sorted"]), ds, queries, tmp_path / name, config, spark=spark
        )
    assert out["indexed"]["config"]["indexes"] == [i.name for i in LOGS_INDEXES]
    assert out["plain"]["config"]["indexes"] == []
    for plain, indexed in zip(out["plain"]["runs"], out["indexed"]["runs"], strict=True):
        pq, iq = plain["queries"], indexed["queries"]
        # same answers; never more files with the indexes, strictly fewer overall
        assert [q["rows_matching"] for q in pq] == [q["rows_matching"] for q in iq]
        assert all(i["files_kept"] <= p["files_kept"] for p, i in zip(pq, iq, strict=True))
        assert indexed["totals"]["files_kept"] < plain["totals"]["files_kept"]
        udf = [(p["files_kept"], i["files_kept"]) for p, i in zip(pq, iq, strict=True)
               if p["template"] == "udf_agent"]  # fmt: skip
        assert udf and sum(i for _, i in udf) < sum(p for p, _ in udf)
        # Spark (UDF registered by the table) returns exactly the rows counted on the driver
        assert all(q["rows_returned"] == q["rows_matching"] for q in iq)
    # rewritten files got metadata: the sorted policy's final table is fully covered
    from lakelayout.api import Table

    table = Table(str(tmp_path / "indexed" / "tables" / "sorted"), spark=spark, udfs=LOGS_UDFS)
    described = table.indexes.describe()
    assert len(described) == len(LOGS_INDEXES)
    assert all(d.usable and d.missing_files == 0 and d.stale_files == 0 for d in described)


def test_scanner_only_in_its_bursts(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    ds = logs_dataset(spark, 6000, tmp_path, batches=1, seed=4)
    days = {
        r["d"]
        for r in ds.frame(spark)
        .where(F.col("user_agent") == LOG_SCANNER)
        .select(F.dayofyear("ts").alias("d"))
        .distinct()
        .collect()
    }
    assert days and days <= {31, 96, 161}  # LOG_SCAN_DAYS, 0-based from Jan 1


def test_bench_taxi_end_to_end(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from lakelayout.cli import app

    policies = ["none", "sorted", "qdtree"]
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["bench", "taxi", "--rows", "4000", "--queries", "8", "--batches", "2",
         "--rows-per-file", "1000", "--segment", "2", "--policies", ",".join(policies),
         "--out", str(out), "--work-dir", str(tmp_path / "data")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    assert results["dataset"]["name"] == "taxi"
    assert [r["policy"] for r in results["runs"]] == policies
    assert all(len(r["queries"]) == 8 for r in results["runs"])
    assert {q.template for q in wl.load(out / "workload.jsonl")} <= set(wl.TAXI_TEMPLATES)
    html = (out / "report.html").read_text()
    assert all(p in html for p in policies)


def test_bench_refuses_fit_before_draw_without_the_join_before_anything_runs(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from lakelayout.cli import app

    result = CliRunner().invoke(
        app,
        ["bench", "taxi", "--rows", "4000", "--queries", "8", "--policies", "oreo",
         "--fit-before-draw", "--out", str(tmp_path / "run"),
         "--work-dir", str(tmp_path / "data")],
    )  # fmt: skip
    assert result.exit_code != 0
    assert "fit_before_draw needs policy 'oreo' with mid_phase_join" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--mode", "nosuch"], "unknown replay mode 'nosuch'"),
        (["--shape", "nosuch"], "unknown workload shape 'nosuch'"),
        (["--queries", "-1"], "the number of queries must be >= 0, got -1"),
        (["--queries", "0"], "the workload has no queries"),
        (["--rows-per-file", "0"], "rows_per_file must be an integer >= 1, got 0"),
        (["--rows", "-1"], "rows must be an integer >= 1, got -1"),
        (["--batches", "0"], "batches must be an integer >= 1, got 0"),
    ],
)
def test_bench_refuses_bad_replay_options_before_staging_the_dataset(
    tmp_path: Path, option: list[str], said: str
) -> None:
    """A bad --mode, --shape or --queries was found once the dataset was staged: a
    minute of work and 54 MB written before the error (an audit)."""
    from typer.testing import CliRunner

    from lakelayout.cli import app

    result = CliRunner().invoke(
        app,
        ["bench", "taxi", "--rows", "4000", "--out", str(tmp_path / "run"),
         "--work-dir", str(tmp_path / "data"), *option],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert said in result.output and "Traceback" not in result.output
    assert "staged" not in result.output
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()


def test_bench_refuses_a_report_folder_it_cannot_write_before_staging(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from lakelayout.cli import app

    (tmp_path / "a-file").write_text("x")
    result = CliRunner().invoke(
        app,
        ["bench", "taxi", "--rows", "4000", "--out", str(tmp_path / "a-file" / "run"),
         "--work-dir", str(tmp_path / "data")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"cannot write the report to {tmp_path / 'a-file' / 'run'}" in result.output
    assert not (tmp_path / "data").exists()


def test_bench_online_seed_reseeds_the_reorganizer_alone(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from lakelayout.cli import app

    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["bench", "taxi", "--rows", "4000", "--queries", "8", "--batches", "1",
         "--rows-per-file", "1000", "--policies", "oreo", "--alpha", "2",
         "--online-seed", "7", "--out", str(out), "--work-dir", str(tmp_path / "data")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["seed"] == 0  # the stream's seed is --seed's
    (run,) = results["runs"]
    assert ", seed 7, " in run["description"]
