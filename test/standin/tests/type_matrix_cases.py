"""The type matrix: every type of sqltypes.py with its edge values (and NULL),
the T-SQL literal for each value, and the canonical text form that both
client dumps (tests/clients/dblib_dump.c, tedious_dump.js) must print.

Canonical forms: NULL, i:<int>, f4:/f8:<IEEE bits hex>, n:<decimal>,
d:YYYY-MM-DD, t:HH:MM:SS.fffffff, dt:YYYY-MM-DD HH:MM:SS.fffffff,
dtm:... (datetime at millisecond display precision), dto:<UTC>|+HH:MM,
s:<UTF-8 hex>, b:<hex>, g:<uuid lower case>, v:<UTF-8 hex of the value's text>."""

from __future__ import annotations

import datetime
import decimal
import os
import struct
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from standin.sqltypes import (MAX, SqlDateTime, SqlDateTime2, SqlDateTimeOffset,  # noqa: E402
                              SqlSmallDateTime, SqlTime, SqlType, SqlVariant,
                              DEFAULT_COLLATION, TICKS_PER_DAY, TICKS_PER_SECOND)

D = decimal.Decimal
C = DEFAULT_COLLATION


def T(name, **kw):
    if name in ("char", "varchar", "nchar", "nvarchar", "text", "ntext"):
        kw.setdefault("collation", C)
    return SqlType(name, **kw)


def _time(h, m, s, ticks=0):
    return ((h * 60 + m) * 60 + s) * TICKS_PER_SECOND + ticks


def _days1900(y, mo, d):
    return datetime.date(y, mo, d).toordinal() - datetime.date(1900, 1, 1).toordinal()


def _hexlit(b: bytes) -> str:
    return "0x" + b.hex().upper() if b else "0x"


BIG_VARCHAR = "x" * 150_000                     # > 100 KB, spans many packets
BIG_NVARCHAR = "\u00fc\U0001F600" * 40_000      # 240 KB of UTF-16 incl. surrogates
BIG_VARBINARY = bytes(range(256)) * 500         # 128 000 bytes
NON_BMP = "\U0001F600 non-BMP \U0001D11E"

