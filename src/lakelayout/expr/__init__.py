"""Predicates as Spark SQL text: parsing, binding, normalization and evaluation.

>>> import pyarrow as pa
>>> schema = pa.schema([("a", pa.int32()), ("s", pa.string())])
>>> pred = parse_predicate("NOT (a IN (3, 1, 3) OR s LIKE 'ab%')", schema)
>>> pred.sql()
"(NOT startswith(s, 'ab') AND a NOT IN (1, 3))"
>>> evaluate(pred, pa.table({"a": [1, 2, None], "s": ["x", "x", "x"]})).tolist()
[False, True, False]
"""

from lakelayout.expr.evaluate import evaluate, evaluate_term
from lakelayout.expr.nodes import (
    And,
    BoolConst,
    BoolTerm,
    Column,
    Compare,
    EndsWith,
    Expr,
    Func,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Opaque,
    Or,
    Predicate,
    StartsWith,
    Term,
    TermCompare,
)
from lakelayout.expr.parse import parse_predicate, parse_term

__all__ = [
    "And",
    "BoolConst",
    "BoolTerm",
    "Column",
    "Compare",
    "EndsWith",
    "Expr",
    "Func",
    "In",
    "IsNull",
    "Like",
    "Literal",
    "Not",
    "Opaque",
    "Or",
    "Predicate",
    "StartsWith",
    "Term",
    "TermCompare",
    "evaluate",
    "evaluate_term",
    "parse_predicate",
    "parse_term",
]
