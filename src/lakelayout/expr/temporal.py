"""Spark TIMESTAMP values: literal text with time zones, and instants beyond Python's datetime.

Spark stores a TIMESTAMP as microseconds since the epoch in a 64-bit integer,
so it accepts years from -290308 to +294247; Python's :class:`datetime.datetime`
stops at years 1 and 9999. A timestamp literal is therefore held as a
``datetime`` when Python can represent it (every ordinary value, so trees read
as before) and as a :class:`FarTimestamp` otherwise. Both order and compare
with each other; :func:`timestamp_micros` gives the integer of either.

:func:`parse_timestamp_text` follows Spark's ``stringToTimestamp``:

* ``[+-]yyyy[y..]-[m]m-[d]d[( |T)[h]h:[m]m[:[s]s[.fraction]]][zone]`` and the
  shorter ``yyyy``, ``yyyy-[m]m``, ``yyyy-[m]m-[d]d `` forms; 4 to 6 year
  digits, a year 0 and negative years (proleptic Gregorian);
* fractions beyond microseconds are cut, not rounded;
* a zone after the time: ``Z``, ``+|-h[h][:mm[:ss]]`` (also ``hhmm``),
  ``UTC`` / ``GMT`` / ``UT`` with or without such an offset, Java's short IDs
  (``PST`` is America/Los_Angeles, ``EST`` is -05:00, ...) and region IDs
  (``Europe/Paris``), case-sensitive as in Java;
* for a TIMESTAMP (with local time zone) a zone in the text wins over the
  session zone; a TIMESTAMP_NTZ keeps the wall-clock time and ignores it;
* a time without a date (``'01:02:03'``) means today's date in Spark: it is
  not deterministic, and :class:`NonDeterministic` is raised.

Converting a wall-clock time outside years 1..9999 to UTC uses the zone's
rules at the same date shifted by whole 400-year cycles (the Gregorian
calendar repeats exactly), i.e. its latest rules in the far future and its
earliest (local mean time) in the far past, as Java does.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass

#: Spark's TIMESTAMP range, microseconds since the epoch (a Java long)
MIN_MICROS = -(2**63)
MAX_MICROS = 2**63 - 1
MICROS_PER_DAY = 86_400_000_000
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_ONE_US = dt.timedelta(microseconds=1)
_CYCLE_YEARS = 400

#: java.time.ZoneId.SHORT_IDS, which Spark accepts as zone names
SHORT_IDS = {
    "ACT": "Australia/Darwin",
    "AET": "Australia/Sydney",
    "AGT": "America/Argentina/Buenos_Aires",
    "ART": "Africa/Cairo",
    "AST": "America/Anchorage",
    "BET": "America/Sao_Paulo",
    "BST": "Asia/Dhaka",
    "CAT": "Africa/Harare",
    "CNT": "America/St_Johns",
    "CST": "America/Chicago",
    "CTT": "Asia/Shanghai",
    "EAT": "Africa/Addis_Ababa",
    "ECT": "Europe/Paris",
    "IET": "America/Indiana/Indianapolis",
    "IST": "Asia/Kolkata",
    "JST": "Asia/Tokyo",
    "MIT": "Pacific/Apia",
    "NET": "Asia/Yerevan",
    "NST": "Pacific/Auckland",
    "PLT": "Asia/Karachi",
    "PNT": "America/Phoenix",
    "PRT": "America/Puerto_Rico",
    "PST": "America/Los_Angeles",
    "SST": "Pacific/Guadalcanal",
    "VST": "Asia/Ho_Chi_Minh",
    "EST": "-05:00",
    "MST": "-07:00",
    "HST": "-10:00",
}

_TEXT = re.compile(
    r"""
    (?P<sign>[+-])?(?P<year>\d{4,6})
    (?:-(?P<month>\d{1,2})
      (?:-(?P<day>\d{1,2})
        (?:(?P<sep>[ T])
          (?:(?P<hour>\d{1,2})
            (?::(?P<minute>\d{1,2})
              (?::(?P<second>\d{1,2})(?:\.(?P<fraction>\d*))?)?
            )?
            (?P<zone>\s*[^\s\d:.].*|\s*[+-].*)?
          )?
        )?
      )?
    )?
    """,
    re.VERBOSE,
)
_TIME_ONLY = re.compile(r"T?\d{1,2}:\d{1,2}(:\d{1,2}(\.\d*)?)?(\s*\S.*)?")
_OFFSET = re.compile(r"([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?")


class NonDeterministic(ValueError):
    """A timestamp text whose value depends on when the query runs (a time without a date)."""


class InvalidTimestamp(ValueError):
    """A timestamp text Spark rejects (bad field, unknown zone, out of range)."""


# ---------------------------------------------------------------- far values


@dataclass(frozen=True)
class FarTimestamp:
    """A TIMESTAMP outside Python's years 1..9999, as Spark holds it.

    ``micros`` counts microseconds since the epoch: of UTC for an instant
    (``utc=True``, Spark's TIMESTAMP), of the wall clock for a TIMESTAMP_NTZ.
    Orders and compares with :class:`datetime.datetime` of the same kind.
    """

    micros: int
    utc: bool = True

    def isoformat(self, sep: str = " ") -> str:
        """``+10000-01-01 00:00:00[.ffffff][+00:00]``: Spark's spelling of far years."""
        days, rest = divmod(self.micros, MICROS_PER_DAY)
        year, month, day = civil_from_days(days)
        seconds, micros = divmod(rest, 1_000_000)
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        sign = "-" if year < 0 else ("+" if year > 9999 else "")
        text = (
            f"{sign}{abs(year):04d}-{month:02d}-{day:02d}{sep}{hour:02d}:{minute:02d}:{second:02d}"
        )
        if micros:
            text += f".{micros:06d}"
        return text + ("+00:00" if self.utc else "")

    def _other(self, other: object) -> int | None:
        if isinstance(other, FarTimestamp) and other.utc == self.utc:
            return other.micros
        if isinstance(other, dt.datetime) and (other.tzinfo is not None) == self.utc:
            return timestamp_micros(other)
        return None

    def __lt__(self, other: object) -> bool:
        value = self._other(other)
        if value is None:
            return NotImplemented
        return self.micros < value

    def __le__(self, other: object) -> bool:
        value = self._other(other)
        if value is None:
            return NotImplemented
        return self.micros <= value

    def __gt__(self, other: object) -> bool:
        value = self._other(other)
        if value is None:
            return NotImplemented
        return self.micros > value

    def __ge__(self, other: object) -> bool:
        value = self._other(other)
        if value is None:
            return NotImplemented
        return self.micros >= value


TimestampValue = dt.datetime | FarTimestamp


def timestamp_micros(value: TimestampValue) -> int:
    """Microseconds since the epoch (UTC for aware values, wall clock for naive ones)."""
    if isinstance(value, FarTimestamp):
        return value.micros
    if value.tzinfo is None:
        return (value - _EPOCH) // _ONE_US
    return (value - _EPOCH_UTC) // _ONE_US


def timestamp_value(micros: int, utc: bool) -> TimestampValue:
    """The value of ``micros``: a ``datetime`` (aware UTC when ``utc``) when Python can hold it."""
    days = micros // MICROS_PER_DAY
    year = civil_from_days(days)[0]
    if 1 <= year <= 9999:
        moment = _EPOCH + dt.timedelta(microseconds=micros)
        return moment.replace(tzinfo=dt.timezone.utc) if utc else moment
    return FarTimestamp(micros, utc)


def is_timestamp_value(value: object) -> bool:
    return isinstance(value, dt.datetime | FarTimestamp)


# ---------------------------------------------------------------- calendar


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year; year 0 exists).

    >>> days_from_civil(1970, 1, 1), days_from_civil(10000, 1, 1), days_from_civil(0, 12, 31)
    (0, 2932897, -719163)
    """
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    mp = (month + 9) % 12
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """Inverse of :func:`days_from_civil`.

    >>> civil_from_days(2932897), civil_from_days(-719528)
    ((10000, 1, 1), (0, 1, 1))
    """
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _days_in_month(year: int, month: int) -> int:
    following = (year + 1, 1) if month == 12 else (year, month + 1)
    return days_from_civil(*following, 1) - days_from_civil(year, month, 1)


# ---------------------------------------------------------------- zones


def zone(name: str) -> dt.tzinfo:
    """A tzinfo for a Spark zone name: ``UTC``, ``Z``, ``+05:30``, ``GMT-8``, ``PST``, ``Europe/Paris``.

    >>> zone("+5:30"), zone("UTC")
    (datetime.timezone(datetime.timedelta(seconds=19800)), datetime.timezone.utc)
    """
    text = name.strip()
    if text in ("UTC", "Z", "GMT", "UT"):
        return dt.timezone.utc
    for prefix in ("UTC", "GMT", "UT"):
        if text.startswith(prefix) and text[len(prefix) : len(prefix) + 1] in ("+", "-"):
            return _fixed_offset(text[len(prefix) :], name)
    if text[:1] in ("+", "-"):
        return _fixed_offset(text, name)
    mapped = SHORT_IDS.get(text, text)
    if mapped[:1] in ("+", "-"):
        return _fixed_offset(mapped, name)
    try:
        return zoneinfo.ZoneInfo(mapped)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidTimestamp(f"unknown time zone {name!r}") from None


def _fixed_offset(text: str, name: str) -> dt.timezone:
    match = _OFFSET.fullmatch(text)
    if match is None:
        raise InvalidTimestamp(f"unknown time zone {name!r}")
    sign = -1 if match.group(1) == "-" else 1
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups()[1:])
    if hours > 18 or minutes > 59 or seconds > 59 or (hours == 18 and (minutes or seconds)):
        raise InvalidTimestamp(f"time zone offset {name!r} is out of range")
    return dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes, seconds=seconds))


class UncertainOffset(Exception):
    """A region zone's offset before 1970, which Spark's rules may not share."""


#: the first time (micros since the epoch, an instant or a wall-clock time) whose offsets
#: lakelayout trusts in a region zone: tzdata keeps the history exact from 1970 on
TRUSTED_FROM = 0


def trusted_zone(tz: dt.tzinfo) -> bool:
    """Whether ``tz``'s offsets are the same in every time zone database: a fixed offset or
    UTC (``Etc/...``), not a region zone."""
    key = getattr(tz, "key", None)
    return key is None or key.startswith("Etc/") or key in _UTC_KEYS


_UTC_KEYS = frozenset({"UTC", "UCT", "GMT", "Universal", "Zulu", "Greenwich"})


def check_trusted(tz: dt.tzinfo, micros: int) -> None:
    """UncertainOffset for a time before 1970 in a region zone.

    Python reads the system's zone database (Debian's tzdata), Spark the JVM's own:
    before 1970 they disagree for some zones (tzdata keeps only post-1970 history
    exact; Europe/Oslo in 1960 was UTC+1 for Spark, UTC+2 here), and a literal
    ``TIMESTAMP'1960-06-01 13:00'`` bound to another instant than Spark's skipped the
    file holding it (found by an audit). Such times are left to Spark.
    """
    if micros < TRUSTED_FROM and not trusted_zone(tz):
        raise UncertainOffset(
            f"a time before 1970 in the time zone {getattr(tz, 'key', tz)}, whose offsets "
            "there may differ between Python's zone database and Spark's"
        )


def offset_micros(tz: dt.tzinfo, wall: int) -> int:
    """UTC offset (microseconds) of ``tz`` at the wall-clock time ``wall`` (micros since epoch).

    An ambiguous wall time takes the earlier offset and a skipped one the
    offset before the gap (``fold=0``), as Java's ``ZonedDateTime.of`` does.
    UncertainOffset before 1970 in a region zone (:func:`check_trusted`).
    """
    check_trusted(tz, wall)
    days = wall // MICROS_PER_DAY
    year, month, day = civil_from_days(days)
    shift = 0
    if year > 9998:
        shift = -_CYCLE_YEARS * ((year - 9998 + _CYCLE_YEARS - 1) // _CYCLE_YEARS)
    elif year < 2:
        shift = _CYCLE_YEARS * ((2 - year + _CYCLE_YEARS - 1) // _CYCLE_YEARS)
    rest = wall - days * MICROS_PER_DAY
    local = dt.datetime(year + shift, month, day) + dt.timedelta(microseconds=rest)
    offset = local.replace(tzinfo=tz).utcoffset()
    return 0 if offset is None else offset // _ONE_US


def to_utc_micros(wall: int, tz: dt.tzinfo) -> int:
    """The instant at which the clocks of ``tz`` show ``wall``."""
    return wall - offset_micros(tz, wall)


def to_wall_micros(instant: int, tz: dt.tzinfo) -> int:
    """The wall-clock time ``tz`` shows at ``instant`` (both micros since the epoch)."""
    guess = instant + offset_micros(tz, instant)
    return instant + offset_micros(tz, guess) if to_utc_micros(guess, tz) != instant else guess


# ---------------------------------------------------------------- parsing


def parse_timestamp_text(text: str, session_zone: str | None) -> TimestampValue:
    """A TIMESTAMP (``session_zone`` given) or TIMESTAMP_NTZ (``None``) from Spark's text forms.

    >>> parse_timestamp_text("2019-09-09 01:02:03.456789 PST", "UTC")
    datetime.datetime(2019, 9, 9, 8, 2, 3, 456789, tzinfo=datetime.timezone.utc)
    >>> parse_timestamp_text("9999-12-31 23:59:59.999999", "America/New_York")
    FarTimestamp(micros=253402318799999999, utc=True)
    >>> parse_timestamp_text("2019-09-09 01:02:03 +05:30", None)
    datetime.datetime(2019, 9, 9, 1, 2, 3)
    """
    cleaned = text.strip()
    match = _TEXT.fullmatch(cleaned)
    if match is None:
        if _TIME_ONLY.fullmatch(cleaned):
            raise NonDeterministic(f"{text!r} has no date: Spark takes today's date")
        raise InvalidTimestamp(f"{text!r} is not a valid TIMESTAMP")
    fields = match.groupdict()
    if fields["sep"] == "T" and fields["hour"] is None:
        raise InvalidTimestamp(f"{text!r} is not a valid TIMESTAMP")
    year = int(fields["year"]) * (-1 if fields["sign"] == "-" else 1)
    month, day, hour, minute, second = (
        int(fields[k]) if fields[k] else default
        for k, default in (("month", 1), ("day", 1), ("hour", 0), ("minute", 0), ("second", 0))
    )
    if not (1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)):
        raise InvalidTimestamp(f"{text!r} is not a valid TIMESTAMP: no such date")
    if hour > 23 or minute > 59 or second > 59:
        raise InvalidTimestamp(f"{text!r} is not a valid TIMESTAMP: no such time")
    fraction = (fields["fraction"] or "")[:6].ljust(6, "0")
    wall = (
        days_from_civil(year, month, day) * MICROS_PER_DAY
        + ((hour * 60 + minute) * 60 + second) * 1_000_000
        + int(fraction)
    )
    written = (fields["zone"] or "").strip()
    if session_zone is None:
        if written:
            zone(written)  # Spark still checks the zone; the wall-clock time is kept
        return _checked(wall, utc=False, text=text)
    tz = zone(written) if written else zone(session_zone)
    return _checked(to_utc_micros(wall, tz), utc=True, text=text)


def written_zone(text: str) -> bool:
    """Whether ``text`` is a timestamp in one of Spark's text forms with a zone or offset
    written (``... Z``, ``... +05:30``, ``... America/New_York``).

    >>> written_zone("2026-11-01 05:30:00+00:00"), written_zone("2026-11-01 05:30:00")
    (True, False)
    """
    match = _TEXT.fullmatch(text.strip())
    return match is not None and bool((match.group("zone") or "").strip())


def _checked(micros: int, *, utc: bool, text: str) -> TimestampValue:
    if not MIN_MICROS <= micros <= MAX_MICROS:
        raise InvalidTimestamp(f"{text!r} is outside Spark's TIMESTAMP range")
    return timestamp_value(micros, utc)


__all__ = [
    "MAX_MICROS",
    "MIN_MICROS",
    "FarTimestamp",
    "InvalidTimestamp",
    "NonDeterministic",
    "TimestampValue",
    "UncertainOffset",
    "check_trusted",
    "civil_from_days",
    "days_from_civil",
    "is_timestamp_value",
    "offset_micros",
    "parse_timestamp_text",
    "timestamp_micros",
    "timestamp_value",
    "to_utc_micros",
    "to_wall_micros",
    "trusted_zone",
    "zone",
]
