"""``lakelayout log / advise / decisions / calibrate`` on real tables."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakelayout.advisor.calibrate import QUERY_SHARES, _queries, _table, calibrate
from lakelayout.advisor.costmodel import DEFAULTS, CostModel
from lakelayout.api import Table
from lakelayout.cli import app

pytestmark = pytest.mark.spark
runner = CliRunner()


@pytest.fixture(scope="module")
def logged(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A table with 12 logged range scans, and a cost model under which a rewrite pays."""
    root = tmp_path_factory.mktemp("advise")
    rng = np.random.default_rng(1)
    data = pa.table({"id": np.arange(6000), "ts": rng.uniform(0, 1000, 6000)})
    df = spark.createDataFrame(data).repartitionByRange(6, "id")
    t = Table.create(str(root / "t"), df, target_file_size=15_000)
    for lo in rng.uniform(0, 950, 12):
        t.scan(f"ts BETWEEN {lo:.1f} AND {lo + 30:.1f}", columns=["id"])
    cheap = dataclasses.replace(
        DEFAULTS, rewrite_fixed_seconds=0.01, query_seconds_per_byte=1e-4, source="cheap (test)"
    )
    return t.uri, cheap.save(root / "cheap.json")


def test_log_prints_the_newest_queries(logged: tuple[str, Path]) -> None:
    uri, _ = logged
    result = runner.invoke(app, ["log", uri, "--last", "3"])
    assert result.exit_code == 0, result.output
    assert "the 3 newest queries" in result.output
    assert result.output.count("ts >= ") == 3 and "/6" in result.output


def test_advise_explains_then_applies(logged: tuple[str, Path]) -> None:
    uri, model = logged
    version = Table(uri).version
    dry = runner.invoke(app, ["advise", uri, "--model", str(model)])
    assert dry.exit_code == 0, dry.output
    assert "chosen     curve ts: in 12 of 12 queries" in dry.output
    assert "cost model: cheap (test)" in dry.output
    assert "rewrite: " in dry.output and "(run with --apply to rewrite)" in dry.output
    assert Table(uri).version == version

    applied = runner.invoke(app, ["advise", uri, "--model", str(model), "--apply"])
    assert applied.exit_code == 0, applied.output
    assert "rewrote 6 files" in applied.output
    assert Table(uri).version > version

    for lo in (100, 400, 700):
        Table(uri).scan(f"ts BETWEEN {lo} AND {lo + 30}", columns=["id"])
    listed = runner.invoke(app, ["decisions", uri])
    assert listed.exit_code == 0, listed.output
    assert "recommended (not" in listed.output and "applied" in listed.output
    # measured first: the 3 queries since, and the 12 the decision was priced on
    (measured,) = [line for line in listed.output.splitlines() if "measured (" in line]
    assert "3 following queries" in measured and "the 12 queries it was priced on" in measured
    # counts as the reasons write them (4.87e+03 was printed for 4,872: an audit)
    (expected,) = {
        d["expected_queries"] for d in Table(uri).advisor.decisions() if d["expected_queries"]
    }
    assert f"over {expected:,.0f} queries" in listed.output


def test_advisor_commands_fail_in_one_line(tmp_path: Path, logged: tuple[str, Path]) -> None:
    missing = runner.invoke(app, ["log", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "no Delta table" in missing.output
    assert len(missing.output.strip().splitlines()) == 1
    bad = runner.invoke(app, ["advise", logged[0], "--model", str(tmp_path / "absent.json")])
    assert bad.exit_code == 2 and "no cost model at" in bad.output
    assert len(bad.output.strip().splitlines()) == 1


def test_calibration_queries_keep_each_points_fastest_round(spark: Any, tmp_path: Path) -> None:
    tables = [_table(spark, tmp_path / "a", 3000), _table(spark, tmp_path / "b", 6000)]
    points = _queries(tables, rounds=2)
    assert len(points) == len(tables) * len(QUERY_SHARES)  # one per table and share
    full = [p for p in points if p.files_read == 8]  # every file (share None), per table
    totals = sorted(int(t.snapshot().files.total_bytes) for t in tables)
    assert sorted(p.bytes_read for p in full) == totals
    assert all(0 < p.seconds < 60 for p in points)
    assert min(p.bytes_read for p in points) < min(totals) / 4  # id < 10 %: few files read


def test_calibrate_measures_saves_and_is_reused(spark: Any, tmp_path: Path) -> None:
    model = calibrate(
        spark, sizes=(2000, 6000), work_dir=tmp_path, many_files=(24,), fit_rows=(500, 1000)
    )
    assert model.source == (
        "calibrated on tables of 2,000, 6,000 rows (rewrites also on 30-column tables of "
        "6,000 and shuffled at 6,000; queries and a Z-order each way also on 24,000, queried "
        "again in 24 files; fitting on samples of 500, 1,000 rows)"
    )
    assert model.fit_seconds_per_row > 0
    assert set(model.quality) == {"rewrite_r2", "query_r2", "statistics_r2"}
    # an index job costs seconds whatever it reads: the builds' level is its fixed cost
    assert model.statistics_fixed_seconds > 0
    assert model.rewrite_seconds(10**6, 4) > 0 and model.query_seconds(10**6) > 0
    path = model.save(tmp_path / "cfg" / "costmodel.json")
    assert CostModel.load(path) == model
    assert list(tmp_path.iterdir()) == [tmp_path / "cfg"]  # the generated tables are gone


def test_calibrate_refuses_where_it_cannot_save_before_measuring(tmp_path: Path) -> None:
    """A calibration takes minutes: a path it cannot save to is refused first, with one
    line and exit code 2 (a calibration that ran would have printed its progress)."""
    import os

    (tmp_path / "a-file").write_text("x")
    (tmp_path / "a-folder").mkdir()
    # the save replaces the file: `--out /dev/null` replaced the device node with a JSON
    # file (an audit); a pipe stands for it here
    os.mkfifo(tmp_path / "a-pipe")
    for out, reason in [
        (tmp_path / "a-pipe", "it is not a regular file"),
        (tmp_path / "a-file" / "sub" / "model.json", "is a file, not a folder"),
        (tmp_path / "a-folder", "it is a folder"),
        # access() allows root to write in /proc: the save failed after the calibration,
        # a raw traceback (an audit); as another user /proc is not writable
        (Path("/proc/nope/model.json"), "/proc "),
        # a name the system refuses: found by the save after the calibration (a review)
        (tmp_path / ("m" * 256 + ".json"), "is longer than 255 bytes"),
    ]:
        result = runner.invoke(app, ["calibrate", "--quick", "--out", str(out)])
        assert result.exit_code == 2, result.output
        (line,) = result.output.splitlines()
        assert line.startswith(f"error: cannot save the cost model to {out}") and reason in line
    assert (tmp_path / "a-pipe").is_fifo()
    # through a link the file it names is written, and the link stays
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("{}")
    link.symlink_to(real)
    assert DEFAULTS.save(link) == real and link.is_symlink()
    assert CostModel.load(link) == DEFAULTS
