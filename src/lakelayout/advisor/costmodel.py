"""The cost model: seconds for a rewrite and for a query on this cluster (thesis §5.1).

Two linear models, with coefficients measured by ``lakelayout calibrate``
(:mod:`lakelayout.advisor.calibrate`) and saved as JSON:

    rewrite seconds = fixed + per_file × files written + per_value × values
                      + bytes × (base + curve × n_curve + sop × n_sop + additional × n_additional)
                      [+ shuffle_fixed + shuffle_per_value × values, when the rewrite shuffles]
    query seconds   = query_fixed + query_per_file × files read + query_per_byte × bytes read
    statistics s    = statistics_fixed + additional × n_additional × bytes, to build new
                      statistics over the files a rewrite leaves in place (one index job)

and one more measured coefficient, the advisor's own: ``fit_seconds_per_row``,
what fitting and pricing every candidate layout on a sample costs per sample
row (the decision pays it whatever it decides; :func:`recommend` weighs it).

``bytes`` are the bytes of the files rewritten; ``values`` their rows ×
columns (every value is decoded, routed and encoded again: a wide table with
many small, well-compressed strings costs more per byte than a narrow numeric
one, and bytes alone cannot tell them apart); ``n_curve`` the curve
dimensions, ``n_sop`` the SOP features, ``n_additional`` the features kept in
file statistics only (the thesis's "Final Cost Function", §5.1.5, plus the
fixed costs: job start-up, commit, per-file overheads). A rewrite of more
than ``lakelayout.smallRewriteSize`` bytes (or of a partitioned table) routes
its rows through a Spark shuffle instead of writing them in the tasks that
read them (:mod:`lakelayout.cluster.rewrite`); the shuffle's own cost is the
bracketed term, which calibration measures by forcing the shuffle path on its
small tables. It is priced per value, not per byte: the shuffle moves decoded
Arrow rows, and a wide table of well-compressed strings moves many more of
them per Parquet byte than a narrow numeric one. On small tables the
fixed terms dominate: a rewrite of a few megabytes still costs seconds, while
a query saves milliseconds, which is why the advisor leaves small tables
alone unless they are queried very often. A query pays per file it reads as
well as per byte (a task, a file opened, its footer read): on tables of small
files that term is most of what skipping a file saves, and a model priced by
bytes alone (calibrated on a few large files) put the saving of the TPC-H
replay's 430 kB files at a third of what the queries measured.

The coefficients are fitted by non-negative least squares (a negative cost
per byte would be noise, not a saving). The model file lives at
``$XDG_CONFIG_HOME/lakelayout/costmodel.json`` (``~/.config/...`` when the
variable is unset) unless a path is given; with no file, :data:`DEFAULTS`
apply (documented in docs/advisor.md). Pure: numpy and scipy only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lakelayout.arguments import cannot_write_in, real_number
from lakelayout.errors import InvalidOption

FILE_NAME = "costmodel.json"
FORMAT = 6
#: formats 1 (before the per-value term), 2 (before the shuffle terms), 3 (before
#: the per-file query term), 4 (before the measured fitting cost) and 5 (before the
#: fixed cost of building statistics) still load, with the missing terms at their
#: defaults (0, and DEFAULT_FIT_SECONDS_PER_ROW)
READABLE_FORMATS = (1, 2, 3, 4, 5, 6)
#: the terms added since format 1, and the format that added each
ADDED_IN = {
    "rewrite_seconds_per_value": 2,
    "shuffle_fixed_seconds": 3,
    "shuffle_seconds_per_value": 3,
    "query_seconds_per_file": 4,
    "fit_seconds_per_row": 5,
    "statistics_fixed_seconds": 6,
}
#: what a model of an older format is told in its ``source``
OLD_FORMATS = {
    1: "no per-value rewrite term (format 1)",
    2: "no shuffle terms (format 2)",
    3: "no per-file query term (format 3)",
    4: "fitting cost not measured (format 4)",
    5: "no fixed cost of building statistics (format 5)",
}
#: seconds per sample row to fit and price every candidate family, until calibration
#: measures it (~0.8 s for the advisor's 20,000-row sample on the 2-core development
#: machine, TPC-H's templates)
DEFAULT_FIT_SECONDS_PER_ROW = 4e-5


@dataclass(frozen=True)
class CostModel:
    """Coefficients of the two models (seconds, bytes)."""

    rewrite_fixed_seconds: float
    rewrite_per_file_seconds: float
    rewrite_seconds_per_byte: float
    curve_seconds_per_byte: float
    sop_seconds_per_byte: float
    additional_seconds_per_byte: float
    query_fixed_seconds: float
    query_seconds_per_byte: float
    #: per value (row × column) rewritten; 0 in models calibrated before it existed
    rewrite_seconds_per_value: float = 0.0
    #: what a shuffled rewrite costs more than one without a shuffle: once, and per value
    #: (0 in models calibrated before these terms existed)
    shuffle_fixed_seconds: float = 0.0
    shuffle_seconds_per_value: float = 0.0
    #: per file a query reads (0 in models calibrated before it existed)
    query_seconds_per_file: float = 0.0
    #: the advisor's fitting of every candidate layout on a sample, per sample row
    fit_seconds_per_row: float = DEFAULT_FIT_SECONDS_PER_ROW
    #: the job that builds new statistics over files a rewrite does not write, once
    #: (0 in models calibrated before it existed)
    statistics_fixed_seconds: float = 0.0
    #: where the coefficients come from: "defaults", or the calibration's description
    source: str = "defaults"
    #: the calibration's own measure of fit (R² per model), when calibrated
    quality: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in dataclasses.fields(self)
            if f.type == "float" and not _coefficient(getattr(self, f.name))
        ]
        if bad:
            raise InvalidOption(
                f"cost model coefficients must be finite numbers >= 0: {', '.join(bad)}"
            )
        if not isinstance(self.source, str):
            raise InvalidOption(f"cost model source must be a string, got {self.source!r}")
        if not isinstance(self.quality, dict):
            raise InvalidOption(f"cost model quality must be an object, got {self.quality!r}")

    def rewrite_seconds(
        self,
        nbytes: int,
        files: int,
        *,
        n_curve: int = 1,
        n_sop: int = 0,
        n_additional: int = 0,
        values: int = 0,
        shuffled: bool = False,
    ) -> float:
        """Estimated seconds to rewrite ``nbytes`` holding ``values`` (rows × columns)
        into ``files`` files, through a shuffle when ``shuffled``."""
        per_byte = (
            self.rewrite_seconds_per_byte
            + self.curve_seconds_per_byte * n_curve
            + self.sop_seconds_per_byte * n_sop
            + self.additional_seconds_per_byte * n_additional
        )
        return (
            self.rewrite_fixed_seconds
            + self.rewrite_per_file_seconds * files
            + self.rewrite_seconds_per_value * values
            + nbytes * per_byte
            + (self.shuffle_fixed_seconds + self.shuffle_seconds_per_value * values) * shuffled
        )

    def statistics_seconds(self, nbytes: float, n_features: int) -> float:
        """Estimated seconds to build ``n_features`` new statistics over ``nbytes`` of
        files that are not rewritten (one index refresh job); 0 when there are none."""
        if n_features <= 0 or nbytes <= 0:
            return 0.0
        return (
            self.statistics_fixed_seconds
            + self.additional_seconds_per_byte * n_features * float(nbytes)
        )

    def rewrite_fixed(self, *, shuffled: bool = False) -> float:
        """The part of :meth:`rewrite_seconds` that does not grow with the data."""
        return self.rewrite_fixed_seconds + self.shuffle_fixed_seconds * shuffled

    def query_seconds(self, bytes_read: float, files_read: float = 0.0) -> float:
        """Estimated seconds of one query reading ``bytes_read`` bytes in ``files_read`` files."""
        return self.query_fixed_seconds + self.read_seconds(bytes_read, files_read)

    def read_seconds(self, nbytes: float, files: float) -> float:
        """The part of a query's seconds that skipping changes: reading ``nbytes`` bytes
        in ``files`` files (what a query saves is this for the bytes and files it skips)."""
        return self.query_seconds_per_byte * nbytes + self.query_seconds_per_file * files

    def scaled_rewrites(self, factor: float, why: str) -> CostModel:
        """This model with every rewrite term that grows with the data × ``factor``: per
        file, per byte, per value, per feature and the shuffle's per value. The
        fixed terms (``rewrite_fixed_seconds``, ``shuffle_fixed_seconds``: job
        start-up, planning, commit) and the query model are unchanged.

        The advisor uses it to correct the calibrated rewrite cost with what
        this table's own rewrites took (:func:`.decisions.rewrite_correction`):
        a wide, string-heavy table costs more per byte to rewrite than the
        calibration's tables, while starting a job and committing cost what
        they cost on any table of this cluster. ``why`` is added to :attr:`source`.
        """
        if not math.isfinite(factor) or factor <= 0:
            raise InvalidOption(f"a rewrite cost factor must be finite and > 0, got {factor}")
        return dataclasses.replace(
            self,
            rewrite_per_file_seconds=self.rewrite_per_file_seconds * factor,
            rewrite_seconds_per_byte=self.rewrite_seconds_per_byte * factor,
            curve_seconds_per_byte=self.curve_seconds_per_byte * factor,
            sop_seconds_per_byte=self.sop_seconds_per_byte * factor,
            additional_seconds_per_byte=self.additional_seconds_per_byte * factor,
            rewrite_seconds_per_value=self.rewrite_seconds_per_value * factor,
            shuffle_seconds_per_value=self.shuffle_seconds_per_value * factor,
            source=f"{self.source}; rewrites x {factor:.3g} ({why})",
        )

    def with_fitting(self, per_row: float, why: str) -> CostModel:
        """This model with ``fit_seconds_per_row`` measured elsewhere (the table's own
        decisions, :func:`.decisions.fitting_per_row`); ``why`` is added to :attr:`source`."""
        if not math.isfinite(per_row) or per_row < 0:
            raise InvalidOption(f"a fitting cost per row must be finite and >= 0, got {per_row}")
        return dataclasses.replace(
            self, fit_seconds_per_row=per_row, source=f"{self.source}; {why}"
        )

    def noted(self, note: str) -> CostModel:
        """This model with ``note`` added to :attr:`source`."""
        return dataclasses.replace(self, source=f"{self.source}; {note}")

    def with_reads(self, reads: ReadFit) -> CostModel:
        """This model with the query terms a table's own queries measured
        (:func:`fit_reads`); the rewrite terms unchanged."""
        return dataclasses.replace(
            self,
            query_fixed_seconds=reads.fixed_seconds,
            query_seconds_per_byte=reads.seconds_per_byte,
            query_seconds_per_file=reads.seconds_per_file,
            source=f"{self.source}; {reads.describe()}",
        )

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CostModel:
        """The model a :meth:`to_dict` document describes; InvalidOption when it is not
        a JSON object of a readable format with every coefficient a finite number >= 0."""
        if not isinstance(data, dict):
            raise InvalidOption(
                f"a cost model is a JSON object of coefficients, got a {type(data).__name__}"
            )
        if data.get("format") not in READABLE_FORMATS:
            raise InvalidOption(
                f"cost model format {data.get('format')!r} is not supported (expected {FORMAT}); "
                "run `lakelayout calibrate` again"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        optional = {"source", "quality"}
        lacking = {name for name, since in ADDED_IN.items() if data["format"] < since}
        missing = sorted(names - set(data) - optional - lacking)
        if missing:
            raise InvalidOption(f"cost model file lacks {', '.join(missing)}")
        model = cls(**{k: v for k, v in data.items() if k in names})
        if data["format"] in OLD_FORMATS:
            note = f"{OLD_FORMATS[data['format']]}: run `lakelayout calibrate` again"
            model = dataclasses.replace(model, source=f"{model.source}; {note}")
        return model

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the model as JSON (atomically); the path written."""
        target = check_save_path(path)
        temp = target.with_name(f".costmodel-{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            temp.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True), encoding="utf-8")
            os.replace(temp, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise InvalidOption(f"cannot save the cost model to {target}: {exc}") from None
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> CostModel:
        """The model at ``path`` (or the default path); :data:`DEFAULTS` when no file exists.

        A given ``path`` that does not exist is an error; a missing default
        file just means "not calibrated yet".
        """
        target = Path(path) if path is not None else default_path()
        if not target.exists():
            if path is not None:
                raise InvalidOption(f"no cost model at {target}; run `lakelayout calibrate`")
            return DEFAULTS
        try:
            data = json.loads(target.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:  # (nested past the stack: an audit)
            raise InvalidOption(f"cannot read the cost model at {target}: {exc}") from exc
        try:
            return cls.from_dict(data)
        except InvalidOption as exc:
            raise InvalidOption(f"bad cost model at {target}: {exc}") from exc


def _coefficient(value: object) -> bool:
    """Whether ``value`` can be a coefficient: a finite number >= 0 (not a bool)."""
    if not real_number(value):
        return False
    try:
        number = float(value)
    except OverflowError:  # a JSON integer past the float range (10**400; an audit)
        return False
    return math.isfinite(number) and number >= 0


#: coefficients for a first run, before ``lakelayout calibrate``: the order of
#: magnitude of a local Spark on a laptop-class machine (docs/advisor.md)
DEFAULTS = CostModel(
    rewrite_fixed_seconds=2.0,
    rewrite_per_file_seconds=0.02,
    rewrite_seconds_per_byte=4e-8,  # 25 MB/s
    curve_seconds_per_byte=2e-9,
    sop_seconds_per_byte=2e-9,
    additional_seconds_per_byte=1e-9,
    query_fixed_seconds=0.25,
    query_seconds_per_byte=5e-9,  # 200 MB/s
    query_seconds_per_file=2e-3,
    fit_seconds_per_row=DEFAULT_FIT_SECONDS_PER_ROW,
    rewrite_seconds_per_value=2e-8,
    shuffle_fixed_seconds=0.5,
    # a Qd-tree rewrite of 3.0M rows x 30 columns took 5.5 s more through the shuffle
    shuffle_seconds_per_value=5e-8,
    # an index refresh job over a few MB took 0.16-0.6 s on the 2-core machine
    statistics_fixed_seconds=0.3,
    source="defaults",
)


def check_save_path(path: str | os.PathLike[str] | None) -> Path:
    """Where :meth:`CostModel.save` writes (``path`` or :func:`default_path`), checked
    first: InvalidOption when it is a folder, a name in it is longer than the system
    takes, or its nearest existing parent is not a folder this process can write in (a
    calibration takes minutes: it is checked before, not after)."""
    target = Path(path) if path is not None else default_path()
    longest = 255  # (Linux's NAME_MAX: every name of the path is checked before it is used)
    too_long = next(
        (p.name for p in (target, *target.parents) if len(os.fsencode(p.name)) > longest), None
    )
    if too_long is not None:  # found after the calibration (a review)
        raise InvalidOption(
            f"cannot save the cost model to {target}: the name {too_long[:40]!r}... is longer "
            f"than {longest} bytes"
        )
    if target.is_symlink():  # the file it names is written, not the link replaced
        target = target.resolve()
    if target.is_dir():
        raise InvalidOption(f"cannot save the cost model to {target}: it is a folder")
    if target.exists() and not target.is_file():
        # the save replaces the file: `--out /dev/null` replaced the device itself with
        # a JSON file (an audit)
        raise InvalidOption(
            f"cannot save the cost model to {target}: it is not a regular file "
            "(a device, a pipe or a socket)"
        )
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InvalidOption(
            f"cannot save the cost model to {target}: {parent} is a file, not a folder"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidOption(f"cannot save the cost model to {target}: {parent} is not writable")
    why = cannot_write_in(parent)
    if why:
        raise InvalidOption(
            f"cannot save the cost model to {target}: cannot write in {parent} ({why})"
        )
    return target


#: the model at the default path, by that path, with its file's (mtime ns, size)
_CALIBRATED: dict[str, tuple[tuple[int, int], CostModel]] = {}


def calibrated() -> CostModel:
    """:meth:`CostModel.load` of the default path, read again once the file changes: a
    long-lived process (a service's tables, their append triggers) priced every
    decision with the model it first read, whatever ``lakelayout calibrate`` saved
    later (an audit). :data:`DEFAULTS` while there is no file."""
    target = default_path()
    try:
        st = target.stat()
    except OSError:
        return CostModel.load()
    key = (st.st_mtime_ns, st.st_size)
    held = _CALIBRATED.get(str(target))
    if held is not None and held[0] == key:
        return held[1]
    model = CostModel.load()
    _CALIBRATED[str(target)] = (key, model)
    return model


def default_path() -> Path:
    """``$XDG_CONFIG_HOME/lakelayout/costmodel.json`` (``~/.config`` when unset)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "lakelayout" / FILE_NAME


# --------------------------------------------------------------------------- fitting


@dataclass(frozen=True)
class RewriteObservation:
    """One measured rewrite."""

    seconds: float
    nbytes: int
    files: int
    n_curve: int
    n_sop: int = 0
    n_additional: int = 0
    #: rows × columns rewritten
    values: int = 0
    #: whether the rewrite went through a shuffle
    shuffled: bool = False

    def row(self) -> list[float]:
        b = float(self.nbytes)
        return [
            1.0,
            float(self.files),
            b,
            b * self.n_curve,
            b * self.n_sop,
            b * self.n_additional,
            float(self.values),
            float(self.shuffled),
            float(self.values) * self.shuffled,
        ]


@dataclass(frozen=True)
class QueryObservation:
    """One measured query."""

    seconds: float
    bytes_read: int
    files_read: int = 0

    def row(self) -> list[float]:
        return [1.0, float(self.bytes_read), float(self.files_read)]


@dataclass(frozen=True)
class StatisticsObservation:
    """One measured build of ``n_features`` index features over ``nbytes`` of files."""

    seconds: float
    nbytes: int
    n_features: int

    def row(self) -> list[float]:
        return [1.0, float(self.nbytes) * self.n_features]


#: a table's own timed queries replace the calibrated query terms (:func:`fit_reads`)
#: only when there are at least this many ...
READ_FIT_MIN_QUERIES = 20
#: ... whose bytes read spread at least this much (90th percentile over the 10th) ...
READ_FIT_MIN_SPREAD = 2.0
#: ... and whose fit explains at least this share of the seconds' variance
READ_FIT_MIN_R2 = 0.5
#: the fit replaces the model's query terms only when the two disagree by more than this
#: factor on a file of the table's size (:meth:`ReadFit.disagreement`)
READ_FIT_TRUST = 2.0


@dataclass(frozen=True)
class ReadFit:
    """The query terms fitted on one table's timed queries (:func:`fit_reads`)."""

    fixed_seconds: float
    seconds_per_byte: float
    seconds_per_file: float
    queries: int
    r2: float
    #: the mean size of the files the queries read (bytes read / files read)
    file_bytes: float

    def describe(self) -> str:
        return (
            f"queries: {self.fixed_seconds:.3g} s + {self.seconds_per_byte:.3g} s/byte + "
            f"{self.seconds_per_file:.3g} s/file, fitted on this table's last {self.queries} "
            f"timed queries (R² {self.r2:.2f})"
        )

    def file_seconds(self) -> float:
        """What reading one file of the table's mean size costs by this fit."""
        return self.seconds_per_byte * self.file_bytes + self.seconds_per_file

    def disagreement(self, model: CostModel) -> float:
        """How many times more (or less) ``model`` prices reading one file of the table's
        mean size than this fit does (>= 1; inf when one of them prices it at 0)."""
        mine, theirs = self.file_seconds(), model.read_seconds(self.file_bytes, 1)
        if mine <= 0 or theirs <= 0:
            return math.inf
        return max(mine / theirs, theirs / mine)


def fit_reads(
    observations: Sequence[QueryObservation],
    *,
    min_queries: int = READ_FIT_MIN_QUERIES,
    min_spread: float = READ_FIT_MIN_SPREAD,
    min_r2: float = READ_FIT_MIN_R2,
) -> ReadFit | None:
    """The query model fitted on a table's own queries, or None when they cannot tell.

    Calibration measures generated tables on one occasion; a noisy minute
    during it moves the cost of a byte read by 2× (docs/benchmarks.md), and the
    table at hand (its columns, its file sizes, the queries' projections) is
    not the calibration's. The table's query log holds what its queries took
    (``scan_seconds + run_seconds`` of the scans run through the timed path)
    with the bytes and files each read. With enough of them, spread over
    small and large reads, the same linear model is fitted to them: robust
    least squares (soft-L1 loss around the non-negative least-squares
    solution, so that a query slowed by a garbage collection or a cold worker
    does not tilt the line), non-negative coefficients. None — keep the
    calibration — with fewer than ``min_queries``, reads that do not spread
    (their 90th percentile of bytes below ``min_spread`` × their 10th: the
    slope would be noise), or a fit that explains less than ``min_r2`` of the
    variance of the queries within 3 robust deviations of it (or leaves more
    than a fifth of them outside).

    Bytes and files read are nearly proportional on a table of even file
    sizes, so how the fit splits a read between the two terms is loose; what a
    decision uses, the seconds of skipping files of the table's own sizes, is
    not.
    """
    if len(observations) < max(min_queries, 3):
        return None
    nbytes = np.array([o.bytes_read for o in observations], dtype=np.float64)
    low, high = np.percentile(nbytes, [10, 90])
    if high <= 0 or high < min_spread * low:
        return None
    rows = [o.row() for o in observations]
    seconds = [o.seconds for o in observations]
    coef, r2 = _robust_nnls(rows, seconds)
    if r2 < min_r2 or coef[1] + coef[2] <= 0:
        return None
    files = sum(o.files_read for o in observations)
    return ReadFit(
        fixed_seconds=float(coef[0]),
        seconds_per_byte=float(coef[1]),
        seconds_per_file=float(coef[2]),
        queries=len(observations),
        r2=round(r2, 4),
        file_bytes=float(nbytes.sum()) / files if files else 0.0,
    )


def _robust_nnls(rows: Sequence[list[float]], seconds: Sequence[float]) -> tuple[np.ndarray, float]:
    """Non-negative robust least squares (soft-L1 loss, scale from the residuals'
    median absolute deviation), started from the plain non-negative fit; (coefficients,
    R² of the inliers, -inf when over a fifth of the points are outliers).

    Solved by iteratively reweighted least squares, each step an exact
    non-negative fit (:func:`_small_nnls`): the soft-L1 loss
    ``2 (sqrt(1 + (r / f)^2) - 1)`` is convex and lies under its quadratic
    majorizer at every step, so the steps descend to its minimum. In numpy
    because a decision runs it: ``scipy.optimize`` (which gives the same
    answer, tests/advisor/test_read_fit.py) takes ~2.4 s to import, paid by
    the first decision of every process.
    """
    a = np.asarray(rows, dtype=np.float64)
    y = np.asarray(seconds, dtype=np.float64)
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0
    scaled = a / scale
    x = _small_nnls(scaled, y)
    f_scale = max(1.4826 * float(np.median(np.abs(y - scaled @ x))), 1e-4)
    for _ in range(ROBUST_STEPS):
        residual = y - scaled @ x
        root = np.sqrt(1.0 / np.sqrt(1.0 + (residual / f_scale) ** 2))
        step = _small_nnls(scaled * root[:, None], y * root)
        done = np.allclose(step, x, rtol=1e-10, atol=1e-14)
        x = step
        if done:
            break
    coef = np.maximum(x, 0.0) / scale
    residual = y - a @ coef
    # R² of the queries the line describes: within 3 robust deviations of it (the loss
    # discounted the others); none at all when those are under 80 % of the queries. A fit
    # that is exact up to rounding has every query within it (a millionth of the largest)
    deviation = max(1.4826 * float(np.median(np.abs(residual))), 1e-6 * float(np.abs(y).max()))
    inliers = np.abs(residual) <= 3 * deviation
    if inliers.sum() < 0.8 * len(y):
        return coef, -math.inf
    return coef, _r2(y[inliers], residual[inliers], constant=0.0)


#: reweighting steps of :func:`_robust_nnls` at most (it stops when a step changes nothing)
ROBUST_STEPS = 200


def _small_nnls(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``argmin |a x - y|`` over ``x >= 0`` for a few columns (the read fit's three), exactly.

    The solution is the unconstrained least-squares fit on some subset of the
    columns that comes out non-negative (the rest at 0); of all such fits the
    one with the smallest residual is the answer. ``2^k`` small solves.

    >>> _small_nnls(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([2.0, -1.0]))
    array([2., 0.])
    """
    k = a.shape[1]
    best = np.zeros(k)
    best_rss = float(y @ y)
    for mask in range(1, 2**k):
        cols = [j for j in range(k) if mask >> j & 1]
        x, *_ = np.linalg.lstsq(a[:, cols], y, rcond=None)
        if (x < 0).any():
            continue
        rss = float(((a[:, cols] @ x - y) ** 2).sum())
        if rss < best_rss:
            best = np.zeros(k)
            best[cols] = x
            best_rss = rss
    return best


def _nnls(rows: Sequence[list[float]], seconds: Sequence[float]) -> tuple[np.ndarray, float]:
    """Non-negative least squares with columns scaled to unit norm; (coefficients, R²)."""
    from scipy.optimize import nnls

    a = np.asarray(rows, dtype=np.float64)
    y = np.asarray(seconds, dtype=np.float64)
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(a / scale, y)
    coef = coef / scale
    return coef, _r2(y, y - a @ coef, constant=1.0)


def _r2(y: np.ndarray, residual: np.ndarray, *, constant: float) -> float:
    """R² of a fit with these residuals; ``constant`` when ``y`` does not vary."""
    spread = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float((residual**2).sum()) / spread if spread > 0 else constant


def fit(
    rewrites: Sequence[RewriteObservation],
    queries: Sequence[QueryObservation],
    statistics: Sequence[StatisticsObservation] = (),
    *,
    fit_seconds_per_row: float = DEFAULT_FIT_SECONDS_PER_ROW,
    source: str = "calibrated",
) -> CostModel:
    """Fit the models to measurements (needs enough distinct sizes to separate the terms).

    The cost per additional feature comes from ``statistics`` (index builds)
    when given, else from the rewrites' ``n_additional`` column.
    ``fit_seconds_per_row`` is measured apart (:func:`.calibrate.measure_fitting`).
    """
    if len(rewrites) < 6 or len(queries) < 3:
        raise InvalidOption(
            f"calibration needs at least 6 rewrites and 3 queries, got {len(rewrites)} "
            f"and {len(queries)}"
        )
    rw, rw_r2 = _nnls([r.row() for r in rewrites], [r.seconds for r in rewrites])
    q, q_r2 = _nnls([x.row() for x in queries], [x.seconds for x in queries])
    quality = {"rewrite_r2": round(rw_r2, 4), "query_r2": round(q_r2, 4)}
    additional = float(rw[5])
    statistics_fixed = 0.0
    if len(statistics) >= 2:
        st, st_r2 = _nnls([x.row() for x in statistics], [x.seconds for x in statistics])
        statistics_fixed, additional = float(st[0]), float(st[1])
        quality["statistics_r2"] = round(st_r2, 4)
    return CostModel(
        rewrite_fixed_seconds=float(rw[0]),
        rewrite_per_file_seconds=float(rw[1]),
        rewrite_seconds_per_byte=float(rw[2]),
        curve_seconds_per_byte=float(rw[3]),
        sop_seconds_per_byte=float(rw[4]),
        additional_seconds_per_byte=additional,
        query_fixed_seconds=float(q[0]),
        query_seconds_per_byte=float(q[1]),
        query_seconds_per_file=float(q[2]),
        rewrite_seconds_per_value=float(rw[6]),
        shuffle_fixed_seconds=float(rw[7]),
        shuffle_seconds_per_value=float(rw[8]),
        fit_seconds_per_row=fit_seconds_per_row,
        statistics_fixed_seconds=statistics_fixed,
        source=source,
        quality=quality,
    )
