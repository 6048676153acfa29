"""Value conversion, comparison and sort keys with SQL Server semantics."""

from __future__ import annotations

import datetime
import decimal
import math
import re
import uuid

from ..results import SqlError
from ..sqltypes import (MAX, SqlDateTime, SqlDateTime2, SqlDateTimeOffset,
                        SqlSmallDateTime, SqlTime, SqlType, SqlVariant,
                        TICKS_PER_DAY, TICKS_PER_SECOND)
from . import types as T

D = decimal.Decimal
_DCTX = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_UP)
EPOCH_1900 = datetime.date(1900, 1, 1)
DATETIME_MIN_DAYS = (datetime.date(1753, 1, 1) - EPOCH_1900).days
SMALL_MAX_DAYS = (datetime.date(2079, 6, 6) - EPOCH_1900).days
TICKS300_PER_DAY = 300 * 86400


def type_label(t: SqlType) -> str:
    return t.name


def _conv_fail_245(v, src, dst):
    return SqlError(245, 16, 1, "Conversion failed when converting the %s value '%s' to data type %s."
                    % (src.name, v, dst.name))


def overflow(dst: SqlType, src_name="expression"):
    if dst.name in ("decimal", "numeric"):
        return SqlError(8115, 16, 8, "Arithmetic overflow error converting %s to data type numeric."
                        % src_name)
    return SqlError(8115, 16, 2, "Arithmetic overflow error converting %s to data type %s."
                    % (src_name, dst.name))


# ---------------------------------------------------------------- temporal ---

