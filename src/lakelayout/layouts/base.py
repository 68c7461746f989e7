"""The interface every layout family implements.

A layout maps rows to blocks. It is *fitted* on the driver from a sample of
the table (an Arrow table) and a workload (predicate SQL strings or bound
:class:`~lakelayout.expr.nodes.Predicate` trees), then *applied* to every row
inside Spark tasks through :meth:`Layout.assign`, which must therefore be
vectorized, deterministic and picklable. Layouts are pure: this package never
imports pyspark.
"""

from __future__ import annotations

import abc
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from lakelayout.errors import LayoutError
from lakelayout.expr.nodes import Predicate

if TYPE_CHECKING:
    from lakelayout.stats.model import FileStats

WorkloadItem = str | Predicate

logger = logging.getLogger(__name__)

#: a file its statistics place in one block of a layout is kept as that block (not
#: rewritten) when it holds at least this share of an average block (the files' bytes
#: over the layout's blocks): keeping smaller pieces would leave a block in many small
#: files, rewrite after rewrite
KEEP_MIN_BLOCK_SHARE = 0.5


class Layout(abc.ABC):
    """A fitted mapping from rows to block ids ``0 .. n_blocks - 1``."""

    #: family name used in JSON and by :func:`from_json` to pick the class
    family: ClassVar[str]
    #: True when blocks are consecutive ranges of ``sort_key`` (curves): sorting
    #: rows by the key alone then also groups them by block
    key_orders_blocks: ClassVar[bool] = False
    #: True when ``sort_key`` only orders rows inside a block (a tree layout's in-block
    #: order): a rewrite applies it only when blocks are large enough to gain from it
    #: (:func:`lakelayout.cluster.config.orders_inside_blocks`)
    sort_key_optional: ClassVar[bool] = False
    #: True when ``sort_key`` ranks the rows of the batch it is given among themselves (a
    #: linear layout's lexicographic order): keys of two batches do not compare, so a
    #: rewrite computes the order over all of a block's rows at once
    key_is_batch_rank: ClassVar[bool] = False
    _registry: ClassVar[dict[str, type[Layout]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        family = cls.__dict__.get("family")
        if isinstance(family, str):
            Layout._registry[family] = cls

    @property
    @abc.abstractmethod
    def n_blocks(self) -> int:
        """Number of blocks ``assign`` can return."""

    @abc.abstractmethod
    def assign(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray:
        """Block id (int64) of every row of ``batch``, in row order."""

    def sort_key(self, batch: pa.Table | pa.RecordBatch) -> np.ndarray | None:
        """Optional order of rows inside a block (curve key); None if unordered."""
        return None

    def route(self, batch: pa.Table | pa.RecordBatch) -> tuple[np.ndarray, np.ndarray | None]:
        """``(assign(batch), sort_key(batch))`` in one call.

        What a rewrite needs per row; families whose block and key come from the
        same computation (curves) override it to do that work once.
        """
        return self.assign(batch), self.sort_key(batch)

    def blocks_for(self, predicate: WorkloadItem) -> np.ndarray | None:
        """Blocks that may hold rows matching ``predicate`` (sorted int64 ids).

        Families with a logical index (Qd-tree, Pando) answer from the index and
        never omit a block holding a matching row; others return None and rely
        on per-block metadata instead.
        """
        return None

    def blocks_of_files(self, files: FileStats) -> np.ndarray | None:
        """Per file of ``files``: the block every one of its rows belongs to, read from
        its statistics alone, or -1 where the rows may fall in several blocks.

        A file given a block needs no rewrite to be laid out by this layout (a
        switch may keep it). Families whose blocks are regions of cuts (Qd-tree,
        Pando) answer with the scan's min/max rules and never name a block some
        row of the file is not in; others return None (cannot tell).
        """
        return None

    @abc.abstractmethod
    def estimate(self, workload: Sequence[WorkloadItem], sample: pa.Table) -> np.ndarray:
        """Fraction of rows scanned per query if the sample were laid out so.

        The thesis's "virtual files": the sample is assigned to blocks, each
        block gets metadata, and each query keeps the blocks it cannot rule out.
        """

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready state, including ``"family"``."""

    @classmethod
    @abc.abstractmethod
    def from_dict(cls, state: dict[str, Any]) -> Layout:
        """Inverse of :meth:`to_dict`."""

    @abc.abstractmethod
    def describe(self) -> str:
        """A few lines for people: family, columns, blocks, sizes."""

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def placed_blocks(layout: Layout, files: FileStats) -> np.ndarray:
    """Per file of ``files``: the block of ``layout`` it may stay as, or -1 (rewrite it).

    A file gets a block when its statistics put every row in that one block
    (:meth:`Layout.blocks_of_files`; Qd-tree and Pando answer by the scan's
    min/max rules, Z-order and Hilbert by the rank box of the file's bounds,
    SOP+Z and linear layouts never place a file) and it holds at least
    :data:`KEEP_MIN_BLOCK_SHARE` of an average block of ``files``' bytes. Such
    a file is laid out already; a rewrite that keeps it moves only the rows
    whose block it changes. Placing is an optimization: when it fails, every
    file is rewritten.
    """
    blocks = file_blocks(layout, files)
    sizes = np.asarray(files.sizes, dtype=np.int64)
    return np.where((blocks >= 0) & (sizes >= keep_floor(layout, sizes)), blocks, -1)


def file_blocks(layout: Layout, files: FileStats) -> np.ndarray:
    """Per file: the one block of ``layout`` its statistics put every row in, or -1
    (:meth:`Layout.blocks_of_files`, with no size floor; all -1 when placing fails).
    A file's answer depends on its own statistics only."""
    out = np.full(len(files), -1, dtype=np.int64)
    if not len(files):
        return out
    try:
        blocks = layout.blocks_of_files(files)
    except Exception as exc:  # an unplaceable file is rewritten: never wrong, only slower
        logger.warning("placing %d files in the blocks of a %s layout failed: %s",
                       len(files), layout.family, exc)  # fmt: skip
        return out
    if blocks is None:
        return out
    return np.asarray(blocks, dtype=np.int64)


def keep_floor(layout: Layout, sizes: np.ndarray) -> float:
    """The smallest file :func:`placed_blocks` keeps: :data:`KEEP_MIN_BLOCK_SHARE` of an
    average block of the files of ``sizes``."""
    return KEEP_MIN_BLOCK_SHARE * float(np.sum(sizes)) / max(1, layout.n_blocks)


def from_json(text: str) -> Layout:
    """Rebuild any registered layout from :meth:`Layout.to_json` output."""
    try:
        state = json.loads(text)
        family = state["family"]
    except (ValueError, KeyError, TypeError) as exc:
        raise LayoutError(f"not a layout JSON document: {exc}") from exc
    cls = Layout._registry.get(family)
    if cls is None:
        known = ", ".join(sorted(Layout._registry))
        raise LayoutError(f"unknown layout family {family!r}; known: {known}")
    return cls.from_dict(state)
