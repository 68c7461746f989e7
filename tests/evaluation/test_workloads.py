"""Workload generators: deterministic per seed, drift segments, JSON lines round trip."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from lakelayout.errors import InvalidOption
from lakelayout.evaluation import workloads as wl


@pytest.mark.parametrize("templates", [wl.TPCH_TEMPLATES, wl.LOGS_TEMPLATES, wl.TAXI_TEMPLATES])
@pytest.mark.parametrize("shape", ["drift", "mixed"])
def test_same_seed_same_queries(templates: dict[str, wl.Template], shape: str) -> None:
    first = wl.generate(templates, 60, seed=3, shape=shape, segment_length=7)
    again = wl.generate(templates, 60, seed=3, shape=shape, segment_length=7)
    other = wl.generate(templates, 60, seed=4, shape=shape, segment_length=7)
    assert first == again
    assert [q.sql for q in first] != [q.sql for q in other]


def test_thirteen_tpch_templates() -> None:
    assert sorted(wl.TPCH_TEMPLATES) == sorted(
        ["q1", "q3", "q4", "q5", "q6", "q7", "q8", "q10", "q12", "q14", "q17", "q19", "q21"]
    )


def test_drift_segments_use_one_template_and_switch() -> None:
    queries = wl.generate(wl.TPCH_TEMPLATES, 100, seed=1, shape="drift", segment_length=10)
    by_segment: dict[int, set[str]] = {}
    for q in queries:
        by_segment.setdefault(q.segment, set()).add(q.template)
    assert len(by_segment) == 10
    assert all(len(t) == 1 for t in by_segment.values())
    names = [next(iter(by_segment[s])) for s in sorted(by_segment)]
    assert all(a != b for a, b in itertools.pairwise(names))
    assert wl.switches(queries) == [10 * k for k in range(1, 10)]


def test_mixed_uses_many_templates() -> None:
    queries = wl.generate(wl.TPCH_TEMPLATES, 200, seed=1, shape="mixed")
    assert len({q.template for q in queries}) == 13
    assert {q.segment for q in queries} == {0}


def test_tpch_parameters_follow_the_spec() -> None:
    queries = wl.generate(wl.TPCH_TEMPLATES, 400, seed=2, shape="mixed", names=["q6", "q1"])
    for q in queries:
        if q.template == "q6":
            assert "l_quantity < 24" in q.sql or "l_quantity < 25" in q.sql
        else:
            day = q.sql.split("DATE'")[1][:10]
            assert "1998-08-02" <= day <= "1998-10-02"


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    queries = wl.generate(wl.LOGS_TEMPLATES, 25, seed=9)
    wl.save(queries, tmp_path / "w.jsonl")
    assert wl.load(tmp_path / "w.jsonl") == queries
    assert len((tmp_path / "w.jsonl").read_text().splitlines()) == 25


def test_bad_options_are_named() -> None:
    with pytest.raises(InvalidOption, match="unknown template 'q66'"):
        wl.generate(wl.TPCH_TEMPLATES, 5, seed=0, names=["q66"])
    with pytest.raises(InvalidOption, match="unknown workload shape 'wavy'"):
        wl.generate(wl.TPCH_TEMPLATES, 5, seed=0, shape="wavy")


def test_logs_has_a_udf_template_with_known_names() -> None:
    from lakelayout.evaluation.datasets import agent_names

    queries = wl.generate(wl.LOGS_TEMPLATES, 40, seed=3, shape="mixed", names=["udf_agent"])
    names = set(agent_names())
    for q in queries:
        assert q.sql.startswith("getagentname(user_agent) ")
        quoted = q.sql.split("'")[1::2]
        assert quoted and set(quoted) <= names
    assert any("zgrab" in q.sql for q in queries)


def test_taxi_templates_and_the_set_registry() -> None:
    assert wl.TEMPLATE_SETS["taxi"] is wl.TAXI_TEMPLATES
    assert {"distance", "fare", "duration", "window", "fare_distance"} <= set(wl.TAXI_TEMPLATES)
    queries = wl.generate(wl.TAXI_TEMPLATES, 80, seed=4, shape="mixed")
    assert len({q.template for q in queries}) == len(wl.TAXI_TEMPLATES)


def test_fare_and_distance_ranges_follow_the_correlation() -> None:
    """Every fare in [X, Y] maps (fare = 3 + 2.5 d) to a distance inside the drawn range."""
    queries = wl.generate(wl.TAXI_TEMPLATES, 30, seed=8, shape="mixed", names=["fare_distance"])
    for q in queries:
        numbers = [float(t) for t in q.sql.replace("AND", " ").split() if t[0].isdigit()]
        fare_low, fare_high, d_low, d_high = numbers
        assert fare_low < fare_high and d_low < d_high
        for fare in (fare_low, fare_high):
            assert d_low <= (fare - wl.TAXI_FARE_BASE) / wl.TAXI_FARE_PER_MILE <= d_high
