"""lakelayout: self-organizing data layouts for Delta Lake tables on Spark."""

from lakelayout.errors import (
    CommitConflict,
    EnvironmentProblem,
    InvalidOption,
    LakelayoutError,
    LayoutError,
    PredicateError,
    SchemaMismatch,
    TableExists,
    TableNotFound,
)

__all__ = [
    "CommitConflict",
    "EnvironmentProblem",
    "InvalidOption",
    "LakelayoutError",
    "LayoutError",
    "PredicateError",
    "SchemaMismatch",
    "TableExists",
    "TableNotFound",
]
__version__ = "0.1.0"