# (column name, type, [(value, T-SQL literal)]); every type also gets NULL.
# A literal of None means "generate it from the value" (literal_for).
CASES = [
    ("c_bit", T("bit"), [(True, "1"), (False, "0")]),
    ("c_tinyint", T("tinyint"), [(0, "0"), (255, "255")]),
    ("c_smallint", T("smallint"), [(-32768, "-32768"), (32767, "32767")]),
    ("c_int", T("int"), [(-2147483648, "-2147483648"), (2147483647, "2147483647")]),
    ("c_bigint", T("bigint"), [(-9223372036854775808, "-9223372036854775808"),
                              (9223372036854775807, "9223372036854775807")]),
    ("c_dec38_0", T("decimal", precision=38, scale=0),
     [(D("9" * 38), "9" * 38), (D("-" + "9" * 38), "-" + "9" * 38), (D(0), "0")]),
    ("c_dec38_38", T("decimal", precision=38, scale=38),
     [(D("0." + "9" * 38), "0." + "9" * 38), (D("-0." + "0" * 37 + "1"), "-0." + "0" * 37 + "1")]),
    ("c_dec18_4", T("decimal", precision=18, scale=4),
     [(D("-12345.6789"), "-12345.6789"), (D("99999999999999.9999"), "99999999999999.9999"),
      (D("0.0000"), "0")]),
    ("c_num9_2", T("numeric", precision=9, scale=2), [(D("1234567.89"), "1234567.89")]),
    ("c_dec28_10", T("decimal", precision=28, scale=10),
     [(D("-123456789012345678.0123456789"), "-123456789012345678.0123456789")]),
    ("c_money", T("money"), [(D("922337203685477.5807"), "922337203685477.5807"),
                             (D("-922337203685477.5808"), "-922337203685477.5808"),
                             (D("0.0001"), "0.0001")]),
    ("c_smallmoney", T("smallmoney"), [(D("214748.3647"), "214748.3647"),
                                       (D("-214748.3648"), "-214748.3648")]),
    ("c_real", T("real"), [(1.5, "1.5"), (struct.unpack("<f", struct.pack("<f", 3.4028234663852886e38))[0],
                                          "3.4028234663852886E38"),
                           (struct.unpack("<f", struct.pack("<f", 0.1))[0], "0.1")]),
    ("c_float", T("float"), [(1.7976931348623157e308, "1.7976931348623157E308"),
                             (5e-324, "4.9406564584124654E-324"), (-0.1, "-0.1")]),
    ("c_date", T("date"), [(datetime.date(1, 1, 1), "'0001-01-01'"),
                           (datetime.date(9999, 12, 31), "'9999-12-31'")]),
]
for _s in range(8):
    _ticks = _time(23, 59, 59, 9_999_999 // 10 ** (7 - _s) * 10 ** (7 - _s))
    CASES.append(("c_time%d" % _s, T("time", scale=_s),
                  [(SqlTime(_ticks), "'%s'" % SqlTime(_ticks)), (SqlTime(0), "'00:00:00'")]))
CASES += [
    ("c_datetime", T("datetime"),
     [(SqlDateTime(_days1900(1753, 1, 1), 0), "'1753-01-01T00:00:00'"),
      (SqlDateTime(_days1900(9999, 12, 31), 25_919_999), "'9999-12-31T23:59:59.997'"),
      (SqlDateTime(_days1900(2024, 5, 6), 7_706_800), "'2024-05-06T07:08:09.333'"),
      (SqlDateTime(0, 1), "'1900-01-01T00:00:00.003'"),
      (SqlDateTime(0, 2), "'1900-01-01T00:00:00.007'")]),
    ("c_smalldatetime", T("smalldatetime"),
     [(SqlSmallDateTime(0, 0), "'1900-01-01T00:00:00'"),
      (SqlSmallDateTime(_days1900(2079, 6, 6), 23 * 60 + 59), "'2079-06-06T23:59:00'")]),
]
for _s in range(8):
    _ticks = _time(23, 59, 59, 9_999_999 // 10 ** (7 - _s) * 10 ** (7 - _s))
    _max = SqlDateTime2(datetime.date(9999, 12, 31), _ticks)
    _min = SqlDateTime2(datetime.date(1, 1, 1), 0)
    CASES.append(("c_datetime2_%d" % _s, T("datetime2", scale=_s),
                  [(_max, "'%sT%s'" % (_max.date, SqlTime(_ticks))), (_min, "'0001-01-01T00:00:00'")]))
CASES += [
    ("c_dto7", T("datetimeoffset", scale=7),
     [(SqlDateTimeOffset(datetime.date(2024, 5, 6), _time(7, 8, 9, 1_234_567), 14 * 60),
       "'2024-05-06T07:08:09.1234567+14:00'"),
      (SqlDateTimeOffset(datetime.date(2024, 5, 6), _time(7, 8, 9, 1_234_567), -14 * 60),
       "'2024-05-06T07:08:09.1234567-14:00'"),
      (SqlDateTimeOffset(datetime.date(9999, 12, 31), _time(9, 59, 59, 9_999_999), -14 * 60),
       "'9999-12-31T09:59:59.9999999-14:00'")]),
    ("c_dto0", T("datetimeoffset", scale=0),
     [(SqlDateTimeOffset(datetime.date(2000, 1, 1), _time(0, 30, 0), 330), "'2000-01-01T00:30:00+05:30'")]),
    ("c_char", T("char", length=5), [("ab   ", "'ab'"), ("     ", "''")]),
    ("c_varchar", T("varchar", length=20), [("h\u00e9llo \u20ac", "'h\u00e9llo \u20ac'"), ("", "''")]),
    ("c_nchar", T("nchar", length=4), [("\u00e9\U0001F600 ", "N'\u00e9\U0001F600'")]),
    ("c_nvarchar", T("nvarchar", length=30), [(NON_BMP, "N'%s'" % NON_BMP), ("", "N''")]),
    ("c_varchar_max", T("varchar", length=MAX),
     [(BIG_VARCHAR, None), ("", "''")]),
    ("c_nvarchar_max", T("nvarchar", length=MAX),
     [(BIG_NVARCHAR, None), ("", "N''")]),
    ("c_varbinary_max", T("varbinary", length=MAX), [(BIG_VARBINARY, None), (b"", "0x")]),
    ("c_text", T("text"), [("text \u00e9", "'text \u00e9'"), ("", "''")]),
    ("c_ntext", T("ntext"), [("ntext \U0001F600", "N'ntext \U0001F600'")]),
    ("c_image", T("image"), [(b"\x00\xffimage", _hexlit(b"\x00\xffimage"))]),
    ("c_binary", T("binary", length=4), [(b"\x00\x01\x02\x03", "0x00010203")]),
    ("c_lsn", T("binary", length=10), [(bytes.fromhex("0000002A000001F00003"), "0x0000002A000001F00003")]),
    ("c_varbinary", T("varbinary", length=8), [(b"\xff", "0xFF"), (b"", "0x")]),
    ("c_guid", T("uniqueidentifier"),
     [(uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF"), "'6F9619FF-8B86-D011-B42D-00C04FC964FF'")]),
    ("c_xml", T("xml"), [("<a b=\"1\">\u00e9\U0001F600</a>", "N'<a b=\"1\">\u00e9\U0001F600</a>'")]),
    ("c_variant", T("sql_variant"),
     [(SqlVariant(T("int"), 42), "CAST(42 AS int)"),
      (SqlVariant(T("nvarchar", length=10), "h\u00e9llo"), "CAST(N'h\u00e9llo' AS nvarchar(10))")]),
]
for _name, _t, _vals in CASES:
    _vals.append((None, "NULL"))


def literal_for(value, literal):
    """The T-SQL literal of a case (generated for the big values)."""
    if literal is not None:
        return literal
    if isinstance(value, (bytes, bytearray)):
        return _hexlit(bytes(value))
    return "N'%s'" % value.replace("'", "''")


def _hex_utf8(s: str) -> str:
    return s.encode("utf-8").hex()


def _fmt_dt(date: datetime.date, ticks: int) -> str:
    return "%s %s" % (date.isoformat(), SqlTime(ticks))


def canonical(t: SqlType, v) -> str:
    """Expected canonical text of value v of type t (db-lib form)."""
    if v is None:
        return "NULL"
    n = t.name
    if n == "bit":
        return "i:%d" % (1 if v else 0)
    if n in ("tinyint", "smallint", "int", "bigint"):
        return "i:%d" % v
    if n == "real":
        return "f4:" + struct.pack(">f", v).hex()
    if n == "float":
        return "f8:" + struct.pack(">d", v).hex()
    if n in ("decimal", "numeric", "money", "smallmoney"):
        return "n:" + format(v, "f")
    if n == "date":
        return "d:" + v.isoformat()
    if n == "time":
        return "t:%s" % v
    if n == "datetime2":
        return "dt:" + _fmt_dt(v.date, v.ticks)
    if n == "datetime":
        ms = (v.ticks300 * 10 + 1) // 3
        date = datetime.date(1900, 1, 1) + datetime.timedelta(days=v.days)
        return "dtm:%s %02d:%02d:%02d.%03d" % (date.isoformat(), ms // 3600000, ms // 60000 % 60,
                                               ms // 1000 % 60, ms % 1000)
    if n == "smalldatetime":
        date = datetime.date(1900, 1, 1) + datetime.timedelta(days=v.days)
        return "dt:" + _fmt_dt(date, v.minutes * 60 * TICKS_PER_SECOND)
    if n == "datetimeoffset":
        total = v.date.toordinal() * TICKS_PER_DAY + v.ticks - v.offset_minutes * 60 * TICKS_PER_SECOND
        days, ticks = divmod(total, TICKS_PER_DAY)
        off = v.offset_minutes
        return "dto:%s|%s%02d:%02d" % (_fmt_dt(datetime.date.fromordinal(days), ticks),
                                      "-" if off < 0 else "+", abs(off) // 60, abs(off) % 60)
    if n in ("char", "varchar", "nchar", "nvarchar", "text", "ntext", "xml"):
        return "s:" + _hex_utf8(v)
    if n in ("binary", "varbinary", "image"):
        return "b:" + bytes(v).hex()
    if n == "uniqueidentifier":
        return "g:" + str(v).lower()
    if n == "sql_variant":
        return "v:" + _hex_utf8(str(v.value))
    raise ValueError(n)


def expected_rows():
    """[(column name, type, [canonical...])] in CASES order."""
    return [(name, t, [canonical(t, v) for v, _lit in vals]) for name, t, vals in CASES]