def round_ticks(ticks: int, scale: int) -> int:
    unit = 10 ** (7 - scale)
    return (ticks + unit // 2) // unit * unit


def dt2_from(date: datetime.date, ticks: int, scale: int):
    t = round_ticks(ticks, scale)
    if t >= TICKS_PER_DAY:
        t -= TICKS_PER_DAY
        date = date + datetime.timedelta(days=1)
    return SqlDateTime2(date, t)


def datetime_from(date: datetime.date, ticks: int) -> SqlDateTime:
    """Round 100 ns ticks to datetime's 1/300 s (.000/.003/.007)."""
    t300 = (ticks * 3 + 50000) // 100000
    days = (date - EPOCH_1900).days
    if t300 >= TICKS300_PER_DAY:
        t300 -= TICKS300_PER_DAY
        days += 1
    if days < DATETIME_MIN_DAYS or date.year > 9999 or (date.year == 9999 and days > (datetime.date(9999, 12, 31) - EPOCH_1900).days):
        raise SqlError(242, 16, 3, "The conversion of a varchar data type to a datetime data type "
                       "resulted in an out-of-range value.")
    return SqlDateTime(days, t300)


def smalldatetime_from(date: datetime.date, ticks: int) -> SqlSmallDateTime:
    # rounds to the minute: 29.998 s and more round up
    minutes = (ticks + 300010000) // (60 * TICKS_PER_SECOND)
    days = (date - EPOCH_1900).days
    if minutes >= 1440:
        minutes -= 1440
        days += 1
    if days < 0 or days > SMALL_MAX_DAYS:
        raise SqlError(242, 16, 3, "The conversion of a varchar data type to a smalldatetime data type "
                       "resulted in an out-of-range value.")
    return SqlSmallDateTime(days, minutes)


def temporal_parts(v):
    """(date or None, ticks or None, offset or None) of any temporal value."""
    if isinstance(v, SqlDateTime2):
        return v.date, v.ticks, None
    if isinstance(v, SqlDateTimeOffset):
        return v.date, v.ticks, v.offset_minutes
    if isinstance(v, SqlDateTime):
        return (EPOCH_1900 + datetime.timedelta(days=v.days),
                (v.ticks300 * 100000 + 1) // 3, None)
    if isinstance(v, SqlSmallDateTime):
        return EPOCH_1900 + datetime.timedelta(days=v.days), v.minutes * 60 * TICKS_PER_SECOND, None
    if isinstance(v, datetime.date):
        return v, None, None
    if isinstance(v, SqlTime):
        return None, v.ticks, None
    raise TypeError(v)


# [date][ T|space ][time][zone].  The date: yyyy-mm-dd with a T (ISO 8601),
# three numbers separated by / - . (their order is the session's date
# order), or 8/6 unseparated digits (always ymd).
_DT_RE = re.compile(
    r"^(?:(?P<a>\d{1,4})(?P<s1>[-/.])(?P<b>\d{1,4})(?P=s1)(?P<c>\d{1,4})|(?P<u>\d{8}|\d{6}))?"
    r"(?:(?P<sep>T|\s+)?(?P<hh>\d{1,2}):(?P<mi>\d{2})(?::(?P<ss>\d{2})(?:[.:](?P<fr>\d{1,7}))?)?"
    r"\s*(?P<ampm>[AaPp][Mm])?)?"
    r"\s*(?:(?P<z>Z)|(?P<sign>[+-])(?P<oh>\d{1,2}):(?P<om>\d{2}))?$")

# CONVERT styles that fix the date order of their input ("CAST and CONVERT",
# Date and time styles: the style is the input format when converting to a
# date/time type); any other style leaves the session's date order
_STYLE_ORDER = {1: "mdy", 101: "mdy", 10: "mdy", 110: "mdy", 22: "mdy",
                2: "ymd", 102: "ymd", 11: "ymd", 111: "ymd", 12: "ymd", 112: "ymd",
                3: "dmy", 103: "dmy", 4: "dmy", 104: "dmy", 5: "dmy", 105: "dmy",
                20: "ymd", 120: "ymd", 21: "ymd", 121: "ymd", 23: "ymd", 25: "ymd", 126: "ymd", 127: "ymd"}
_OLD_TYPES = ("datetime", "smalldatetime")


def _date_order(m, dst: SqlType, style, dateformat):
    """The order of the three date numbers a, b, c.  ISO 8601 with a T and a
    CONVERT style are fixed.  Otherwise SET DATEFORMAT / SET LANGUAGE decide
    ("datetime", Supported String Literal Formats; "SET DATEFORMAT"): with a
    four-digit year first, datetime and smalldatetime keep the session's
    order of day and month (yyyy-mm-dd is y-d-m under dmy), while date,
    datetime2 and datetimeoffset read ymd (ydm is not supported for them)."""
    if m.group("sep") == "T":
        return "ymd"
    if style in _STYLE_ORDER:
        return _STYLE_ORDER[style]
    fmt = dateformat
    if len(m.group("a")) == 4:
        if dst.name in _OLD_TYPES:
            return "ydm" if fmt.index("d") < fmt.index("m") else "ymd"
        return "ymd"
    if fmt == "ydm" and dst.name not in _OLD_TYPES:
        return "ymd"
    return fmt


def _year(text):
    y = int(text)
    if len(text) <= 2:
        y += 2000 if y <= 49 else 1900          # two digit year cutoff 2049
    return y


def _temporal_error(dst: SqlType, src_name):
    if dst.name in _OLD_TYPES:
        return SqlError(242, 16, 3, "The conversion of a %s data type to a %s data type resulted in an "
                        "out-of-range value." % (src_name, dst.name))
    return SqlError(241, 16, 1, "Conversion failed when converting date and/or time from character string.")


def parse_temporal(s: str, dst: SqlType, style=None, src_name="varchar"):
    """A date/time string as dst.  The empty string (or blanks) is the
    default 1900-01-01 00:00:00 ("CAST and CONVERT": an unspecified date
    component is 1900-01-01)."""
    from .languages import dateformat
    txt = s.strip()
    name = dst.name
    if txt == "":
        return make_temporal(EPOCH_1900, 0, 0 if name == "datetimeoffset" else None, dst)
    m = _DT_RE.match(txt)
    if not m or (m.group("a") is None and m.group("u") is None and m.group("hh") is None):
        raise SqlError(241, 16, 1, "Conversion failed when converting date and/or time from character string.")
    if m.group("sep") == "T" and (m.group("a") is None or m.group("s1") != "-" or len(m.group("a")) != 4):
        raise SqlError(241, 16, 1, "Conversion failed when converting date and/or time from character string.")
    date = EPOCH_1900
    try:
        if m.group("u") is not None:
            u = m.group("u")
            date = (datetime.date(int(u[:4]), int(u[4:6]), int(u[6:8])) if len(u) == 8
                    else datetime.date(_year(u[:2]), int(u[2:4]), int(u[4:6])))
        elif m.group("a") is not None:
            order = _date_order(m, dst, style, dateformat())
            parts = dict(zip(order, (m.group("a"), m.group("b"), m.group("c"))))
            if len(parts["m"]) > 2 or len(parts["d"]) > 2 or len(parts["y"]) == 3:
                raise ValueError
            date = datetime.date(_year(parts["y"]), int(parts["m"]), int(parts["d"]))
    except ValueError:
        raise _temporal_error(dst, src_name)
    ticks = 0
    if m.group("hh") is not None:
        try:
            h = int(m.group("hh"))
            ampm = m.group("ampm")
            if ampm:
                if h > 12:
                    raise ValueError
                h = h % 12 + (12 if ampm.upper() == "PM" else 0)
            ss = m.group("ss")
            if h > 23 or int(m.group("mi")) > 59 or (ss and int(ss) > 59):
                raise ValueError
            fr = (m.group("fr") or "").ljust(7, "0")
            ticks = ((h * 60 + int(m.group("mi"))) * 60 + int(ss or 0)) * TICKS_PER_SECOND + int(fr)
        except ValueError:
            raise SqlError(241, 16, 1, "Conversion failed when converting date and/or time from character string.")
    sign, z = m.group("sign"), m.group("z")
    offset = 0
    if sign:
        offset = (int(m.group("oh")) * 60 + int(m.group("om"))) * (1 if sign == "+" else -1)
        if abs(offset) > 840:
            raise SqlError(241, 16, 1, "Conversion failed when converting date and/or time from character string.")
    if (sign or z) and name in ("datetime", "smalldatetime", "date") and not (z and m.group("sep") == "T"):
        raise SqlError(241, 16, 1, "Conversion failed when converting date and/or time from character string.")
    return make_temporal(date, ticks, offset if (sign or z) else None, dst)


def make_temporal(date, ticks, offset, dst: SqlType):
    name = dst.name
    if date is None:
        date = EPOCH_1900
    if ticks is None:
        ticks = 0
    if name == "date":
        return date
    if name == "time":
        t = round_ticks(ticks, dst.scale if dst.scale is not None else 7)
        return SqlTime(t % TICKS_PER_DAY)
    if name == "datetime2":
        return dt2_from(date, ticks, dst.scale if dst.scale is not None else 7)
    if name == "datetimeoffset":
        d2 = dt2_from(date, ticks, dst.scale if dst.scale is not None else 7)
        return SqlDateTimeOffset(d2.date, d2.ticks, offset or 0)
    if name == "datetime":
        return datetime_from(date, ticks)
    if name == "smalldatetime":
        return smalldatetime_from(date, ticks)
    raise TypeError(name)


def format_temporal(v, src: SqlType, style=None) -> str:
    date, ticks, off = temporal_parts(v)
    if src.name == "date":
        return date.isoformat()
    scale = src.scale if src.scale is not None else 7
    if src.name == "datetime":
        if style in (None, 0, 100):
            h, rem = divmod(ticks // TICKS_PER_SECOND, 3600)
            mi = rem // 60
            ap = "AM" if h < 12 else "PM"
            h12 = h % 12 or 12
            return "%s %2d %d %2d:%02d%s" % (date.strftime("%b"), date.day, date.year, h12, mi, ap)
        ms = ((v.ticks300 * 10 + 1) // 3) % 1000
        secs = v.ticks300 // 300
        h, rem = divmod(secs, 3600)
        base = "%s %02d:%02d:%02d.%03d" % (date.isoformat(), h, rem // 60, rem % 60, ms)
        return base.replace(" ", "T") if style in (126, 127) else base
    if src.name == "smalldatetime":
        return "%s %02d:%02d:00" % (date.isoformat(), v.minutes // 60, v.minutes % 60)
    secs, frac = divmod(ticks, TICKS_PER_SECOND)
    h, rem = divmod(secs, 3600)
    t = "%02d:%02d:%02d" % (h, rem // 60, rem % 60)
    if scale:
        t += "." + ("%07d" % frac)[:scale]
    if src.name == "time":
        return t
    s = "%s %s" % (date.isoformat(), t)
    if src.name == "datetimeoffset":
        sign = "+" if off >= 0 else "-"
        s += " %s%02d:%02d" % (sign, abs(off) // 60, abs(off) % 60)
    return s


# ------------------------------------------------------------------ strings --

def to_codepage(s: str, t: SqlType = None) -> str:
    """A value stored as non-Unicode text of type t: characters outside the
    code page of t's collation (the database default, code page 1252, when
    t has none) become '?' ("Collation and Unicode support": non-Unicode
    data is stored in the collation's code page).  A _UTF8 collation keeps
    every character."""
    codec = T.codec(t)
    try:
        s.encode(codec)
        return s
    except UnicodeEncodeError:
        return s.encode(codec, errors="replace").decode(codec)


def char_length(s: str, t: SqlType) -> int:
    if t.name in T.UNICODE_TYPES:
        return len(s.encode("utf-16-le")) // 2
    return len(s.encode(T.codec(t), errors="replace"))


def truncate_units(s: str, n: int, unicode: bool, t: SqlType = None) -> str:
    if unicode:
        b = s.encode("utf-16-le", errors="surrogatepass")[:2 * n]
        return b.decode("utf-16-le", errors="ignore")
    codec = T.codec(t)
    if codec in ("utf-8",) or codec.startswith("cp9"):
        # multi-byte code pages: n counts bytes
        return s.encode(codec, errors="replace")[:n].decode(codec, errors="ignore")
    return s[:n]


def number_to_str(v, src: SqlType, style=None) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        if style == 3:
            # "Always 17 digits. Use for lossless conversion" (CAST and
            # CONVERT, float and real styles; SQL Server 2016 and later).
            # The exact layout is UNCONFIRMED: 17 significant digits,
            # scientific only for very large or small magnitudes.
            return "%#.17g" % v
        if src.name == "real":
            return "%g" % v
        r = repr(v)
        return r[:-2] if r.endswith(".0") else r
    if isinstance(v, D):
        # always the full decimal form: decimal(38,38) 1E-38 reads
        # 0.00000000000000000000000000000000000001 on SQL Server
        return format(v, "f")
    return str(v)


def value_to_str(v, src: SqlType, style=None) -> str:
    n = src.name
    if n in T.STRING_TYPES:
        return v
    if n in T.NUMERIC_TYPES:
        if n in ("money", "smallmoney") and style in (None, 0):
            return "%.2f" % v
        return number_to_str(v, src, style)
    if n in T.TEMPORAL_TYPES:
        return format_temporal(v, src, style)
    if n == "uniqueidentifier":
        return str(v).upper()
    if n in T.BINARY_TYPES:
        if style == 1:
            return "0x" + v.hex().upper()
        if style == 2:
            return v.hex().upper()
        return v.decode("latin-1")
    if n == "sql_variant":
        return value_to_str(v.value, v.base_type, style)
    if n == "hierarchyid":
        from . import clr
        return clr.hierarchyid_to_string(v)
    if n in ("geometry", "geography"):
        from . import clr
        return clr.spatial_to_wkt(v, n == "geography")
    return str(v)


# -------------------------------------------------------------- conversion --

def convert_temporal(v, src: SqlType, dst: SqlType):
    """convert() of a non-NULL value from one date/time type to another
    (CAST(tran_end_time AS datetime2(7)) of every change row calls it
    directly)."""
    s, d = src.name, dst.name
    date, ticks, off = temporal_parts(v)
    if d == "datetimeoffset":
        if off is None:
            off = 0
        return make_temporal(date, ticks, off, dst)
    if s == "datetimeoffset":
        pass  # SQL Server keeps the local part when dropping the offset
    if s == "time" and d in ("datetime", "smalldatetime", "datetime2"):
        date = EPOCH_1900
    if d == "time" and s == "date":
        raise explicit_error(src, dst)
    if s == "date" and d == "time":
        raise explicit_error(src, dst)
    return make_temporal(date, ticks, None, dst)


def convert(v, src: SqlType, dst: SqlType, style=None, explicit=False):
    """Convert v of type src to dst, raising SQL Server's errors."""
    if v is None:
        return None
    s, d = src.name, dst.name
    if d == "sql_variant":
        return v if isinstance(v, SqlVariant) else SqlVariant(src, v)
    if s == "sql_variant":
        return convert(v.value, v.base_type, dst, style, explicit)
    if d == "xml" and s != "xml":
        if s not in T.STRING_TYPES and s not in T.BINARY_TYPES:
            raise explicit_error(src, dst)
        from .xml_value import normalize
        text = v if s in T.STRING_TYPES else v.decode("utf-16-le" if v[:2] == b"\xff\xfe" else "utf-8",
                                                    errors="replace").lstrip("\ufeff")
        return normalize(text, style)
    if d in T.STRING_TYPES:
        text = value_to_str(v, src, style)
        if d not in T.UNICODE_TYPES:
            text = to_codepage(text, dst)
        if dst.length not in (None, MAX) and s not in T.STRING_TYPES and char_length(text, dst) > dst.length:
            if s in T.NUMERIC_TYPES and s not in ("float", "real"):
                raise SqlError(8115, 16, 2, "Arithmetic overflow error converting expression to data type %s." % d)
        if explicit and dst.length not in (None, MAX):
            text = truncate_units(text, dst.length, d in T.UNICODE_TYPES, dst)
        if d in ("char", "nchar") and dst.length not in (None, MAX):
            text = text + " " * (dst.length - char_length(text, dst))
        return text
    if d in T.INTEGER_TYPES:
        if s in T.STRING_TYPES:
            txt = v.strip()
            try:
                iv = int(txt)
            except ValueError:
                if d == "bit" and txt.upper() in ("TRUE", "FALSE"):
                    return txt.upper() == "TRUE"
                raise _conv_fail_245(v, src, dst)
        elif s in ("float", "real", "decimal", "numeric", "money", "smallmoney"):
            if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
                raise overflow(dst)
            iv = int(v)   # truncation toward zero, like SQL Server
        elif s in T.INTEGER_TYPES:
            iv = int(v)
        elif s in T.BINARY_TYPES:
            b = v[-8:] if d == "bigint" else v[-{"tinyint": 1, "smallint": 2, "int": 4, "bit": 1}[d]:]
            iv = int.from_bytes(b, "big", signed=d != "tinyint" and d != "bit")
        else:
            raise explicit_error(src, dst)
        if d == "bit":
            return iv != 0
        lo, hi = T.INT_RANGES[d]
        if not lo <= iv <= hi:
            raise overflow(dst)
        return iv
    if d in ("decimal", "numeric", "money", "smallmoney"):
        if s in T.STRING_TYPES:
            try:
                dv = D(v.strip())
                if not dv.is_finite():
                    raise decimal.InvalidOperation
            except decimal.InvalidOperation:
                raise SqlError(8114, 16, 5, "Error converting data type %s to %s." % (s, d))
        elif s in ("float", "real"):
            if math.isnan(v) or math.isinf(v):
                raise overflow(dst)
            dv = D(repr(v))
        elif s in T.NUMERIC_TYPES:
            dv = D(int(v)) if isinstance(v, (bool, int)) else v
        else:
            raise explicit_error(src, dst)
        if d in ("money", "smallmoney"):
            q = dv.quantize(D("0.0001"), context=_DCTX)
            lim = D("922337203685477.5807") if d == "money" else D("214748.3647")
            if abs(q) > lim + (1 if q < 0 else 0) * D("0.0001"):
                raise overflow(dst)
            return q
        scale = dst.scale or 0
        q = dv.quantize(D(1).scaleb(-scale), context=_DCTX)
        if q.adjusted() + 1 > (dst.precision or 18) - scale and q != 0:
            raise SqlError(8115, 16, 8, "Arithmetic overflow error converting %s to data type numeric."
                           % ("varchar" if s in T.STRING_TYPES and s not in T.UNICODE_TYPES else
                              "nvarchar" if s in T.UNICODE_TYPES else
                              "numeric" if s in ("decimal", "numeric") else
                              "float" if s in ("float", "real") else "expression"))
        return q
    if d in ("float", "real"):
        if s in T.STRING_TYPES:
            try:
                f = float(v.strip())
            except ValueError:
                raise SqlError(8114, 16, 5, "Error converting data type %s to float." % s)
        elif s in T.NUMERIC_TYPES:
            f = float(v)
        else:
            raise explicit_error(src, dst)
        if d == "real":
            import struct
            f = struct.unpack("<f", struct.pack("<f", f))[0]
        return f
    if d in T.TEMPORAL_TYPES:
        if s in T.STRING_TYPES:
            return parse_temporal(v, dst, style, "nvarchar" if s in T.UNICODE_TYPES else "varchar")
        if s in T.TEMPORAL_TYPES:
            return convert_temporal(v, src, dst)
        if s in T.NUMERIC_TYPES and d in ("datetime", "smalldatetime") and s not in ("float", "real"):
            days = int(v)
            return make_temporal(EPOCH_1900 + datetime.timedelta(days=days), 0, None, dst)
        raise explicit_error(src, dst)
    if d == "uniqueidentifier":
        if s == "uniqueidentifier":
            return v
        if s in T.STRING_TYPES:
            txt = v.strip()
            if txt.startswith("{") and txt.endswith("}"):
                txt = txt[1:-1]
            if len(txt) < 36 or not re.match(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", txt):
                raise SqlError(8169, 16, 2, "Conversion failed when converting from a character string "
                               "to uniqueidentifier.")
            return uuid.UUID(txt[:36])
        if s in T.BINARY_TYPES:
            return uuid.UUID(bytes_le=(v + bytes(16))[:16])
        raise explicit_error(src, dst)
    if d in T.BINARY_TYPES:
        if s in T.BINARY_TYPES:
            b = v
        elif s in T.STRING_TYPES:
            if style in (1, 2):
                h = v[2:] if style == 1 and v[:2].lower() == "0x" else v
                try:
                    b = bytes.fromhex(h)
                except ValueError:
                    raise SqlError(8114, 16, 5, "Error converting data type %s to %s." % (s, d))
            else:
                b = v.encode("utf-16-le") if s in T.UNICODE_TYPES else v.encode(T.codec(src), errors="replace")
        elif s in T.INTEGER_TYPES:
            size = {"bit": 1, "tinyint": 1, "smallint": 2, "int": 4, "bigint": 8}[s]
            b = int(v).to_bytes(size, "big", signed=True)
        elif s == "uniqueidentifier":
            b = v.bytes_le
        else:
            raise explicit_error(src, dst)
        if d in ("binary",) and dst.length not in (None, MAX) and s in T.INTEGER_TYPES:
            # "When other data types are converted to binary or varbinary, the
            # data is padded or truncated on the left" (page "binary and
            # varbinary"); strings and binary are cut and padded on the right
            b = (bytes(max(0, dst.length - len(b))) + b)[-dst.length:]
        elif d in ("binary",) and dst.length not in (None, MAX):
            if explicit or s not in T.BINARY_TYPES:
                b = b[:dst.length]
            b = b + bytes(max(0, dst.length - len(b)))
        elif d == "varbinary" and explicit and dst.length not in (None, MAX):
            b = b[:dst.length]
        elif d == "timestamp":
            b = (bytes(8) + b)[-8:]
        return b
    if d in ("hierarchyid", "geometry", "geography"):
        if s in T.BINARY_TYPES or s == d:
            return v
        if s in T.STRING_TYPES:
            from . import clr
            if d == "hierarchyid":
                return clr.hierarchyid_parse(v)
            return clr.wkt_to_spatial(v, 4326 if d == "geography" else 0, d == "geography")
        raise explicit_error(src, dst)
    raise explicit_error(src, dst)


def explicit_error(src: SqlType, dst: SqlType):
    return SqlError(529, 16, 2, "Explicit conversion from data type %s to %s is not allowed."
                    % (src.name, dst.name))


def store_check(v, t: SqlType, table: str, column: str):
    """Check a value already converted to column type t for truncation (2628)."""
    if v is None or t.length in (None, MAX):
        return v
    n = t.name
    if n in ("varchar", "nvarchar", "char", "nchar"):
        if char_length(v, t) > t.length:
            if char_length(v.rstrip(" "), t) <= t.length:
                return truncate_units(v, t.length, n[0] == "n", t)   # trailing blanks are trimmed silently
            raise SqlError(2628, 16, 1, "String or binary data would be truncated in table '%s', column '%s'. "
                           "Truncated value: '%s'." % (table, column,
                                                       truncate_units(v, t.length, n[0] == "n", t)))
        return v
    if n in ("binary", "varbinary"):
        if len(v) > t.length:
            raise SqlError(2628, 16, 1, "String or binary data would be truncated in table '%s', column '%s'. "
                           "Truncated value: '%s'." % (table, column, v[:t.length].decode("latin-1")))
        if n == "binary" and len(v) < t.length:
            return v + bytes(t.length - len(v))
    return v


# -------------------------------------------------------------- comparison --

def uuid_sort_bytes(u: uuid.UUID) -> bytes:
    b = u.bytes_le
    return b[10:16] + b[8:10] + b[6:8] + b[4:6] + b[0:4]


def sort_key_fn(t: SqlType):
    """A function mapping a non-NULL value of type t to a key that orders and
    compares equal exactly as SQL Server does."""
    n = t.name
    if n in ("char", "varchar", "nchar", "nvarchar", "text", "ntext", "sysname", "xml"):
        if T.is_case_insensitive(t):
            return lambda v: v.rstrip(" ").casefold()
        return lambda v: v.rstrip(" ")
    if n == "uniqueidentifier":
        return uuid_sort_bytes
    if n == "datetimeoffset":
        return lambda v: v.utc_key()
    if n == "bit":
        return int
    if n == "sql_variant":
        return lambda v: (T.precedence(v.base_type), sort_key_fn(v.base_type)(v.value))
    return _identity


def _identity(v):
    return v


def comparison_type(t1: SqlType, t2: SqlType) -> SqlType:
    """The type both operands convert to before comparing."""
    if t1.name in T.STRING_TYPES and t2.name in T.STRING_TYPES:
        if not T.is_case_insensitive(t1):
            return t1
        return t2 if not T.is_case_insensitive(t2) else (t1 if T.precedence(t1) >= T.precedence(t2) else t2)
    return T.higher(t1, t2)
