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


# Windows collation name prefixes -> LCID (the code page follows from it:
# tds/collation.py).  "Collation and Unicode support", "Windows collation
# name"; sys.fn_helpcollations() lists them on a server.
_COLLATION_LCID = {
    "LATIN1_GENERAL": 0x0409, "CYRILLIC_GENERAL": 0x0419, "GREEK": 0x0408, "POLISH": 0x0415,
    "CZECH": 0x0405, "HUNGARIAN": 0x040E, "TURKISH": 0x041F, "HEBREW": 0x040D, "ARABIC": 0x0401,
    "ESTONIAN": 0x0425, "LATVIAN": 0x0426, "LITHUANIAN": 0x0427, "UKRAINIAN": 0x0422,
    "JAPANESE": 0x0411, "CHINESE_PRC": 0x0804, "KOREAN_WANSUNG": 0x0412, "THAI": 0x041E,
}
_COLLATION_NAMES = {DEFAULT_COLLATION: "SQL_Latin1_General_CP1_CI_AS"}

# the LCID/flags word of [MS-TDS] 2.2.5.1.2
_IGNORE_CASE, _IGNORE_ACCENT, _IGNORE_KANA, _IGNORE_WIDTH = 1 << 20, 1 << 21, 1 << 22, 1 << 23
_BINARY, _BINARY2, _UTF8 = 1 << 24, 1 << 25, 1 << 26


def collation_bytes(coll_name: str, line=1) -> bytes:
    """The 5-byte TDS collation of a collation name; 448 for an unknown one.
    SQL collations carry their sort id (52 = SQL_Latin1_General_CP1_CI_AS,
    51 = …_CS_AS); Windows collations carry LCID and flags, sort id 0; the
    _UTF8 ones (SQL Server 2019) set fUTF8."""
    up = coll_name.upper()
    if up.startswith("SQL_LATIN1_GENERAL_CP1_"):
        if "_CI_" in up + "_":
            word, sort_id = 0x0409 | _IGNORE_CASE | _IGNORE_KANA | _IGNORE_WIDTH, 52
        elif "_CS_" in up + "_":
            word, sort_id = 0x0409 | _IGNORE_KANA | _IGNORE_WIDTH, 51
        else:
            raise SqlError(448, 16, 1, "Invalid collation '%s'." % coll_name, line)
    else:
        parts = up.split("_")
        prefix = None
        for n in range(len(parts), 0, -1):
            if "_".join(parts[:n]) in _COLLATION_LCID:
                prefix = "_".join(parts[:n])
                rest = parts[n:]
                break
        if prefix is None:
            raise SqlError(448, 16, 1, "Invalid collation '%s'." % coll_name, line)
        rest = [r for r in rest if not r.isdigit()]          # version: _90, _100, _140
        word = _COLLATION_LCID[prefix]
        if "BIN2" in rest:
            word |= _BINARY2
        elif "BIN" in rest:
            word |= _BINARY
        elif "CI" in rest or "CS" in rest:
            if "CI" in rest:
                word |= _IGNORE_CASE
            if "AI" in rest:
                word |= _IGNORE_ACCENT
            if "KS" not in rest:
                word |= _IGNORE_KANA
            if "WS" not in rest:
                word |= _IGNORE_WIDTH
        else:
            raise SqlError(448, 16, 1, "Invalid collation '%s'." % coll_name, line)
        if rest and rest[-1] == "UTF8":
            word |= _UTF8
        sort_id = 0
    coll = word.to_bytes(4, "little") + bytes([sort_id])
    _COLLATION_NAMES.setdefault(coll, coll_name)
    return coll


def with_collation(t: SqlType, coll_name: str, line=1) -> SqlType:
    """Attach a COLLATE clause to a character type."""
    return SqlType(t.name, t.length, t.precision, t.scale, collation_bytes(coll_name, line))


def collation_name(t: SqlType):
    if not t.is_character() or t.collation is None:
        return None
    name = _COLLATION_NAMES.get(t.collation)
    if name is not None:
        return name
    sid = t.collation[4]
    if sid == 0x1E:
        return "Latin1_General_BIN2"
    if sid == 0x33:
        return "SQL_Latin1_General_CP1_CS_AS"
    return "SQL_Latin1_General_CP1_CI_AS"


def _collation_word(t: SqlType) -> int:
    return int.from_bytes(t.collation[:4], "little")


def is_case_insensitive(t: SqlType) -> bool:
    if t.collation is None:
        return True
    sid = t.collation[4]
    if sid:
        return sid == 0x34
    return bool(_collation_word(t) & _IGNORE_CASE)


def codec(t: SqlType) -> str:
    """Python codec of the code page of a non-Unicode character type (its
    collation's; the database default for none)."""
    from ..tds.collation import codec_for
    return codec_for(t.collation if t is not None and t.collation is not None else DEFAULT_COLLATION)


def charset_name(t: SqlType) -> str:
    """INFORMATION_SCHEMA.COLUMNS.CHARACTER_SET_NAME of a non-Unicode type."""
    c = codec(t)
    return {"cp1252": "iso_1", "utf-8": "UTF8"}.get(c, c)


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
