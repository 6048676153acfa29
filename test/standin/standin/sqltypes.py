"""SQL Server data types and their Python value representation.

This module is the contract between the SQL engine (standin.engine) and the
TDS protocol layer (standin.tds).  The engine produces values in exactly the
representations documented here; the protocol layer encodes them on the wire
(and decodes RPC parameters into them).  Neither side may invent another
representation: add it here first.

Value representation (None is SQL NULL for every type):

  bit                       bool
  tinyint/smallint/int/bigint
                            int
  decimal/numeric(p,s)      decimal.Decimal (already quantized to scale s)
  money/smallmoney          decimal.Decimal (quantized to 4 decimal places)
  real/float                float
  date                      datetime.date
  time(n)                   SqlTime
  datetime                  SqlDateTime      (days since 1900-01-01, 1/300 s ticks)
  smalldatetime             SqlSmallDateTime (days since 1900-01-01, minutes)
  datetime2(n)              SqlDateTime2
  datetimeoffset(n)         SqlDateTimeOffset (local date/time as written + offset)
  char/varchar/nchar/nvarchar/text/ntext/xml/sysname
                            str
  binary/varbinary/image/rowversion/timestamp
                            bytes
  uniqueidentifier          uuid.UUID
  sql_variant               SqlVariant(base_type, value)
  hierarchyid/geometry/geography
                            bytes (the CLR serialization; the stand-in stores
                            whatever bytes it is given)
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

# Canonical type names (lower case, as SQL Server spells them in sys.types).
FIXED_TYPES = {
    "bit", "tinyint", "smallint", "int", "bigint", "money", "smallmoney",
    "real", "float", "date", "datetime", "smalldatetime", "uniqueidentifier",
    "text", "ntext", "image", "xml", "sql_variant", "rowversion", "timestamp",
    "hierarchyid", "geometry", "geography",
}
LENGTH_TYPES = {"char", "varchar", "nchar", "nvarchar", "binary", "varbinary"}
PRECISION_SCALE_TYPES = {"decimal", "numeric"}
SCALE_TYPES = {"time", "datetime2", "datetimeoffset"}

MAX = -1  # length value meaning "(max)"

# Default collation: SQL_Latin1_General_CP1_CI_AS (LCID 0x0409, sort id 52).
DEFAULT_COLLATION = bytes([0x09, 0x04, 0xD0, 0x00, 0x34])


@dataclass(frozen=True)
class SqlType:
    """A SQL Server column/expression type.

    name       canonical lower-case type name (see the sets above)
    length     for char/varchar/binary/varbinary: bytes; for nchar/nvarchar:
               characters (UTF-16 code units); MAX (-1) for (max); None otherwise
    precision  decimal/numeric precision (1..38); float: 24 or 53
    scale      decimal/numeric scale; time/datetime2/datetimeoffset: 0..7
    collation  5-byte TDS collation for character types, else None
    """

    name: str
    length: Optional[int] = None
    precision: Optional[int] = None
    scale: Optional[int] = None
    collation: Optional[bytes] = None

    def is_max(self) -> bool:
        return self.length == MAX

    def is_character(self) -> bool:
        return self.name in ("char", "varchar", "nchar", "nvarchar", "text",
                             "ntext", "xml", "sysname")

    def sql(self) -> str:
        """Type as T-SQL text, e.g. 'decimal(18,4)', 'nvarchar(max)'."""
        if self.name in LENGTH_TYPES:
            return "%s(%s)" % (self.name, "max" if self.length == MAX else self.length)
        if self.name in PRECISION_SCALE_TYPES:
            return "%s(%d,%d)" % (self.name, self.precision, self.scale)
        if self.name in SCALE_TYPES:
            return "%s(%d)" % (self.name, self.scale)
        if self.name == "float" and self.precision not in (None, 53):
            return "float(%d)" % self.precision
        return self.name


# Handy constructors used by both sides.
def t_int() -> SqlType:
    return SqlType("int")


def t_bigint() -> SqlType:
    return SqlType("bigint")


def t_bit() -> SqlType:
    return SqlType("bit")


def t_binary(n: int) -> SqlType:
    return SqlType("binary", length=n)


def t_varbinary(n: int) -> SqlType:
    return SqlType("varbinary", length=n)


def t_nvarchar(n: int) -> SqlType:
    return SqlType("nvarchar", length=n, collation=DEFAULT_COLLATION)


def t_varchar(n: int) -> SqlType:
    return SqlType("varchar", length=n, collation=DEFAULT_COLLATION)


def t_datetime() -> SqlType:
    return SqlType("datetime")


def t_lsn() -> SqlType:
    """CDC LSNs and seqvals: binary(10)."""
    return SqlType("binary", length=10)


# --- temporal values with 100 ns precision ---------------------------------

TICKS_PER_SECOND = 10_000_000  # 100 ns ticks
TICKS_PER_DAY = 86_400 * TICKS_PER_SECOND


@dataclass(frozen=True, order=True)
class SqlTime:
    """time(n): 100 ns ticks since midnight, 0 <= ticks < TICKS_PER_DAY.

    The value is already rounded to the column's scale."""

    ticks: int

    def __str__(self) -> str:
        secs, frac = divmod(self.ticks, TICKS_PER_SECOND)
        h, rem = divmod(secs, 3600)
        m, s = divmod(rem, 60)
        return "%02d:%02d:%02d.%07d" % (h, m, s, frac)


