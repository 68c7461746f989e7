"""Planning the files of several layouts in one call, cut back per layout.

The min/max rules decide each file from its own statistics, except where a
function of a column fails on one file's bounds (``i + 1`` at INT_MAX): the
rule then gives up on every file of the call. Inside
:func:`~lakelayout.skipping.stats_rules.each_file_alone` that give-up raises
:class:`~lakelayout.skipping.stats_rules.GaveUp`; a call that returns gave
each file the answer it gets when its own part is planned alone. Property:
on the edge table (INT_MAX, INT_MIN, -128/127 bytes, NaN, unicode, extreme
dates) cut into random blocks by two layouts, for any predicate of the
planner's grammar or arithmetic near the integer limits, the stacked answer
either raises or equals each part's. And the advisor's pricing plans a
function of a column once over the stack when it can. No Spark.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakelayout.advisor.estimate as estimate
from lakelayout.advisor.estimate import stacked_fractions, virtual_files
from lakelayout.errors import PredicateError
from lakelayout.expr.parse import parse_predicate
from lakelayout.skipping.stats_rules import (
    FileStack,
    GaveUp,
    all_rows_match,
    each_file_alone,
    might_match,
)
from lakelayout.stats.blocks import block_stats
from lakelayout.stats.model import FileStats

from ..expr.predicates import OPS, _combine, edge_table, planner_predicates

EXAMPLES = int(os.environ.get("LAKELAYOUT_FUZZ_EXAMPLES", "150"))
TABLE = edge_table()

#: terms that overflow, or not, on the edge table's INT_MAX / INT_MIN / -128 / 127
ARITHMETIC = ["i + 1", "i - 1", "-i", "abs(i)", "i * 2", "ti + 1", "ti - 1", "ti * 2", "-ti"]


@st.composite
def arithmetic_leaf(draw: st.DrawFn) -> str:
    literal = draw(st.sampled_from(["0", "1", "-1", "5", "2147483647", "-2147483648", "127"]))
    return f"{draw(st.sampled_from(ARITHMETIC))} {draw(OPS)} {literal}"


PREDICATES = st.one_of(
    planner_predicates(max_leaves=2),
    st.recursive(arithmetic_leaf(), _combine, max_leaves=3),
)


def _stats(ids: list[int]) -> FileStats:
    return block_stats(TABLE, np.asarray(ids, dtype=np.int64))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    layouts=st.lists(
        st.lists(st.integers(0, 4), min_size=TABLE.num_rows, max_size=TABLE.num_rows),
        min_size=2,
        max_size=3,
    ),
    text=PREDICATES,
)
def test_a_stacked_call_that_returns_answers_each_file_as_its_own_part_does(
    layouts: list[list[int]], text: str
) -> None:
    try:
        predicate = parse_predicate(text, TABLE.schema)
    except PredicateError:
        return
    parts = [_stats(ids) for ids in layouts]
    stack = FileStack.of(parts)
    for rule in (might_match, all_rows_match):
        alone = [rule(predicate, part).tolist() for part in parts]
        together = stack.keep_each(lambda files, rule=rule: rule(predicate, files))
        if together is None:  # a rule gave up on the stack
            continue
        assert [keep.tolist() for keep in together] == alone, (rule.__name__, text)


def test_a_rule_that_gives_up_on_every_file_raises_inside_and_keeps_outside() -> None:
    """``i + 1`` overflows on the block holding INT_MAX: outside the context the rule keeps
    every file of the call, the one it could have skipped alone included; inside it raises."""
    predicate = parse_predicate("i + 1 = 1000", TABLE.schema)
    small = block_stats(TABLE.slice(0, 5), np.zeros(5, dtype=np.int64))  # i in [-1, 5]
    assert might_match(predicate, small).tolist() == [False]
    both = _stats([0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1])  # INT_MAX (row 5) in block 1
    assert might_match(predicate, both).tolist() == [True, True]
    with pytest.raises(GaveUp), each_file_alone():
        might_match(predicate, both)
    with each_file_alone():  # no give-up: the answer is the one it gets alone
        assert might_match(predicate, small).tolist() == [False]
    assert FileStack.of([small, both]).keep_each(lambda f: might_match(predicate, f)) is None
    kept = FileStack.of([small, small]).keep_each(lambda f: might_match(predicate, f))
    assert kept is not None and [k.tolist() for k in kept] == [[False], [False]]


def test_the_context_ends_with_its_block() -> None:
    stats = _stats([0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0])
    predicate = parse_predicate("i + 1 = 1", TABLE.schema)
    with pytest.raises(GaveUp), each_file_alone():
        might_match(predicate, stats)
    assert might_match(predicate, stats).tolist() == [True, True]  # no raise after it


def test_the_advisor_plans_a_function_of_a_column_once_over_the_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``year(d) = 1995`` decides each file alone: one planner call for three candidates,
    and the same shares as three calls. ``i + 1 = 1`` gives up on the stack (INT_MAX):
    one failed stacked call, then one call per candidate."""
    sets = [
        virtual_files(TABLE, np.asarray(ids))
        for ids in ([0] * 6 + [1] * 6, list(range(12)), [k % 3 for k in range(12)])
    ]
    calls: list[int] = []
    real = estimate.read_plan

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(estimate, "read_plan", counted)
    year = parse_predicate("year(d) = 1995", TABLE.schema)
    got = [s[0] for s in stacked_fractions(sets, [year])]
    assert len(calls) == 1
    alone = [files.fraction(year) for files in sets]
    assert got == alone
    assert min(alone) < 1 and len(set(alone)) > 1  # some candidate skips, not all alike

    calls.clear()
    overflow = parse_predicate("i + 1 = 1", TABLE.schema)
    shares = [s[0] for s in stacked_fractions(sets, [overflow])]
    assert len(calls) == 1 + len(sets)
    monkeypatch.setattr(estimate, "read_plan", real)
    assert shares == [files.fraction(overflow) for files in sets]
