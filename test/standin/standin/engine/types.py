"""Type names, parsing of type declarations, precedence and result types."""

from __future__ import annotations

from ..results import SqlError
from ..sqltypes import (DEFAULT_COLLATION, MAX, SqlType)

# sys.types: name -> (system_type_id, max_length, precision, scale)
SYSTEM_TYPES = {
    "image": (34, 16, 0, 0), "text": (35, 16, 0, 0), "uniqueidentifier": (36, 16, 0, 0),
    "date": (40, 3, 10, 0), "time": (41, 5, 16, 7), "datetime2": (42, 8, 27, 7),
    "datetimeoffset": (43, 10, 34, 7), "tinyint": (48, 1, 3, 0), "smallint": (52, 2, 5, 0),
    "int": (56, 4, 10, 0), "smalldatetime": (58, 4, 16, 0), "real": (59, 4, 24, 0),
    "money": (60, 8, 19, 4), "datetime": (61, 8, 23, 3), "float": (62, 8, 53, 0),
    "sql_variant": (98, 8016, 0, 0), "ntext": (99, 16, 0, 0), "bit": (104, 1, 1, 0),
    "decimal": (106, 17, 38, 38), "numeric": (108, 17, 38, 38), "smallmoney": (122, 4, 10, 4),
    "bigint": (127, 8, 19, 0), "hierarchyid": (240, 892, 0, 0), "geometry": (240, -1, 0, 0),
    "geography": (240, -1, 0, 0), "varbinary": (165, 8000, 0, 0), "varchar": (167, 8000, 0, 0),
    "binary": (173, 8000, 0, 0), "char": (175, 8000, 0, 0), "timestamp": (189, 8, 0, 0),
    "nvarchar": (231, 8000, 0, 0), "nchar": (239, 8000, 0, 0), "xml": (241, -1, 0, 0),
    "sysname": (231, 256, 0, 0),
}

# Data type precedence, highest first (SQL Server "Data type precedence").
_PRECEDENCE = [
    "sql_variant", "xml", "datetimeoffset", "datetime2", "datetime", "smalldatetime",
    "date", "time", "float", "real", "decimal", "numeric", "money", "smallmoney", "bigint",
    "int", "smallint", "tinyint", "bit", "ntext", "text", "image", "timestamp", "rowversion",
    "uniqueidentifier", "nvarchar", "nchar", "varchar", "char", "varbinary", "binary",
    "hierarchyid", "geometry", "geography",
]
PRECEDENCE = {name: len(_PRECEDENCE) - i for i, name in enumerate(_PRECEDENCE)}

INTEGER_TYPES = {"bit", "tinyint", "smallint", "int", "bigint"}
INT_RANGES = {"tinyint": (0, 255), "smallint": (-32768, 32767),
              "int": (-2 ** 31, 2 ** 31 - 1), "bigint": (-2 ** 63, 2 ** 63 - 1),
              "bit": (None, None)}
INT_AS_DECIMAL = {"bit": (1, 0), "tinyint": (3, 0), "smallint": (5, 0), "int": (10, 0),
                  "bigint": (19, 0), "money": (19, 4), "smallmoney": (10, 4)}
NUMERIC_TYPES = INTEGER_TYPES | {"decimal", "numeric", "money", "smallmoney", "real", "float"}
STRING_TYPES = {"char", "varchar", "nchar", "nvarchar", "text", "ntext", "xml", "sysname"}
UNICODE_TYPES = {"nchar", "nvarchar", "ntext", "xml", "sysname"}
BINARY_TYPES = {"binary", "varbinary", "image", "timestamp", "rowversion"}
TEMPORAL_TYPES = {"date", "time", "datetime", "datetime2", "smalldatetime", "datetimeoffset"}
LOB_OLD_TYPES = {"text", "ntext", "image"}

INT_TYPE = SqlType("int")
BIGINT_TYPE = SqlType("bigint")
BIT_TYPE = SqlType("bit")
FLOAT_TYPE = SqlType("float", precision=53)
DATETIME_TYPE = SqlType("datetime")
LSN_TYPE = SqlType("binary", length=10)
SYSNAME_TYPE = SqlType("nvarchar", length=128, collation=DEFAULT_COLLATION)
NULL_TYPE = SqlType("int")   # type of a bare NULL


def nvarchar(n):
    return SqlType("nvarchar", length=n, collation=DEFAULT_COLLATION)


def varchar(n):
    return SqlType("varchar", length=n, collation=DEFAULT_COLLATION)


def varbinary(n):
    return SqlType("varbinary", length=n)


def is_max_lob(t: SqlType) -> bool:
    """varchar(max)/nvarchar(max)/varbinary(max) and xml: the 'max' LOB rules."""
    return (t.name in ("varchar", "nvarchar", "varbinary") and t.length == MAX) or t.name == "xml"


