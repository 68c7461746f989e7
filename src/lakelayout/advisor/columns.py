"""What share of a table's bytes each query reads: the columns it reads.

Parquet stores every column apart, so a query pays per byte only for the
columns it reads: a count filtered on two of 36 columns reads those two
column chunks of each file it keeps, not the file. The cost model's
``query_seconds_per_byte`` is measured on scans that read every column
(:mod:`.calibrate`), so it is a cost per byte *read*; a decision prices the
bytes a query skips × the share of a file's bytes in the columns the query
reads. Measured on the demo's tables (docs/benchmarks.md): with the whole
file's bytes, the model priced a 758 kB file's read at 3.7–4.6 ms where the
demo's counts paid 1.9 ms.

The shares come from the Parquet footers of a few of the files (the
compressed size of each column chunk, summed per top-level column), cached
per file (data files never change). Unknown stays whole: a query that reads
a column the footers do not name, or a table whose footers cannot be read,
is priced as reading whole files, as before.

Pure: pyarrow only.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow.parquet as pq

#: files whose footers give a table's column shares (evenly spread over the candidates)
FOOTERS = 8

_SIZES: dict[tuple[str, str], dict[str, int]] = {}
_LOCK = threading.Lock()
#: footers kept (a bound on the cache; an entry is a few columns' sizes)
MAX_CACHED = 20_000


def column_shares(
    table_uri: str, paths: Sequence[str], physical: Mapping[str, str], *, footers: int = FOOTERS
) -> dict[str, float]:
    """Each top-level column's share of the bytes of (up to ``footers`` of) the files at
    ``paths`` (log paths under ``table_uri``); ``physical`` maps a physical column name
    to its logical one. Empty when no footer can be read."""
    from lakelayout.table.datafile import column_bytes, file_location
    from lakelayout.table.location import resolve_location

    if not len(paths):
        return {}
    filesystem, root = resolve_location(table_uri)
    picks = np.unique(np.linspace(0, len(paths) - 1, min(len(paths), footers)).astype(np.int64))
    total: dict[str, int] = {}
    for k in picks:
        path = str(paths[int(k)])
        key = (table_uri, path)
        with _LOCK:
            sizes = _SIZES.get(key)
        if sizes is None:
            try:
                with filesystem.open_input_file(file_location(root, path)) as handle:
                    sizes = column_bytes(pq.ParquetFile(handle).metadata)
            except (OSError, ValueError):
                continue
            with _LOCK:
                if len(_SIZES) >= MAX_CACHED:
                    _SIZES.clear()
                _SIZES[key] = sizes
        for name, size in sizes.items():
            logical = physical.get(name, name)
            total[logical] = total.get(logical, 0) + size
    whole = sum(total.values())
    return {name: size / whole for name, size in total.items()} if whole else {}


def query_shares(
    columns_read: Sequence[Sequence[str] | None], shares: Mapping[str, float]
) -> np.ndarray:
    """Per query, the share of a file's bytes it reads: the sum of its columns' shares
    (1 when it reads every column — ``None`` — or a column ``shares`` lacks, or when
    ``shares`` is empty)."""
    out = np.ones(len(columns_read), dtype=np.float64)
    if not shares:
        return out
    for k, columns in enumerate(columns_read):
        if columns is None or any(c not in shares for c in columns):
            continue
        out[k] = min(1.0, sum(shares[c] for c in columns))
    return out