@dataclass(frozen=True, order=True)
class SqlDateTime2:
    """datetime2(n): a date plus 100 ns ticks since midnight (no time zone)."""

    date: datetime.date
    ticks: int

    def __str__(self) -> str:
        return "%s %s" % (self.date.isoformat(), SqlTime(self.ticks))


@dataclass(frozen=True)
class SqlDateTimeOffset:
    """datetimeoffset(n): local date/time as written plus offset in minutes
    (-840..840).  UTC = local - offset.  Comparison/equality is on the UTC
    instant (as in SQL Server), so use utc_key() for ordering."""

    date: datetime.date
    ticks: int
    offset_minutes: int

    def utc_key(self) -> tuple:
        total = (self.date.toordinal() * TICKS_PER_DAY + self.ticks
                 - self.offset_minutes * 60 * TICKS_PER_SECOND)
        return (total,)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, SqlDateTimeOffset) and self.utc_key() == other.utc_key()

    def __hash__(self) -> int:
        return hash(self.utc_key())

    def __lt__(self, other: "SqlDateTimeOffset") -> bool:
        return self.utc_key() < other.utc_key()

    def __str__(self) -> str:
        sign = "+" if self.offset_minutes >= 0 else "-"
        off = abs(self.offset_minutes)
        return "%s %s %s%02d:%02d" % (self.date.isoformat(), SqlTime(self.ticks),
                                      sign, off // 60, off % 60)


@dataclass(frozen=True, order=True)
class SqlDateTime:
    """datetime: days since 1900-01-01 (may be negative back to 1753-01-01)
    and ticks of 1/300 s since midnight (0 <= ticks < 25_920_000)."""

    days: int
    ticks300: int


@dataclass(frozen=True, order=True)
class SqlSmallDateTime:
    """smalldatetime: days since 1900-01-01 (0..65535) and minutes since midnight."""

    days: int
    minutes: int


@dataclass(frozen=True)
class SqlVariant:
    """sql_variant: the base type and a value in that type's representation."""

    base_type: SqlType
    value: Any


# --- columns ---------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    """One column of a result set (COLMETADATA entry)."""

    name: str                 # may be "" for unaliased expressions
    type: SqlType
    nullable: bool = True
    identity: bool = False
    computed: bool = False
    table_name: Optional[str] = None  # for text/ntext/image TableName part


Decimal = decimal.Decimal
UUID = uuid.UUID
