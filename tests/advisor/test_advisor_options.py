"""The advisor's options and cost model files are checked where they are given: a bad
value is refused naming it, never a raw error deep inside a decision (no Spark)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakelayout.advisor.benefit import BenefitConfig
from lakelayout.advisor.costmodel import DEFAULTS, CostModel
from lakelayout.api import Table
from lakelayout.cli import app
from lakelayout.errors import InvalidOption

NAN, INF = float("nan"), float("inf")


def _model_file(tmp_path: Path, **changes: Any) -> Path:
    data = {**DEFAULTS.to_dict(), **changes}
    path = tmp_path / "model.json"
    path.write_text(json.dumps(data), encoding="utf-8")  # NaN, Infinity as Python writes them
    return path


@pytest.mark.parametrize(
    ("value", "shown"),
    [(NAN, "nan"), (INF, "inf"), (-1.0, "-1.0"), ("abc", "'abc'"), (True, "True"), (None, "None")],
)
def test_a_cost_model_file_with_a_bad_coefficient_is_refused_naming_it(
    tmp_path: Path, value: object, shown: str
) -> None:
    path = _model_file(tmp_path, query_seconds_per_byte=value)
    with pytest.raises(InvalidOption) as err:
        CostModel.load(path)
    assert str(err.value) == (
        f"bad cost model at {path}: cost model coefficients must be finite numbers >= 0: "
        f"query_seconds_per_byte={shown}"
    )


@pytest.mark.parametrize("document", [[1, 2], "model", 3])
def test_a_cost_model_file_that_is_not_an_object_is_refused(
    tmp_path: Path, document: object
) -> None:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(InvalidOption, match="a cost model is a JSON object of coefficients, got"):
        CostModel.load(path)


def test_a_cost_model_file_past_the_float_range_or_the_stack_is_refused(
    tmp_path: Path,
) -> None:
    """A JSON integer too large for a float, and a document nested past Python's stack,
    raised a raw OverflowError / RecursionError (an audit)."""
    path = _model_file(tmp_path, rewrite_fixed_seconds=10**400)
    with pytest.raises(InvalidOption, match=r"finite numbers >= 0: rewrite_fixed_seconds=1000"):
        CostModel.load(path)
    path.write_text("[" * 100_000, encoding="utf-8")
    with pytest.raises(InvalidOption, match=r"cannot read the cost model at .*recursion"):
        CostModel.load(path)


def test_a_good_cost_model_file_still_loads(tmp_path: Path) -> None:
    model = dataclasses.replace(DEFAULTS, query_seconds_per_byte=0, source="test")
    assert CostModel.load(model.save(tmp_path / "m.json")) == model


def test_advise_with_a_bad_model_file_fails_in_one_line(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("a", pa.int64())]))
    for name, document in [("nan", {**DEFAULTS.to_dict(), "query_fixed_seconds": NAN}),
                           ("list", [1, 2])]:  # fmt: skip
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        out = CliRunner().invoke(app, ["advise", t.uri, "--model", str(path)])
        assert out.exit_code == 2, out.output
        assert out.output.startswith(f"error: bad cost model at {path}: ")
        assert len(out.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"horizon_queries": NAN}, "horizon_queries must be a finite number >= 0"),
        ({"horizon_queries": INF}, "horizon_queries must be a finite number >= 0"),
        ({"horizon_queries": -1}, "horizon_queries must be a finite number >= 0"),
        ({"margin": NAN}, "margin must be a finite number >= 1, got nan"),
        ({"margin": 0.5}, "margin must be a finite number >= 1, got 0.5"),
        ({"horizon_seconds": INF}, "horizon_seconds must be a finite number > 0, got inf"),
        ({"min_span_seconds": NAN}, "min_span_seconds must be a finite number >= 0, got nan"),
        ({"fit_seconds_per_row": INF}, "fit_seconds_per_row must be a finite number >= 0"),
        ({"min_queries": 0}, "min_queries must be >= 1, got 0"),
        # of the wrong type: taken, then a raw TypeError (an audit)
        ({"min_queries": "5"}, "min_queries must be a whole number >= 1, got '5'"),
        ({"max_priced_queries": 2.5}, "max_priced_queries must be a whole number >= 1"),
        ({"margin": "2"}, "margin must be a number, got '2'"),
    ],
)
def test_benefit_options_must_be_finite(options: dict[str, float], message: str) -> None:
    with pytest.raises(InvalidOption, match=message):
        BenefitConfig(**options)


def test_benefit_options_in_range_are_taken() -> None:
    given = BenefitConfig(horizon_queries=0, margin=1, min_span_seconds=0)
    assert given.horizon_queries == 0 and given.margin == 1


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("window", -5, "advisor.window must be a whole number of queries >= 1, got -5"),
        ("window", 2.5, "advisor.window must be a whole number of queries >= 1, got 2.5"),
        ("window_days", NAN, "advisor.window_days must be a finite number > 0, got nan"),
        ("window_days", 0, "advisor.window_days must be a finite number > 0, got 0"),
        ("sample_rows", -10, "advisor.sample_rows must be a whole number of rows >= 1, got -10"),
        (
            "families",
            ["zorderr"],
            "advisor.families: unknown layout family 'zorderr'. Did you mean 'zorder'? "
            "Known: zorder, hilbert, sop-z, sop, qdtree, pando",
        ),
        ("families", [], "advisor.families must be a non-empty list of layout families"),
        ("families", "zorder", "advisor.families must be a non-empty list of layout families"),
        ("benefit", {"margin": 2}, "advisor.benefit must be a BenefitConfig, got dict"),
        ("model", "cheap.json", "advisor.model must be a CostModel or None, got str"),
        # the switches: 'false' is truthy and left the option on (an audit)
        ("learn_rewrite_cost", "false", "advisor.learn_rewrite_cost must be a bool, got str"),
        ("bounds", None, "advisor.bounds must be a bool, got NoneType"),
        ("recluster", 0, "advisor.recluster must be a bool, got int"),
        ("hooks", print, "advisor.hooks must be an OptimizeHooks or None"),
        # a misspelt option was set as a new attribute and did nothing
        (
            "learn_rewrite_costs",
            False,
            "advisor has no option 'learn_rewrite_costs'. Did you mean 'learn_rewrite_cost'?",
        ),
    ],
)
def test_advisor_options_are_checked_when_set(
    tmp_path: Path, name: str, value: object, message: str
) -> None:
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("a", pa.int64())]))
    before = getattr(t.advisor, name, "absent")
    with pytest.raises(InvalidOption) as err:
        setattr(t.advisor, name, value)
    assert str(err.value).startswith(message)
    assert getattr(t.advisor, name, "absent") == before  # the option is left as it was


def test_advisor_options_in_range_are_taken(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("a", pa.int64())]))
    t.advisor.families = ["qdtree", "zorder"]
    t.advisor.window, t.advisor.window_days, t.advisor.sample_rows = 10, 0.5, 100
    assert t.advisor.families == ("qdtree", "zorder")
    assert (t.advisor.window, t.advisor.window_days, t.advisor.sample_rows) == (10, 0.5, 100)


def test_a_long_lived_advisor_uses_a_model_calibrated_after_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The advisor kept the model it first read for the life of its Table object: a
    service's append triggers never saw what ``lakelayout calibrate`` saved later (an
    audit). The calibrated file is read again when it changes; a given model stays."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    t = Table.create(str(tmp_path / "t"), pa.table({"id": pa.array(range(10), pa.int64())}))
    assert t.advisor.cost_model() == DEFAULTS  # nothing calibrated yet
    first = dataclasses.replace(DEFAULTS, query_seconds_per_byte=1e-8, source="first")
    first.save()
    assert t.advisor.cost_model() == first
    again = dataclasses.replace(first, query_seconds_per_byte=2e-8, source="calibrated again")
    again.save()  # (another size: a new file, whatever the clock's resolution)
    assert t.advisor.cost_model() == again
    t.advisor.model = DEFAULTS
    assert t.advisor.cost_model() == DEFAULTS