def make_type(name: str, args, line=1) -> SqlType:
    """Build a SqlType from a declaration such as decimal(18,4), nvarchar(max)."""
    lname = name.lower()
    if lname == "rowversion":
        lname = "timestamp"
    if lname == "sysname":
        return SYSNAME_TYPE
    if lname in ("character",):
        lname = "char"
    if lname == "dec":
        lname = "decimal"
    if lname == "integer":
        lname = "int"
    if lname == "double":
        lname = "float"
    if lname not in SYSTEM_TYPES:
        raise SqlError(2715, 16, 6, "Column, parameter, or variable #1: Cannot find data type %s." % name, line)
    coll = DEFAULT_COLLATION if lname in STRING_TYPES and lname != "xml" else None
    if lname in ("char", "varchar", "nchar", "nvarchar", "binary", "varbinary"):
        if not args:
            return SqlType(lname, length=1, collation=coll)
        n = args[0]
        if n == "max":
            if lname in ("char", "nchar", "binary"):
                raise SqlError(102, 15, 1, "Incorrect syntax near 'max'.", line)
            return SqlType(lname, length=MAX, collation=coll)
        limit = 4000 if lname in ("nchar", "nvarchar") else 8000
        if n < 1 or n > limit:
            raise SqlError(2717 if lname[0] == "n" else 131, 16, 2,
                           "The size (%d) given to the type '%s' exceeds the maximum allowed (%d)."
                           % (n, lname, limit), line)
        return SqlType(lname, length=n, collation=coll)
    if lname in ("decimal", "numeric"):
        p = args[0] if args else 18
        s = args[1] if len(args) > 1 else 0
        if not 1 <= p <= 38:
            raise SqlError(2750, 16, 1, "Column or parameter #1: Specified column precision %d is "
                           "greater than the maximum precision of 38." % p, line)
        if s > p:
            raise SqlError(2751, 16, 1, "Column or parameter #1: Specified column scale %d is "
                           "greater than the specified precision of %d." % (s, p), line)
        return SqlType(lname, precision=p, scale=s)
    if lname in ("time", "datetime2", "datetimeoffset"):
        s = args[0] if args else 7
        if not 0 <= s <= 7:
            raise SqlError(1002, 16, 1, "Line %d: Specified scale %d is invalid." % (line, s), line)
        return SqlType(lname, scale=s)
    if lname == "float":
        p = args[0] if args else 53
        if not 1 <= p <= 53:
            raise SqlError(2750, 16, 1, "Column or parameter #1: Specified column precision %d is "
                           "greater than the maximum precision of 53." % p, line)
        return SqlType("real") if p <= 24 else FLOAT_TYPE
    if lname == "real":
        return SqlType("real")
    if lname == "text":
        return SqlType("text", collation=coll)
    if lname == "ntext":
        return SqlType("ntext", collation=coll)
    return SqlType(lname)


def with_collation(t: SqlType, coll_name: str) -> SqlType:
    """Attach a COLLATE clause: we keep the default LCID bytes but flag case
    sensitivity through the sort id byte (0x34 CI vs 0x33 CS / 0x1E BIN)."""
    up = coll_name.upper()
    sort_id = 0x34
    if "_BIN" in up:
        sort_id = 0x1E
    elif "_CS" in up:
        sort_id = 0x33
    coll = bytes([0x09, 0x04, 0xD0, 0x00, sort_id])
    return SqlType(t.name, t.length, t.precision, t.scale, coll)


def collation_name(t: SqlType):
    if not t.is_character() or t.collation is None:
        return None
    sid = t.collation[4]
    if sid == 0x1E:
        return "Latin1_General_BIN2"
    if sid == 0x33:
        return "SQL_Latin1_General_CP1_CS_AS"
    return "SQL_Latin1_General_CP1_CI_AS"


def is_case_insensitive(t: SqlType) -> bool:
    return t.collation is None or t.collation[4] == 0x34


def precedence(t: SqlType) -> int:
    return PRECEDENCE.get(t.name, 0)


def higher(t1: SqlType, t2: SqlType) -> SqlType:
    # an untyped NULL literal never decides the type
    if t1 is NULL_TYPE:
        return t2
    if t2 is NULL_TYPE:
        return t1
    return t1 if precedence(t1) >= precedence(t2) else t2


def decimal_ps(t: SqlType):
    if t.name in ("decimal", "numeric"):
        return t.precision, t.scale
    return INT_AS_DECIMAL.get(t.name, (38, 10))


def _cap(p, s, min_scale=6):
    if p > 38:
        s = max(min(s, min_scale), s - (p - 38)) if s > min_scale else s
        p = 38
    return SqlType("numeric", precision=p, scale=min(s, p))


def arithmetic_type(op: str, t1: SqlType, t2: SqlType) -> SqlType:
    """Result type of t1 <op> t2 for numeric operands (SQL Server rules)."""
    hi = higher(t1, t2)
    if hi.name in ("float", "real"):
        return FLOAT_TYPE if "float" in (t1.name, t2.name) else SqlType("real")
    if hi.name in ("decimal", "numeric"):
        p1, s1 = decimal_ps(t1)
        p2, s2 = decimal_ps(t2)
        if op in "+-":
            s = max(s1, s2)
            return _cap(max(p1 - s1, p2 - s2) + s + 1, s)
        if op == "*":
            return _cap(p1 + p2 + 1, s1 + s2)
        if op == "/":
            s = max(6, s1 + p2 + 1)
            return _cap(p1 - s1 + s2 + s, s)
        if op == "%":
            s = max(s1, s2)
            return _cap(min(p1 - s1, p2 - s2) + s, s)
    if hi.name in ("money", "smallmoney"):
        return SqlType("money")
    if hi.name == "bit":
        return INT_TYPE
    if hi.name == "tinyint" and op == "-":
        return SqlType("tinyint")
    return SqlType(hi.name)


def literal_int_type(v: int) -> SqlType:
    if -2 ** 31 <= v < 2 ** 31:
        return INT_TYPE
    p = len(str(abs(v)))
    return SqlType("numeric", precision=max(p, 1), scale=0)
