"""Seeded query workloads as Spark SQL predicates, saved as JSON lines.

A workload is a list of :class:`Query` (``template``, ``sql``). Templates are
functions ``rng -> sql`` that draw their parameters; a workload draws the
template of each query in one of two shapes:

* ``mixed`` (stable): every query picks a template uniformly at random;
* ``drift`` (OReO §VI): the stream is cut into segments, each using one
  template only; consecutive segments switch to a different template.

Same seed, same queries: generators use only ``numpy.random.default_rng(seed)``.

TPC-H: the filter predicates of the 13 templates touching lineitem, written
on the denormalized table (``c_nation``/``s_nation``, ``c_region``/``s_region``
replace the joins with nation and region), with parameters drawn as the
TPC-H specification (§2.4) draws them. Join conditions, aggregates and
sub-queries are not predicates on one table and are left out (q17's
``l_quantity < 0.2 * avg`` sub-query, for instance).

Logs: LIKE on URL prefixes, user agents and database-name suffixes, map
extraction, ``month(ts)``, the registered Python UDF ``getagentname(user_agent)``,
lat/lng boxes, time windows and exact URL look-ups.

Taxi (correlated columns, OReO/Pando style): ranges on trip distance, fare,
duration and pickup time, and combinations whose ranges follow the data's
correlations (fare ≈ 3 + 2.5 × distance; duration ≈ distance × 2–4 min, × 1.6
in rush hours, + 2).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import numpy as np

from lakelayout.errors import InvalidOption, closest

Template = Callable[[np.random.Generator], str]


@dataclass(frozen=True)
class Query:
    """One query of a workload: its template, predicate, and drift segment."""

    i: int
    template: str
    sql: str
    segment: int = 0


# --------------------------------------------------------------------------- TPC-H parameters

SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD")
SHIP_MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")
TYPE_S1 = ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO")
TYPE_S2 = ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED")
TYPE_S3 = ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER")
CONTAINER_S1 = ("SM", "LG", "MED", "JUMBO", "WRAP")
CONTAINER_S2 = ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM")
#: TPC-H nations with their region (spec §4.2.3)
NATIONS = (
    ("ALGERIA", "AFRICA"),
    ("ARGENTINA", "AMERICA"),
    ("BRAZIL", "AMERICA"),
    ("CANADA", "AMERICA"),
    ("EGYPT", "MIDDLE EAST"),
    ("ETHIOPIA", "AFRICA"),
    ("FRANCE", "EUROPE"),
    ("GERMANY", "EUROPE"),
    ("INDIA", "ASIA"),
    ("INDONESIA", "ASIA"),
    ("IRAN", "MIDDLE EAST"),
    ("IRAQ", "MIDDLE EAST"),
    ("JAPAN", "ASIA"),
    ("JORDAN", "MIDDLE EAST"),
    ("KENYA", "AFRICA"),
    ("MOROCCO", "AFRICA"),
    ("MOZAMBIQUE", "AFRICA"),
    ("PERU", "AMERICA"),
    ("CHINA", "ASIA"),
    ("ROMANIA", "EUROPE"),
    ("SAUDI ARABIA", "MIDDLE EAST"),
    ("VIETNAM", "ASIA"),
    ("RUSSIA", "EUROPE"),
    ("UNITED KINGDOM", "EUROPE"),
    ("UNITED STATES", "AMERICA"),
)
REGIONS = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")


def _d(value: date) -> str:
    return f"DATE'{value.isoformat()}'"


def _month(year: int, month: int, plus: int = 0) -> date:
    m = month - 1 + plus
    return date(year + m // 12, m % 12 + 1, 1)


def _pick(rng: np.random.Generator, items: Sequence[str]) -> str:
    return str(items[int(rng.integers(0, len(items)))])


def _random_month(rng: np.random.Generator, first: date, last: date) -> date:
    """The first day of a month drawn uniformly in [first, last] (month granularity)."""
    months = (last.year - first.year) * 12 + last.month - first.month
    return _month(first.year, first.month, int(rng.integers(0, months + 1)))


def q1(rng: np.random.Generator) -> str:
    delta = int(rng.integers(60, 121))
    return f"l_shipdate <= {_d(date(1998, 12, 1) - timedelta(days=delta))}"


def q3(rng: np.random.Generator) -> str:
    day = date(1995, 3, 1) + timedelta(days=int(rng.integers(0, 31)))
    return (
        f"c_mktsegment = '{_pick(rng, SEGMENTS)}' AND o_orderdate < {_d(day)} "
        f"AND l_shipdate > {_d(day)}"
    )


def q4(rng: np.random.Generator) -> str:
    start = _random_month(rng, date(1993, 1, 1), date(1997, 10, 1))
    return (
        f"o_orderdate >= {_d(start)} AND o_orderdate < {_d(_month(start.year, start.month, 3))} "
        "AND l_commitdate < l_receiptdate"
    )


def q5(rng: np.random.Generator) -> str:
    region = _pick(rng, REGIONS)
    year = int(rng.integers(1993, 1998))
    return (
        f"c_region = '{region}' AND s_region = '{region}' AND c_nationkey = s_nationkey "
        f"AND o_orderdate >= {_d(date(year, 1, 1))} AND o_orderdate < {_d(date(year + 1, 1, 1))}"
    )


def q6(rng: np.random.Generator) -> str:
    year = int(rng.integers(1993, 1998))
    discount = int(rng.integers(2, 10)) / 100
    quantity = int(rng.integers(24, 26))
    return (
        f"l_shipdate >= {_d(date(year, 1, 1))} AND l_shipdate < {_d(date(year + 1, 1, 1))} "
        f"AND l_discount BETWEEN {discount - 0.01:.2f} AND {discount + 0.01:.2f} "
        f"AND l_quantity < {quantity}"
    )


def q7(rng: np.random.Generator) -> str:
    first, second = rng.choice(len(NATIONS), 2, replace=False)
    n1, n2 = NATIONS[int(first)][0], NATIONS[int(second)][0]
    return (
        f"((s_nation = '{n1}' AND c_nation = '{n2}') OR (s_nation = '{n2}' AND c_nation = '{n1}')) "
        "AND l_shipdate BETWEEN DATE'1995-01-01' AND DATE'1996-12-31'"
    )


def q8(rng: np.random.Generator) -> str:
    _, region = NATIONS[int(rng.integers(0, len(NATIONS)))]
    ptype = f"{_pick(rng, TYPE_S1)} {_pick(rng, TYPE_S2)} {_pick(rng, TYPE_S3)}"
    return (
        f"c_region = '{region}' AND o_orderdate BETWEEN DATE'1995-01-01' AND DATE'1996-12-31' "
        f"AND p_type = '{ptype}'"
    )


def q10(rng: np.random.Generator) -> str:
    start = _random_month(rng, date(1993, 2, 1), date(1995, 1, 1))
    return (
        f"o_orderdate >= {_d(start)} AND o_orderdate < {_d(_month(start.year, start.month, 3))} "
        "AND l_returnflag = 'R'"
    )


def q12(rng: np.random.Generator) -> str:
    first, second = rng.choice(len(SHIP_MODES), 2, replace=False)
    year = int(rng.integers(1993, 1998))
    return (
        f"l_shipmode IN ('{SHIP_MODES[int(first)]}', '{SHIP_MODES[int(second)]}') "
        "AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate "
        f"AND l_receiptdate >= {_d(date(year, 1, 1))} "
        f"AND l_receiptdate < {_d(date(year + 1, 1, 1))}"
    )


def q14(rng: np.random.Generator) -> str:
    start = _random_month(rng, date(1993, 1, 1), date(1997, 12, 1))
    return f"l_shipdate >= {_d(start)} AND l_shipdate < {_d(_month(start.year, start.month, 1))}"


def _brand(rng: np.random.Generator) -> str:
    return f"Brand#{int(rng.integers(1, 6))}{int(rng.integers(1, 6))}"


def q17(rng: np.random.Generator) -> str:
    container = f"{_pick(rng, CONTAINER_S1)} {_pick(rng, CONTAINER_S2)}"
    return f"p_brand = '{_brand(rng)}' AND p_container = '{container}'"


def q19(rng: np.random.Generator) -> str:
    q1_, q2_, q3_ = (int(rng.integers(lo, lo + 10)) for lo in (1, 10, 20))
    common = "l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON'"
    branches = []
    for quantity, containers, size in (
        (q1_, "('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')", 5),
        (q2_, "('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')", 10),
        (q3_, "('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')", 15),
    ):
        branches.append(
            f"(p_brand = '{_brand(rng)}' AND p_container IN {containers} "
            f"AND l_quantity >= {quantity} AND l_quantity <= {quantity + 10} "
            f"AND p_size BETWEEN 1 AND {size} AND {common})"
        )
    return " OR ".join(branches)


def q21(rng: np.random.Generator) -> str:
    nation = NATIONS[int(rng.integers(0, len(NATIONS)))][0]
    return f"s_nation = '{nation}' AND o_orderstatus = 'F' AND l_receiptdate > l_commitdate"


TPCH_TEMPLATES: Mapping[str, Template] = {
    "q1": q1,
    "q3": q3,
    "q4": q4,
    "q5": q5,
    "q6": q6,
    "q7": q7,
    "q8": q8,
    "q10": q10,
    "q12": q12,
    "q14": q14,
    "q17": q17,
    "q19": q19,
    "q21": q21,
}

# --------------------------------------------------------------------------- logs


def logs_url_prefix(rng: np.random.Generator) -> str:
    from lakelayout.evaluation.datasets import LOG_PATHS, LOG_URL_ROOT, LOG_V3_PATH

    path = _pick(rng, (*LOG_PATHS, LOG_V3_PATH))
    return f"url LIKE '{LOG_URL_ROOT}{path}/{int(rng.integers(1, 10))}%'"


def logs_url_lookup(rng: np.random.Generator) -> str:
    """One exact URL (a needle: a bloom filter's case)."""
    from lakelayout.evaluation.datasets import LOG_ITEMS, LOG_PATHS, LOG_URL_ROOT

    return f"url = '{LOG_URL_ROOT}{_pick(rng, LOG_PATHS)}/{int(rng.integers(0, LOG_ITEMS))}'"


def logs_udf_agent(rng: np.random.Generator) -> str:
    """The registered Python UDF ``getagentname``: one product, or two, half the time
    the scanner that only shows up in bursts."""
    from lakelayout.evaluation.datasets import LOG_SCANNER, agent_names
    from lakelayout.skipping.indexes.examples import agent_name

    names = agent_names()
    first = agent_name(LOG_SCANNER) if rng.random() < 0.5 else _pick(rng, names)
    if rng.random() < 0.3:
        second = _pick(rng, [n for n in names if n != first])
        return f"getagentname(user_agent) IN ('{first}', '{second}')"
    return f"getagentname(user_agent) = '{first}'"


def logs_db_suffix(rng: np.random.Generator) -> str:
    """Databases by environment suffix (the restored copy exists only during incidents)."""
    env = _pick(rng, ("main", "staging", "archive", "restore", "restore"))
    return f"db_name LIKE '%{env}' AND latency_ms > {int(rng.integers(20, 200))}"


def logs_agent(rng: np.random.Generator) -> str:
    agent = _pick(rng, ("Chrome", "Firefox", "python-requests", "curl", "Java"))
    return f"user_agent LIKE '%{agent}%' AND collector_id <= {int(rng.integers(1, 4))}"


def logs_db(rng: np.random.Generator) -> str:
    from lakelayout.evaluation.datasets import LOG_DBS

    return f"db_name = '{_pick(rng, LOG_DBS)}' AND latency_ms > {int(rng.integers(50, 400))}"


def logs_map(rng: np.random.Generator) -> str:
    from lakelayout.evaluation.datasets import LOG_LEVELS, LOG_REGIONS

    return (
        f"attrs['level'] = '{_pick(rng, LOG_LEVELS[2:])}' "
        f"AND attrs['region'] = '{_pick(rng, LOG_REGIONS)}'"
    )


def logs_month(rng: np.random.Generator) -> str:
    return f"month(ts) = {int(rng.integers(1, 7))} AND collector_id = {int(rng.integers(1, 20))}"


def logs_box(rng: np.random.Generator) -> str:
    from lakelayout.evaluation.datasets import LOG_CITIES

    lat, lng = LOG_CITIES[int(rng.integers(0, len(LOG_CITIES)))]
    dlat, dlng = rng.uniform(-0.5, 0.5, 2)
    half = float(rng.uniform(0.1, 0.4))
    return (
        f"lat BETWEEN {lat + dlat - half:.3f} AND {lat + dlat + half:.3f} "
        f"AND lng BETWEEN {lng + dlng - half:.3f} AND {lng + dlng + half:.3f}"
    )


def logs_window(rng: np.random.Generator) -> str:
    day = date(2025, 1, 1) + timedelta(days=int(rng.integers(0, 175)))
    span = int(rng.integers(1, 8))
    return (
        f"ts >= TIMESTAMP'{day.isoformat()} 00:00:00' "
        f"AND ts < TIMESTAMP'{(day + timedelta(days=span)).isoformat()} 00:00:00'"
    )


LOGS_TEMPLATES: Mapping[str, Template] = {
    "url_prefix": logs_url_prefix,
    "url_lookup": logs_url_lookup,
    "agent": logs_agent,
    "udf_agent": logs_udf_agent,
    "db": logs_db,
    "db_suffix": logs_db_suffix,
    "map": logs_map,
    "month": logs_month,
    "box": logs_box,
    "window": logs_window,
}

# --------------------------------------------------------------------------- taxi

#: taxi pickups span 28 days from this Monday (see datasets.taxi_arrow)
TAXI_START = date(2025, 3, 3)
TAXI_DAYS = 28
#: fare ≈ TAXI_FARE_BASE + TAXI_FARE_PER_MILE × distance, noise σ ≈ 1.5
TAXI_FARE_BASE = 3.0
TAXI_FARE_PER_MILE = 2.5


def _range(column: str, low: float, high: float) -> str:
    return f"{column} BETWEEN {low:.2f} AND {high:.2f}"


def taxi_distance(rng: np.random.Generator) -> str:
    low = float(rng.uniform(0.0, 12.0))
    return _range("trip_distance", low, low + float(rng.uniform(0.5, 3.0)))


def taxi_fare(rng: np.random.Generator) -> str:
    low = float(rng.uniform(4.0, 45.0))
    return _range("fare_amount", low, low + float(rng.uniform(2.0, 10.0)))


def taxi_duration(rng: np.random.Generator) -> str:
    low = float(rng.uniform(3.0, 60.0))
    high = low + float(rng.uniform(5.0, 20.0))
    return f"duration_min >= {low:.1f} AND duration_min < {high:.1f}"


def taxi_window(rng: np.random.Generator) -> str:
    start = datetime.combine(TAXI_START, datetime.min.time()) + timedelta(
        hours=int(rng.integers(0, TAXI_DAYS * 24 - 24))
    )
    end = start + timedelta(hours=int(rng.integers(1, 25)))
    return (
        f"pickup_ts >= TIMESTAMP'{start:%Y-%m-%d %H:%M:%S}' "
        f"AND pickup_ts < TIMESTAMP'{end:%Y-%m-%d %H:%M:%S}'"
    )


def taxi_fare_distance(rng: np.random.Generator) -> str:
    """Fare between X and Y with the distance range the fare implies (± 2.5 σ of noise)."""
    low = float(rng.uniform(6.0, 45.0))
    high = low + float(rng.uniform(2.0, 8.0))
    slack = 2.5 * 1.5 / TAXI_FARE_PER_MILE
    d_low = max(0.0, (low - TAXI_FARE_BASE) / TAXI_FARE_PER_MILE - slack)
    d_high = (high - TAXI_FARE_BASE) / TAXI_FARE_PER_MILE + slack
    return f"{_range('fare_amount', low, high)} AND {_range('trip_distance', d_low, d_high)}"


def taxi_duration_distance(rng: np.random.Generator) -> str:
    """Duration range with the distances that can produce it (2–4 min/mile, ×1.6 at rush)."""
    low = float(rng.uniform(5.0, 50.0))
    high = low + float(rng.uniform(5.0, 15.0))
    d_low = max(0.0, (low - 2.0) / (4.0 * 1.6))
    d_high = (high - 2.0) / 2.0
    return (
        f"duration_min >= {low:.1f} AND duration_min < {high:.1f} "
        f"AND {_range('trip_distance', d_low, d_high)}"
    )


def taxi_rush(rng: np.random.Generator) -> str:
    """Slow trips in a rush hour of one week (time window × duration × distance)."""
    week = int(rng.integers(0, TAXI_DAYS // 7))
    start = TAXI_START + timedelta(days=7 * week)
    hours = _pick(rng, ("7 AND 9", "16 AND 19"))
    return (
        f"pickup_ts >= TIMESTAMP'{start.isoformat()} 00:00:00' "
        f"AND pickup_ts < TIMESTAMP'{(start + timedelta(days=7)).isoformat()} 00:00:00' "
        f"AND hour(pickup_ts) BETWEEN {hours} "
        f"AND duration_min > {int(rng.integers(15, 40))} AND trip_distance < {int(rng.integers(3, 8))}"
    )


def taxi_airport(rng: np.random.Generator) -> str:
    """Long airport trips: zone, distance and fare all high together."""
    distance = int(rng.integers(10, 20))
    fare = TAXI_FARE_BASE + TAXI_FARE_PER_MILE * distance - 4
    zones = _pick(rng, ("1, 132", "132, 138", "1, 138"))
    return f"zone_id IN ({zones}) AND trip_distance >= {distance} AND fare_amount >= {fare:.2f}"


TAXI_TEMPLATES: Mapping[str, Template] = {
    "distance": taxi_distance,
    "fare": taxi_fare,
    "duration": taxi_duration,
    "window": taxi_window,
    "fare_distance": taxi_fare_distance,
    "duration_distance": taxi_duration_distance,
    "rush": taxi_rush,
    "airport": taxi_airport,
}

TEMPLATE_SETS: Mapping[str, Mapping[str, Template]] = {
    "tpch": TPCH_TEMPLATES,
    "logs": LOGS_TEMPLATES,
    "taxi": TAXI_TEMPLATES,
}

# --------------------------------------------------------------------------- generation


def generate(
    templates: Mapping[str, Template],
    n: int,
    *,
    seed: int,
    shape: str = "drift",
    segment_length: int = 40,
    names: Sequence[str] | None = None,
) -> list[Query]:
    """``n`` queries drawn from ``templates`` (restricted to ``names``), ``shape``
    ``"mixed"`` or ``"drift"`` (segments of ``segment_length`` queries of one template)."""
    if n < 0:
        raise InvalidOption(f"the number of queries must be >= 0, got {n}")
    chosen = list(names) if names else list(templates)
    for name in chosen:
        if name not in templates:
            raise InvalidOption(
                f"unknown template {name!r}{closest(name, templates)}; "
                f"known: {', '.join(templates)}"
            )
    rng = np.random.default_rng(seed)
    if shape == "mixed":
        picks = [chosen[int(i)] for i in rng.integers(0, len(chosen), n)]
        segments = [0] * n
    elif shape == "drift":
        if segment_length < 1:
            raise InvalidOption(f"segment_length must be >= 1, got {segment_length}")
        picks, segments = _drift(rng, chosen, n, segment_length)
    else:
        raise InvalidOption(f"unknown workload shape {shape!r}; use 'mixed' or 'drift'")
    return [
        Query(i, name, templates[name](rng), seg)
        for i, (name, seg) in enumerate(zip(picks, segments, strict=True))
    ]


def _drift(
    rng: np.random.Generator, names: list[str], n: int, length: int
) -> tuple[list[str], list[int]]:
    """Segments of one template; each segment switches to a template not just used
    (every template is used once before any repeats, in a seeded order)."""
    picks: list[str] = []
    segments: list[int] = []
    order: list[str] = []
    segment = 0
    while len(picks) < n:
        if not order:
            order = [names[int(i)] for i in rng.permutation(len(names))]
            if picks and len(order) > 1 and order[0] == picks[-1]:
                order.append(order.pop(0))
        name = order.pop(0)
        take = min(length, n - len(picks))
        picks += [name] * take
        segments += [segment] * take
        segment += 1
    return picks, segments


def switches(queries: Sequence[Query]) -> list[int]:
    """Positions (query indexes) where the template segment changes."""
    return [q.i for prev, q in itertools.pairwise(queries) if q.segment != prev.segment]


def save(queries: Sequence[Query], path: Path) -> None:
    """Write one JSON object per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for q in queries:
            out.write(json.dumps(asdict(q), sort_keys=True) + "\n")


def load(path: Path) -> list[Query]:
    """Read a workload written by :func:`save`."""
    with path.open(encoding="utf-8") as src:
        return [Query(**json.loads(line)) for line in src if line.strip()]
